"""``rlft data serialize``: a Minari dataset -> a prompt/completion dataset folder in the Hub layout.

A codec fitted on the data (bin edges from quantiles, token ranges) takes two passes over the episodes: the
first checks every value is finite, measures returns and fits the codec; the second encodes whole chunks of
episodes at once and streams them into Parquet shards. Episodes stay in memory between the passes when they fit
(``in_memory_steps``); larger sources are read twice instead, so memory stays bounded. A codec fixed by its
options alone (``raw``, edges over finite bounds) takes one pass, unless NaN episodes may be dropped: the splits
are known before a step is read, so each episode is checked and encoded as it is read, while the Parquet writer
works on the other core.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from rlft.codecs.base import Codec
from rlft.codecs.factory import codec_fits_on_data, make_codec
from rlft.core.console import progress
from rlft.core.errors import InvalidInputError
from rlft.datasets.folder import write_dataset_folder
from rlft.datasets.layout import SPLITS
from rlft.datasets.minari_episodes import Episode, _batches, _chunk, _iter_source, _Scan, check_spaces
from rlft.datasets.offline import build_records
from rlft.datasets.serialize_options import SerializeConfig, check_observation_size, validate_config
from rlft.datasets.serialize_summary import _card, _plot_returns, _print_summary, _summary
from rlft.sources.minari_source import load_minari


def split_episodes(ids: np.ndarray, fractions, seed: int) -> dict[str, np.ndarray]:
    """Assign whole episodes to splits with a seeded permutation (no episode is in two splits).

    Each split with a non-zero fraction gets at least one episode when there are enough episodes; empty
    splits are left out.
    """
    rng = np.random.default_rng(seed)
    perm = rng.permutation(np.asarray(ids))
    n = len(perm)
    sizes = [int(round(f * n)) for f in fractions[1:]]
    for i, f in enumerate(fractions[1:]):
        if f > 0 and sizes[i] == 0 and n - sum(sizes) > 1:
            sizes[i] = 1
    while n - sum(sizes) < 1:  # train keeps at least one episode
        sizes[int(np.argmax(sizes))] -= 1
    n_val, n_test = sizes
    parts = {"train": perm[: n - n_val - n_test], "validation": perm[n - n_val - n_test : n - n_test],
             "test": perm[n - n_test :]}
    return {name: np.sort(parts[name]) for name in SPLITS if len(parts[name])}


def make_dataset_codec(config: SerializeConfig, dataset, scan: _Scan | None) -> Codec:
    """The codec of ``config`` for ``dataset``, fitted on ``scan``'s sample (None: a codec that fits on nothing)."""

    env_spec = dataset.spec.env_spec
    obs, act = scan.sample() if scan is not None else (None, None)
    return make_codec(
        config.format,
        dataset.observation_space,
        dataset.action_space,
        observations=obs,
        actions=act,
        precision=config.precision,
        bins=config.bins,
        edges_from=config.edges_from,
        tokens=config.tokens,
        prompt_style=config.prompt_style,
        history=config.history,
        return_to_go=config.return_to_go,
        env_id=env_spec.id if env_spec else None,
        env_kwargs=dict(env_spec.kwargs) if env_spec else None,
        system=config.system,
        separator=config.separator,
        prefill=config.prefill,
        profile=config.profile,
        turns=config.turns,  # saved with the codec: training and evaluation read the same turns
    )


def serialize(config: SerializeConfig) -> dict:
    """Write the dataset folder for ``config`` and return its summary (also printed as tables)."""

    validate_config(config)
    dataset = load_minari(config.source, download=config.download, timeout=config.download_timeout)
    check_observation_size(dataset.observation_space, config.allow_large_observations)
    structure = check_spaces(dataset)
    ids = np.asarray(dataset.episode_indices, dtype=np.int64)
    if config.max_episodes is not None:
        ids = ids[: config.max_episodes]
    if not len(ids):
        raise InvalidInputError(f"no episodes in {config.source}")
    if config.drop_nonfinite or codec_fits_on_data(config.format, dataset.observation_space, dataset.action_space,
                                                   edges_from=config.edges_from):
        scan = _scan_pass(config, dataset, ids, structure)
        codec = make_dataset_codec(config, dataset, scan)
        splits = split_episodes(np.array(sorted(scan.returns)), config.splits, config.seed)

        def episodes_of(split_ids) -> Iterable[Episode]:
            return ((scan.episodes[int(i)] for i in split_ids) if scan.keep
                    else _iter_source(dataset, split_ids, structure))
    else:  # one pass: every episode is used, so the splits are known now; each is checked as it is encoded
        scan = _Scan(0, drop_nonfinite=False, fit=False)
        codec = make_dataset_codec(config, dataset, None)
        splits = split_episodes(np.sort(ids), config.splits, config.seed)

        def episodes_of(split_ids) -> Iterable[Episode]:
            return (ep for ep in _iter_source(dataset, split_ids, structure) if scan.add(ep))

    summary = _write_folder(config, dataset, codec, splits, scan, episodes_of)
    _print_summary(summary)
    return summary


def _scan_pass(config: SerializeConfig, dataset, ids: np.ndarray, structure: dict | None) -> _Scan:
    """Pass 1 of a codec fitted on the data (or of a source whose NaN episodes may be dropped)."""
    scan = _Scan(config.in_memory_steps, config.drop_nonfinite)
    with progress(transient=True) as bar:
        task = bar.add_task("scanning episodes", total=len(ids))
        for ep in _iter_source(dataset, ids, structure):
            scan.add(ep)
            bar.advance(task)
    if not scan.returns:
        raise InvalidInputError(f"no usable episodes in {config.source}")
    return scan


def _write_folder(config: SerializeConfig, dataset, codec: Codec, splits: dict[str, np.ndarray], scan: _Scan,
                  episodes_of) -> dict:
    """Encode each split's episodes (``episodes_of(ids)``) in chunks into the folder; the summary is taken once
    every episode has been through ``scan``."""
    with write_dataset_folder(config.out, config.overwrite) as folder, progress() as bar:
        task = bar.add_task("serializing episodes", total=sum(len(ids) for ids in splits.values()))

        def tables(split_ids) -> Iterator:
            for batch in _batches(episodes_of(split_ids), config.chunk_steps):
                yield build_records(_chunk(batch), codec)
                bar.advance(task, len(batch))

        folder.write_splits({name: tables(split_ids) for name, split_ids in splits.items()})
        folder.save_codec(codec)
        summary = _summary(config, dataset, scan, splits, codec)
        if config.plot:
            _plot_returns(folder.plot_path("returns.png"), scan, splits, summary)
        folder.write_info(summary)
        folder.write_card(_card(config, summary, codec, splits, scan, dataset))
    return summary
