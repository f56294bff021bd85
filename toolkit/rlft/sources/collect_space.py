"""Room on the disk for what Minari's storage writes while ``rlft data collect`` runs, checked before each write.

HDF5 does not report a full disk (or a file-size limit) to its caller: the failed write is reported only when h5py
frees its objects, as tracebacks it cannot raise, and the library's state after it crashed the process (exit 139),
leaving the staging folder behind. So the check comes first: each batch of episodes is measured before the storage
is asked to write it, and refused with one line when the file system (or ``ulimit -f``) has no room for it with a
margin; the staging folder is then removed as on any other error. Arrow storage goes through the same check."""

from __future__ import annotations

import errno
import os
import resource
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from rlft.core.faults import free_bytes, output_error

# HDF5 adds chunk indexes and metadata to the raw bytes of an episode; a margin covers them and other writers.
OVERHEAD = 2
MARGIN_BYTES = 16 << 20
FILE_MARGIN_BYTES = 64 << 10  # against a per-file limit (RLIMIT_FSIZE) the margin is what HDF5 adds per write


def payload_bytes(value) -> int:
    """The bytes of the arrays in an episode buffer's field (nested dicts, tuples and lists of steps)."""
    if value is None:
        return 0
    if isinstance(value, dict):
        return sum(payload_bytes(v) for v in value.values())
    if isinstance(value, list | tuple) and value and isinstance(value[0], dict | tuple | list):
        return sum(payload_bytes(v) for v in value)
    try:
        return int(np.asarray(value).nbytes)
    except (TypeError, ValueError):
        return 0


def episode_bytes(episode) -> int:
    fields = ("observations", "actions", "rewards", "terminations", "truncations", "infos")
    return OVERHEAD * sum(payload_bytes(getattr(episode, name, None)) for name in fields)


def _largest_file(folder: Path) -> int:
    try:
        return max((p.stat().st_size for p in folder.rglob("*") if p.is_file()), default=0)
    except OSError:
        return 0


def check_room(folder: Path, need: int, output: Path) -> None:
    """Raise a one-line write fault (``cannot write --dataset-id OUTPUT: the disk is full``) unless ``need`` bytes
    more fit under ``folder``: the file system's free space (less a margin) and the per-file size limit."""
    free = free_bytes(folder)
    if free is not None and free < need + MARGIN_BYTES:
        raise output_error(output, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), "--dataset-id")
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY and _largest_file(folder) + need + FILE_MARGIN_BYTES > limit:
        raise output_error(output, OSError(errno.EFBIG, f"{os.strerror(errno.EFBIG)} (ulimit -f allows "
                                                        f"{limit:,} bytes a file)"), "--dataset-id")


def guard_storage(storage, output: Path) -> None:
    """Make ``storage.update_episodes`` (Minari's only bulk writer) check for room first."""
    write = getattr(storage, "update_episodes", None)
    folder = getattr(storage, "data_path", None)
    if write is None or folder is None:  # another Minari: left as it is
        return

    def update_episodes(episodes: Iterable) -> None:
        episodes = list(episodes)
        check_room(Path(folder), sum(episode_bytes(e) for e in episodes), output)
        write(episodes)

    storage.update_episodes = update_episodes
