"""Batched rollouts over K environments: the episode loop, random actions and action noise, and a policy's
batched ``act`` function. Collection (``collect``) and experts (``experts``) both roll out through here.

Episode ``i`` is reset with seed ``seed + i`` and draws its random actions and action noise from its own
generator seeded with ``(seed, i)``, so a random-policy episode is the same whatever ``num_envs`` is. Episodes are
assigned to environments in contiguous blocks (env 0 runs episodes 0..b-1, env 1 the next block, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlft.core.errors import InvalidInputError
from rlft.envs.observations import stack

# act(obs_batch, episode_indices) -> action batch, one row per active environment.
ActFn = Callable[[np.ndarray, list[int]], np.ndarray]


@dataclass
class EpisodeStats:
    """What one finished episode scored; ``terminated`` False means it ended by truncation."""

    index: int
    seed: int
    episode_return: float
    length: int
    terminated: bool


def episode_blocks(n_episodes: int, num_envs: int) -> list[range]:
    """Split episodes 0..n-1 into ``num_envs`` contiguous blocks whose sizes differ by at most one."""
    base, extra = divmod(n_episodes, num_envs)
    blocks, start = [], 0
    for k in range(num_envs):
        size = base + (1 if k < extra else 0)
        blocks.append(range(start, start + size))
        start += size
    return blocks


def run_episodes(
    envs: Sequence[Any],
    act: ActFn,
    n_episodes: int,
    seed: int,
    on_episode: Callable[[EpisodeStats], None] | None = None,
) -> list[EpisodeStats]:
    """Run ``n_episodes`` over ``envs`` with one batched ``act`` call per step; stats ordered by episode."""
    if n_episodes < 1:
        raise InvalidInputError(f"number of episodes must be at least 1, got {n_episodes}")
    blocks = [iter(b) for b in episode_blocks(n_episodes, len(envs))]
    current: dict[int, list] = {}  # env index -> [episode index, obs, return, length]

    def start(k: int) -> None:
        ep = next(blocks[k], None)
        if ep is None:
            current.pop(k, None)
            return
        obs, _ = envs[k].reset(seed=seed + ep)
        current[k] = [ep, obs, 0.0, 0]

    for k in range(len(envs)):
        start(k)
    stats: list[EpisodeStats] = []
    while current:
        active = sorted(current)
        obs = stack([current[k][1] for k in active])  # arrays, or dicts/tuples of arrays
        actions = act(obs, [current[k][0] for k in active])
        for j, k in enumerate(active):
            obs_k, reward, terminated, truncated, _ = envs[k].step(actions[j])
            state = current[k]
            state[1], state[2], state[3] = obs_k, state[2] + float(reward), state[3] + 1
            if terminated or truncated:
                done = EpisodeStats(state[0], seed + state[0], state[2], state[3], bool(terminated))
                stats.append(done)
                if on_episode is not None:
                    on_episode(done)
                start(k)
    return sorted(stats, key=lambda s: s.index)


def random_actions(space, rngs: list[np.random.Generator]) -> np.ndarray:
    """A uniformly random action per generator, for Discrete, Box, MultiDiscrete and MultiBinary spaces."""
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        return np.array([space.start + r.integers(space.n) for r in rngs], dtype=space.dtype)
    if isinstance(space, spaces.Box):
        low = np.where(np.isfinite(space.low), space.low, -1.0)
        high = np.where(np.isfinite(space.high), space.high, 1.0)
        return np.stack([r.uniform(low, high) for r in rngs]).astype(space.dtype)
    if isinstance(space, spaces.MultiDiscrete):
        return np.stack([r.integers(space.nvec) for r in rngs]).astype(space.dtype)
    if isinstance(space, spaces.MultiBinary):
        return np.stack([r.integers(2, size=space.shape) for r in rngs]).astype(space.dtype)
    raise InvalidInputError(f"random actions are not supported for action space {space}")


def add_noise(space, actions: np.ndarray, noise: float, rngs: list[np.random.Generator]) -> np.ndarray:
    """Exploration noise: Gaussian for Box (std in half-ranges, clipped to bounds), epsilon-random otherwise.

    For a Box the standard deviation is ``noise * (high - low) / 2``, i.e. ``noise`` itself for the usual
    [-1, 1] MuJoCo actions. For discrete spaces ``noise`` is the probability of replacing the action with a
    uniformly random one.
    """
    from gymnasium import spaces

    if noise <= 0:
        return actions
    if isinstance(space, spaces.Box):
        scale = noise * (space.high - space.low) / 2.0
        noisy = np.stack([a + r.normal(0.0, 1.0, size=a.shape) * scale for a, r in zip(actions, rngs, strict=True)])
        return np.clip(noisy, space.low, space.high).astype(space.dtype)
    if noise > 1:
        raise InvalidInputError(f"--noise for a discrete action space is a probability in [0, 1], got {noise}")
    flips = np.array([r.random() < noise for r in rngs])
    # every stream draws its random action every step, flipped or not: an episode's draws then depend on its
    # own stream only, never on how many other envs flipped in the batch (data independent of --num-envs)
    random = random_actions(space, rngs)
    return np.where(flips.reshape((-1,) + (1,) * (actions.ndim - 1)), random, actions).astype(actions.dtype)


EXECUTED_INFO = "executed_action"  # the step info (and Minari infos key) of the action a noisy env really took


def noisy_execution(env, noise: float, seed: int):
    """``env`` stepped with the noise :func:`add_noise` would add, while callers (a Minari DataCollector wrapped
    around it) see and record the action they passed: DART-style data (Laskey et al., 2017), states off the
    expert's own path labelled with the expert's clean action.

    Episode ``i`` (reset with seed ``seed + i``) draws from the generator ``(seed, i)``, the stream
    :func:`policy_act` would use, so the states visited are those of the same collection with noisy labels.
    """
    import gymnasium

    class NoisyExecution(gymnasium.Wrapper):
        @property
        def spec(self):  # the data's env is the plain env (the noise belongs to the collecting policy), and
            return self.env.spec  # Minari records the spec: a wrapper it cannot rebuild would stop it

        def reset(self, *, seed: int | None = None, options=None):
            if seed is None:
                raise InvalidInputError("noisy execution needs a seeded reset (episode i is reset with seed + i)")
            self._rng = np.random.default_rng([_base_seed, seed - _base_seed])
            obs, info = self.env.reset(seed=seed, options=options)
            # Minari keeps one info per observation (T + 1) with one structure: the reset's has no action yet
            return obs, {**info, EXECUTED_INFO: np.full(self.action_space.shape, np.nan, np.float32)}

        def step(self, action):
            executed = add_noise(self.action_space, np.asarray(action)[None], noise, [self._rng])[0]
            obs, reward, terminated, truncated, info = self.env.step(executed)
            # what the env was stepped with: a critic learns what actions do from it, not from the clean label
            return obs, reward, terminated, truncated, {**info, EXECUTED_INFO: np.asarray(executed, np.float32)}

    _base_seed = seed
    return NoisyExecution(env)


def policy_act(policy, space, seed: int, noise: float = 0.0, deterministic: bool = True) -> ActFn:
    """An :data:`ActFn` from a policy with SB3's ``predict`` (None = uniformly random) and optional noise."""
    rngs: dict[int, np.random.Generator] = {}

    def generators(indices: list[int]) -> list[np.random.Generator]:
        # One generator per episode, seeded (seed, episode): draws do not depend on batching or num_envs.
        if len(rngs) > len(indices):  # an env only moves on to higher episode indices: drop finished ones
            for i in set(rngs) - set(indices):
                del rngs[i]
        return [rngs[i] if i in rngs else rngs.setdefault(i, np.random.default_rng([seed, i])) for i in indices]

    def act(obs: np.ndarray, indices: list[int]) -> np.ndarray:
        if policy is None:
            return random_actions(space, generators(indices))
        actions = np.asarray(policy.predict(obs, deterministic=deterministic)[0])
        return add_noise(space, actions, noise, generators(indices)) if noise > 0 else actions

    return act
