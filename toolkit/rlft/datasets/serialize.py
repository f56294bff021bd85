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
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rlft.codecs.base import Codec
from rlft.codecs.discretized import EDGE_SOURCES
from rlft.codecs.factory import codec_fits_on_data, make_codec
from rlft.codecs.numeric import PROFILES, SEPARATORS
from rlft.codecs.structured import flatten, is_structured
from rlft.codecs.template import PROMPT_STYLES
from rlft.core.console import console, kv_table, progress, records_table
from rlft.core.errors import InvalidInputError
from rlft.core.io import check_output_dir
from rlft.core.plotting import figure, save_figure
from rlft.datasets.card import CardSpec, message_text, read_extra_markdown
from rlft.datasets.folder import write_dataset_folder
from rlft.datasets.layout import SPLITS
from rlft.datasets.offline import GLOSSARY, EpisodeChunk, build_records
from rlft.envs.spaces import describe_space, space_to_dict
from rlft.sources.minari_source import datasets_root, iterate_episodes, load_minari

FORMATS = ("raw", "discretized", "tokenized", "binned")
_SAMPLE_ROWS = 200_000  # rows kept to fit quantile bin edges; min/max rows are always added


@dataclass
class SerializeConfig:
    source: str
    out: Path
    format: str = "raw"
    precision: int = 3
    bins: int = 32
    edges_from: str = "data"
    tokens: int = 1000
    prompt_style: str = "plain"
    history: int = 0
    turns: int = 0  # K > 1: each prompt is the episode so far as its last K turns (the episodic GRPO format)
    return_to_go: bool = False
    splits: tuple[float, float, float] = (0.8, 0.1, 0.1)
    seed: int = 0
    drop_nonfinite: bool = False
    max_episodes: int | None = None
    chunk_steps: int = 100_000
    in_memory_steps: int = 2_000_000
    download: bool = False
    card_extra: Path | None = None
    plot: bool = False  # plots/returns.png: opt-in, matplotlib's import is most of a small dataset's run time
    allow_large_observations: bool = False
    overwrite: bool = False
    system: str | None = None
    separator: str = " "
    prefill: bool = False
    profile: str | None = None
    extra_info: dict = field(default_factory=dict)


@dataclass
class Episode:
    id: int
    observations: np.ndarray  # N + 1 observations
    actions: np.ndarray
    rewards: np.ndarray
    terminations: np.ndarray
    truncations: np.ndarray


def validate_config(config: SerializeConfig) -> None:
    """Every option is checked before the source is read."""
    _check_prompt_options(config)
    _check_codec_options(config)
    if config.max_episodes is not None and config.max_episodes < 1:
        raise InvalidInputError(f"--max-episodes must be at least 1, got {config.max_episodes}",
                                hint="leave it out to serialize every episode")
    if config.chunk_steps < 1 or config.in_memory_steps < 0:
        raise InvalidInputError("chunk_steps must be >= 1 and in_memory_steps >= 0")
    check_output_dir(config.out, config.overwrite, inputs=serialize_inputs(config))
    read_extra_markdown(config.card_extra)  # a missing or unreadable file is refused before the data scan


def serialize_inputs(config: SerializeConfig) -> list[tuple[str, str | Path | None]]:
    """The local files and folders serialize reads: ``--out`` must stay clear of them."""

    source = Path(config.source).expanduser()
    if not source.exists() and "/" in config.source and not Path(config.source).is_absolute():
        source = datasets_root() / config.source  # a local Minari id
    return [("Minari dataset", source), ("--card-extra", config.card_extra)]


def _check_prompt_options(config: SerializeConfig) -> None:
    """Format, prompt style, splits and history."""
    if config.format not in FORMATS:
        raise InvalidInputError(f"--format must be one of {FORMATS}, got {config.format!r}")
    if config.prompt_style not in PROMPT_STYLES:
        raise InvalidInputError(f"--prompt-style must be one of {PROMPT_STYLES}, got {config.prompt_style!r}")
    fractions = np.asarray(config.splits, dtype=float)
    if len(fractions) != 3 or np.any(fractions < 0) or not np.isclose(fractions.sum(), 1.0) or fractions[0] <= 0:
        raise InvalidInputError(
            f"--splits must be three non-negative fractions train,validation,test summing to 1 (train > 0), "
            f"got {','.join(map(str, config.splits))}"
        )
    if config.history < 0:
        raise InvalidInputError("--history must be >= 0")
    if config.turns < 0:
        raise InvalidInputError(f"--turns must be >= 0, got {config.turns}")
    if config.turns > 1 and (config.prefill or config.profile is not None):
        raise InvalidInputError("--turns writes conversations; a prefilled answer tag (--prefill, --profile) needs "
                                "single-turn prompts", hint="drop one of them")


def _check_codec_options(config: SerializeConfig) -> None:
    """The codec's options, whatever the format (a --bins 0 beside --format raw is a mistake too)."""

    if not 0 <= config.precision <= 6:
        raise InvalidInputError("--precision must be in 0..6")
    if config.bins < 2:
        raise InvalidInputError(f"--bins must be at least 2, got {config.bins}")
    if config.tokens < 2:
        raise InvalidInputError(f"--tokens must be at least 2, got {config.tokens}")
    if config.edges_from not in EDGE_SOURCES:
        raise InvalidInputError(f"--edges-from must be one of {', '.join(EDGE_SOURCES)}, got {config.edges_from!r}")
    if config.separator not in SEPARATORS:
        raise InvalidInputError(f"--separator must be ' ' or ',', got {config.separator!r}")
    if config.profile is not None and config.profile not in PROFILES:
        raise InvalidInputError(f"unknown --profile {config.profile!r}", hint=f"known: {', '.join(PROFILES)}")
    if config.prefill and config.prompt_style != "plain" and config.profile is None:
        raise InvalidInputError("--prefill needs --prompt-style plain")


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


def _episode(raw, structure: dict | None = None) -> Episode:
    """An episode as arrays; a structured observation space's (Dict, Tuple...) observations as flat rows."""

    obs = np.asarray(raw.observations) if structure is None else flatten(structure, raw.observations, single=False)
    steps = len(raw.rewards)
    if len(obs) != steps + 1 or len(raw.actions) != steps:
        raise InvalidInputError(
            f"episode {raw.id} of the Minari source does not line up: {len(obs)} observations, {len(raw.actions)} "
            f"actions and {steps} rewards, where Minari keeps T+1 observations for T actions and rewards",
            hint="re-create the dataset with Minari's DataCollector or create_dataset_from_buffers")
    return Episode(int(raw.id), obs, np.asarray(raw.actions), np.asarray(raw.rewards),
                   np.asarray(raw.terminations), np.asarray(raw.truncations))


def check_spaces(dataset) -> dict | None:
    """Both spaces checked before any episode is read (one line naming an unsupported space and its key path);
    returns the observation space's dict when it is structured (Dict, Tuple, MultiDiscrete, MultiBinary)."""

    obs = space_to_dict(dataset.observation_space, "observation")
    act = space_to_dict(dataset.action_space, "action")
    if act["type"] not in ("box", "discrete"):
        raise InvalidInputError(f"actions must be a Box or Discrete space, this dataset's are {describe_space(act)}",
                                hint="structured (Dict, Tuple, Multi*) spaces are supported for observations")
    return obs if is_structured(obs) else None


def _check_finite(ep: Episode) -> str | None:
    """A description of the first NaN/inf in the episode, or None."""
    for name, values in (("observation", ep.observations), ("action", ep.actions), ("reward", ep.rewards)):
        values = np.asarray(values)
        if values.dtype.kind == "f" and not np.all(np.isfinite(values)):
            bad = np.argwhere(~np.isfinite(values))[0]
            return f"episode {ep.id} step {int(bad[0])}: {name} is {values[tuple(bad)]}"
    return None


def _chunk(episodes: list[Episode]) -> EpisodeChunk:
    lengths = [len(e.rewards) for e in episodes]
    return EpisodeChunk(
        observations=np.concatenate([e.observations[: len(e.rewards)] for e in episodes]),
        next_observations=np.concatenate([e.observations[1: len(e.rewards) + 1] for e in episodes]),
        actions=np.concatenate([e.actions for e in episodes]),
        rewards=np.concatenate([e.rewards for e in episodes]),
        terminated=np.concatenate([e.terminations for e in episodes]),
        truncated=np.concatenate([e.truncations for e in episodes]),
        episode_id=np.repeat([e.id for e in episodes], lengths),
        step=np.concatenate([np.arange(n) for n in lengths]),
    )


class _Scan:
    """Finiteness, returns and lengths of the episodes; with ``fit``, a bounded sample of the data and each
    dimension's range to fit the codec on; episodes kept in memory up to ``in_memory_steps``."""

    def __init__(self, in_memory_steps: int, drop_nonfinite: bool, fit: bool = True):
        self.keep, self.in_memory_steps, self.drop_nonfinite = in_memory_steps > 0, in_memory_steps, drop_nonfinite
        self.fit = fit
        self.episodes: dict[int, Episode] = {}
        self.returns: dict[int, float] = {}
        self.lengths: dict[int, int] = {}
        self.dropped: list[str] = []
        self._obs, self._act, self._rows = [], [], 0
        self.steps = 0  # steps of the usable episodes so far
        self._lo = self._hi = None

    def add(self, ep: Episode) -> bool:
        """Measure ``ep``; False if it is dropped for a NaN/inf (``drop_nonfinite``), else the error says where."""
        problem = _check_finite(ep)
        if problem:
            if not self.drop_nonfinite:
                raise InvalidInputError(
                    f"non-finite value in {problem}", hint="pass --drop-nonfinite to drop such episodes"
                )
            self.dropped.append(problem)
            return False
        self.returns[ep.id] = float(np.sum(ep.rewards))
        self.lengths[ep.id] = len(ep.rewards)
        self.steps += len(ep.rewards)
        if self.keep:
            self.episodes[ep.id] = ep
            if self.steps > self.in_memory_steps:  # too big to hold: pass 2 reads again
                self.keep = False
                self.episodes.clear()
        if self.fit:
            self._sample(ep)
        return True

    def _sample(self, ep: Episode) -> None:
        obs, act = ep.observations[: len(ep.rewards)], ep.actions
        if self._rows < _SAMPLE_ROWS:
            self._obs.append(obs)
            self._act.append(act)
            self._rows += len(obs)
        numeric = obs.dtype.kind in "biuf"  # Text observations have no range (nothing is fitted on them)
        lo = (obs.min(axis=0) if numeric else None, act.min(axis=0)) if len(obs) else None
        hi = (obs.max(axis=0) if numeric else None, act.max(axis=0)) if len(obs) else None
        if lo is not None:
            self._lo = lo if self._lo is None else tuple(None if a is None else np.minimum(a, b)
                                                         for a, b in zip(self._lo, lo, strict=True))
            self._hi = hi if self._hi is None else tuple(None if a is None else np.maximum(a, b)
                                                         for a, b in zip(self._hi, hi, strict=True))

    def sample(self) -> tuple[np.ndarray, np.ndarray]:
        """Sampled rows plus each dimension's exact min and max rows (token ranges must cover all data)."""
        extremes = [] if self._lo[0] is None else [np.stack([self._lo[0], self._hi[0]])]
        obs = np.concatenate(self._obs + extremes)
        act = np.concatenate(self._act + [np.stack([self._lo[1], self._hi[1]])])
        return obs, act


def _iter_source(dataset, ids, structure: dict | None = None) -> Iterator[Episode]:
    source = dataset.storage.metadata.get("dataset_id", "")
    for raw in iterate_episodes(dataset, source, [int(i) for i in ids]):
        yield _episode(raw, structure)


def _batches(episodes: Iterable[Episode], chunk_steps: int) -> Iterator[list[Episode]]:
    """Consecutive episodes in batches of at least ``chunk_steps`` steps (the last one may hold fewer)."""
    batch, steps = [], 0
    for ep in episodes:
        batch.append(ep)
        steps += len(ep.rewards)
        if steps >= chunk_steps:
            yield batch
            batch, steps = [], 0
    if batch:
        yield batch


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


LARGE_OBSERVATION = 1024  # values per observation beyond which an image-like Box is refused by default


def check_observation_size(space, allow_large: bool) -> None:
    """Refuse image-like observations (more than 1,024 values) in one line: as text they make prompts of
    thousands of tokens. ``--allow-large-observations`` lets them through."""
    from gymnasium import spaces

    if allow_large or not isinstance(space, spaces.Box):
        return
    size = int(np.prod(space.shape))
    if size > LARGE_OBSERVATION:
        raise InvalidInputError(
            f"observations of shape {tuple(space.shape)} ({size:,} values, {space.dtype}) would make prompts of "
            f"thousands of tokens", hint="shrink them first (gymnasium's ResizeObservation / GrayscaleObservation "
            "wrappers when collecting), or pass --allow-large-observations")


def serialize(config: SerializeConfig) -> dict:
    """Write the dataset folder for ``config`` and return its summary (also printed as tables)."""

    validate_config(config)
    dataset = load_minari(config.source, download=config.download)
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


def source_metadata(dataset) -> dict:
    """What the source's own metadata says (no episode is read: pass 1 already measured the returns)."""
    meta = getattr(dataset.storage, "metadata", {}) or {}
    keys = ("dataset_id", "algorithm_name", "author", "minari_version", "data_format", "ref_min_score",
            "ref_max_score", "total_episodes", "total_steps")
    info = {k: meta.get(k) for k in keys if meta.get(k) is not None}
    if isinstance(info.get("author"), set | list | tuple):
        info["author"] = sorted(info["author"])
    if isinstance(meta.get("rlft"), dict):
        info["rlft"] = meta["rlft"]
    return info


def _summary(config, dataset, scan: _Scan, splits, codec: Codec) -> dict:
    returns = np.array([scan.returns[i] for i in sorted(scan.returns)])
    source = source_metadata(dataset)
    per_split = {
        name: {
            "episodes": int(len(ids)),
            "steps": int(sum(scan.lengths[int(i)] for i in ids)),
            "return_mean": float(np.mean([scan.returns[int(i)] for i in ids])),
        }
        for name, ids in splits.items()
    }
    summary = {
        "kind": "offline-rl",
        "source": config.source,
        "env_id": codec.env_id,
        "source_info": source,
        "codec": codec.describe(),
        "format": config.format,
        "prompt_style": config.prompt_style,
        "history": config.history,
        "turns": config.turns,
        "return_to_go": config.return_to_go,
        "seed": config.seed,
        "episodes": int(len(returns)),
        "steps": scan.steps,
        "return_mean": float(returns.mean()),
        "return_std": float(returns.std()),
        "return_min": float(returns.min()),
        "return_max": float(returns.max()),
        "dropped_episodes": scan.dropped,
        "splits": per_split,
        **config.extra_info,
    }
    score = _normalized(dataset, returns)
    if score is not None:
        summary["normalized_score_mean"] = score
    return summary


def _normalized(dataset, returns: np.ndarray) -> float | None:
    """D4RL-style normalized score x100 of the mean return (Minari's own ``get_normalized_score``), when the
    source has reference scores."""
    from minari import get_normalized_score

    meta = getattr(dataset.storage, "metadata", {}) or {}
    lo, hi = meta.get("ref_min_score"), meta.get("ref_max_score")
    if lo is None or hi is None or hi == lo:
        return None
    return float(100.0 * get_normalized_score(dataset, np.asarray([returns.mean()]))[0])


def _plot_returns(path: Path, scan: _Scan, splits, summary: dict) -> None:
    fig, (ax1, ax2) = figure(1, 2, figsize=(10, 3.6))
    for name, ids in splits.items():
        values = [scan.returns[int(i)] for i in ids]
        ax1.hist(values, bins=min(30, max(5, len(values) // 3)), alpha=0.6, label=f"{name} ({len(values)})")
    ax1.set(title="Episode return distribution", xlabel="return", ylabel="episodes")
    ax1.legend()
    ordered = sorted(scan.returns)
    ax2.plot(ordered, [scan.returns[i] for i in ordered], ".", ms=3)
    ax2.set(title="Return per episode", xlabel="episode id", ylabel="return")
    fig.suptitle(f"{summary['source']}  mean {summary['return_mean']:.1f} +- {summary['return_std']:.1f}")
    fig.tight_layout()
    save_figure(fig, path)


def _card(config: SerializeConfig, summary: dict, codec: Codec, splits, scan: _Scan, dataset) -> CardSpec:
    first = next(iter(_iter_source(dataset, splits["train"][:1], check_spaces(dataset)))) if not scan.keep else \
        scan.episodes[int(splits["train"][0])]
    row = build_records(_chunk([first]), codec).slice(0, 1).to_pylist()[0]
    example_prompt, example_completion = message_text(row["prompt"]), message_text(row["completion"])
    env = (codec.env_id or "unknown").split("-")[0].lower()
    return CardSpec(
        pretty_name=f"{codec.env_id} {config.source} ({config.format})",
        template="offline_rl.md",
        splits={name: 0 for name in splits},
        tags=[env, "offline-rl", "minari", config.format, "decision-making"],
        context={
            "summary": summary,
            "source": config.source,
            "env_id": codec.env_id,
            "observation_space": describe_space(codec.observation_space),
            "action_space": describe_space(codec.action_space),
            "codec": codec.describe(),
            "glossary": GLOSSARY,
            "example_prompt": example_prompt,
            "example_completion": example_completion,
            "split_stats": summary["splits"],
            "returns_plot": config.plot,
        },
        extra_markdown=read_extra_markdown(config.card_extra),
    )


def _print_summary(summary: dict) -> None:
    keys = ["source", "env_id", "codec", "episodes", "steps", "return_mean", "return_std", "return_min",
            "return_max", "normalized_score_mean"]
    console.print(kv_table("Serialized dataset", [(k, summary[k]) for k in keys if k in summary]))
    rows = [{"split": name, **stats} for name, stats in summary["splits"].items()]
    console.print(records_table("Splits (by episode)", rows, ["split", "episodes", "steps", "return_mean"]))
    if summary["dropped_episodes"]:
        console.print(f"[yellow]dropped {len(summary['dropped_episodes'])} episodes with NaN/inf[/]")
