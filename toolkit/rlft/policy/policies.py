"""Policies the evaluator runs: the interface and the non-LLM baselines.

A policy acts for a batch of environment slots at once. ``begin_episode`` is called when a slot starts
episode ``i`` (seeded ``seed + i``), ``act`` with the observations of the live slots, ``record`` after the
step with the rewards. Baselines that draw random numbers use one generator per episode, seeded
``(seed, i)``, so an episode's actions never depend on how many environments run side by side.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from rlft.core.errors import InvalidInputError
from rlft.envs.frozenlake import ACTION_NAMES
from rlft.sources.experts import load_expert
from rlft.sources.rollouts import random_actions


class Policy(ABC):
    """Acts for a batch of environment slots; subclasses keep per-slot state where they need it."""

    kind: str = "policy"

    def __init__(self) -> None:
        self.decisions = 0  # actions chosen (one per env step)
        self.invalid = 0  # actions that had to fall back to the default (LLM outputs that did not parse)

    def begin_episode(self, slot: int, episode: int, seed: int, obs) -> None:
        """Slot ``slot`` starts episode ``episode`` (reset with ``seed``) at observation ``obs``."""
        return None

    @abstractmethod
    def act(self, obs: np.ndarray, slots: list[int]) -> np.ndarray:
        """One action per row of ``obs`` (the live slots, in ``slots`` order)."""

    def record(self, slots: list[int], actions: np.ndarray, rewards: np.ndarray) -> None:
        """The actions taken for ``slots`` gave ``rewards`` (history / return-to-go bookkeeping)."""
        return None

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind}

    def stats(self) -> dict[str, Any]:
        """Counters for the report."""
        return {}

    def close(self) -> None:
        """Release what the policy holds (thread pools, models)."""
        return None


def parse_action_value(text: str, space, codec=None):
    """An environment action from text: an integer for Discrete (a FrozenLake action name too, with a
    FrozenLake codec), one number or ``D`` numbers (comma or space separated) for Box, clipped to bounds."""
    from gymnasium import spaces

    text = str(text).strip()
    if isinstance(space, spaces.Discrete):
        names = [n.upper() for n in getattr(codec, "action_names", [])] if codec is not None else []
        if not names:

            names = list(ACTION_NAMES) if space.n == 4 else []
        if text.upper() in names:
            return int(space.start) + names.index(text.upper())
        try:
            value = int(text)
        except ValueError as exc:
            raise InvalidInputError(f"action {text!r} is not an integer of {space}") from exc
        if not space.contains(np.asarray(value, dtype=space.dtype)):
            raise InvalidInputError(f"action {value} is outside {space}")
        return value
    if isinstance(space, spaces.Box):
        parts = [p for p in text.replace(",", " ").split() if p]
        try:
            values = np.array([float(p) for p in parts], dtype=np.float64)
        except ValueError as exc:
            raise InvalidInputError(f"action {text!r} is not a list of numbers") from exc
        size = int(np.prod(space.shape))
        if len(values) == 1:
            values = np.full(size, values[0])
        if len(values) != size or not np.all(np.isfinite(values)):
            raise InvalidInputError(f"action {text!r} needs 1 or {size} finite numbers for {space}")
        return np.clip(values.reshape(space.shape), space.low, space.high).astype(space.dtype)
    raise InvalidInputError(f"unsupported action space {space}")


def default_action(space):
    """The neutral action: the first of a Discrete space, 0 clipped into a Box's bounds."""
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        return int(space.start)
    if isinstance(space, spaces.Box):
        return np.clip(np.zeros(space.shape), space.low, space.high).astype(space.dtype)
    raise InvalidInputError(f"unsupported action space {space}")


def stack_actions(actions: list, space) -> np.ndarray:
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        return np.asarray(actions, dtype=np.int64)
    return np.stack([np.asarray(a, dtype=space.dtype).reshape(space.shape) for a in actions])


class RandomPolicy(Policy):
    """Uniformly random actions from a per-episode generator seeded ``(seed, episode)``."""

    kind = "random"

    def __init__(self, action_space, seed: int):
        super().__init__()
        self.space, self.seed = action_space, seed
        self.rngs: dict[int, np.random.Generator] = {}

    def begin_episode(self, slot, episode, seed, obs):
        self.rngs[slot] = np.random.default_rng([self.seed, episode])

    def act(self, obs, slots):
        self.decisions += len(slots)
        return random_actions(self.space, [self.rngs[s] for s in slots])


class ConstantPolicy(Policy):
    kind = "constant"

    def __init__(self, action_space, value=None):
        super().__init__()
        self.space = action_space
        self.value = default_action(action_space) if value is None else value

    def act(self, obs, slots):
        self.decisions += len(slots)
        return stack_actions([self.value] * len(slots), self.space)

    def describe(self):
        value = self.value.tolist() if isinstance(self.value, np.ndarray) else self.value
        return {"kind": self.kind, "value": value}


class ExpertPolicy(Policy):
    """A Stable-Baselines3 checkpoint, deterministic, one batched ``predict`` per step."""

    kind = "expert"

    def __init__(self, model, metadata: dict, path: str):
        super().__init__()
        self.model, self.metadata, self.path = model, metadata, str(path)

    @classmethod
    def load(cls, path) -> ExpertPolicy:
        model, metadata = load_expert(path)
        return cls(model, metadata, str(path))

    def act(self, obs, slots):
        self.decisions += len(slots)
        actions, _ = self.model.predict(obs, deterministic=True)
        return np.asarray(actions)

    def describe(self):
        return {"kind": self.kind, "path": self.path, "algo": self.metadata.get("algo"),
                "env_id": self.metadata.get("env_id")}


class LakeSolverPolicy(Policy):
    """q-greedy where the FrozenLake map changes every episode (:mod:`rlft.envs.random_lake`): each observed map is
    solved exactly by value iteration the first time it is seen, then its greedy action is played."""

    kind = "q-greedy"

    def __init__(self, codec, gamma: float = 0.99):
        super().__init__()
        self.codec, self.gamma = codec, gamma
        self.slippery = bool(codec.env_kwargs.get("is_slippery", True))
        self._greedy: dict[tuple[str, ...], np.ndarray] = {}

    def greedy(self, lake) -> np.ndarray:
        if lake.rows not in self._greedy:
            from rlft.datasets.frozenlake_q.export import solve_frozenlake

            self._greedy[lake.rows] = solve_frozenlake(lake, self.slippery, self.gamma)[1].greedy_policy()
        return self._greedy[lake.rows]

    def act(self, obs, slots):
        self.decisions += len(slots)
        actions = []
        for row in np.asarray(obs).reshape(len(slots), -1):
            lake, state = self.codec.observed(row)
            actions.append(int(self.greedy(lake)[state]))
        return np.asarray(actions, dtype=np.int64)

    def describe(self):
        return {"kind": self.kind, "solver": f"value iteration per map, gamma {self.gamma}",
                "maps_solved": len(self._greedy)}


class TablePolicy(Policy):
    """A tabular policy ``state -> action`` (q-greedy on the exact Q-values of a FrozenLake dataset)."""

    kind = "q-greedy"

    def __init__(self, table: np.ndarray, source: str):
        super().__init__()
        self.table, self.source = np.asarray(table, dtype=np.int64), source

    def act(self, obs, slots):
        self.decisions += len(slots)
        return self.table[np.asarray(obs, dtype=np.int64).reshape(-1)]

    def describe(self):
        return {"kind": self.kind, "dataset": self.source}
