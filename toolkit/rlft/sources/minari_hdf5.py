"""Minari's flat HDF5 episodes read through h5py's low-level API (about twice as fast as Minari's reader for plain
Box and Discrete spaces), with the one info rlft reads: DART data's executed action."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from rlft.sources.rollouts import EXECUTED_INFO

_EPISODE_KEYS = ("observations", "actions", "rewards", "terminations", "truncations")


def flat_hdf5_file(ds) -> Path | None:
    """The HDF5 file of a dataset whose spaces are a plain Box or Discrete (one array per episode and key), or
    None: other storages, structured spaces and JPEG-encoded images take Minari's own reader."""
    from gymnasium import spaces
    from minari.dataset.minari_storage import is_image_space

    storage, flat = ds.storage, (spaces.Box, spaces.Discrete)
    path = getattr(storage, "_file_path", None)
    if type(storage).__name__ != "HDF5Storage" or path is None:
        return None
    for space in (ds.observation_space, ds.action_space):
        if not isinstance(space, flat) or (getattr(storage, "_jpeg_encoding", True) and is_image_space(space)):
            return None
    return Path(path)


def _read_array(fid, name: str) -> np.ndarray:
    import h5py

    dataset = h5py.h5d.open(fid, name.encode())
    values = np.empty(dataset.get_space().shape, dataset.dtype)
    if values.size:
        dataset.read(h5py.h5s.ALL, h5py.h5s.ALL, values)
    return values


def read_flat_hdf5(path: Path, episode_indices):
    """Minari's HDF5 episodes (the same arrays as ``HDF5Storage.get_episodes``) through h5py's low-level API.

    h5py's high-level ``File``/``Group``/``Dataset`` objects cost about 0.1 ms of Python each, and Minari opens
    six per episode; this reads the same episodes in about half the time (``benchmarks/serialize.py``, reading
    table). Of the infos only the executed action of DART data is read (``noisy_execution``)."""
    import h5py
    from minari.dataset.episode_data import EpisodeData

    fid = h5py.h5f.open(os.fsencode(path), h5py.h5f.ACC_RDONLY)
    try:
        for index in episode_indices:
            arrays = {key: _read_array(fid, f"episode_{int(index)}/{key}") for key in _EPISODE_KEYS}
            try:
                executed = _read_array(fid, f"episode_{int(index)}/infos/{EXECUTED_INFO}")
            except KeyError:  # not DART data, or recorded before rlft kept the executed action
                executed = None
            yield EpisodeData(id=int(index), infos={} if executed is None else {EXECUTED_INFO: executed}, **arrays)
    finally:
        fid.close()
