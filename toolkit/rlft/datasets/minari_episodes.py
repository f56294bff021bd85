"""A Minari source's episodes as arrays: read and checked (spaces, alignment, finite values), measured by the scan
that fits a codec (returns, lengths, a bounded sample), and gathered into the chunks that are encoded together."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from rlft.codecs.structured import flatten, is_structured
from rlft.core.errors import InvalidInputError
from rlft.datasets.offline import EpisodeChunk
from rlft.envs.spaces import describe_space, space_to_dict
from rlft.sources.minari_source import iterate_episodes
from rlft.sources.rollouts import EXECUTED_INFO

_SAMPLE_ROWS = 200_000  # rows kept to fit quantile bin edges; min/max rows are always added


@dataclass
class Episode:
    id: int
    observations: np.ndarray  # N + 1 observations
    actions: np.ndarray
    rewards: np.ndarray
    terminations: np.ndarray
    truncations: np.ndarray
    executed_actions: np.ndarray | None = None  # DART data: what the env was stepped with (actions: the labels)


def _executed(raw, steps: int) -> np.ndarray | None:
    """The actions a noisy env really took (Minari infos, one per observation: step t's is info t + 1), or None."""
    infos = raw.infos if isinstance(raw.infos, dict) else {}
    executed = infos.get(EXECUTED_INFO)
    if executed is None:
        return None
    executed = np.asarray(executed)
    if len(executed) != steps + 1:
        raise InvalidInputError(f"episode {raw.id}: {len(executed)} recorded {EXECUTED_INFO} infos for {steps} "
                                "steps, where Minari keeps one per observation (T + 1)",
                                hint="re-collect the dataset with rlft data collect")
    return executed[1:]


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
                   np.asarray(raw.terminations), np.asarray(raw.truncations), _executed(raw, steps))


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
    executed = [e.executed_actions for e in episodes]
    return EpisodeChunk(
        observations=np.concatenate([e.observations[: len(e.rewards)] for e in episodes]),
        next_observations=np.concatenate([e.observations[1: len(e.rewards) + 1] for e in episodes]),
        actions=np.concatenate([e.actions for e in episodes]),
        rewards=np.concatenate([e.rewards for e in episodes]),
        terminated=np.concatenate([e.terminations for e in episodes]),
        truncated=np.concatenate([e.truncations for e in episodes]),
        episode_id=np.repeat([e.id for e in episodes], lengths),
        step=np.concatenate([np.arange(n) for n in lengths]),
        executed_actions=None if any(e is None for e in executed) else np.concatenate(executed),
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
