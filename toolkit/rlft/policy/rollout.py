"""Running a policy for N episodes over K vector environments: the loop behind `rlft eval` and the closed-loop
check while training.

Episode ``i`` is always reset with seed ``seed + i``. Episodes go to free slots of a
``gymnasium.vector.SyncVectorEnv`` (autoreset disabled; finished slots are reset with ``reset_mask``) until
N are done, and each step asks the policy for the actions of all live slots at once (for an LLM: one
batched generate call). Because an episode's seed and its actions depend only on its own history, K = 1 and
K = 8 give the same per-episode returns with deterministic policies and greedy decoding.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from rlft.core.errors import InvalidInputError
from rlft.envs.observations import take
from rlft.envs.vector_envs import VideoSlots
from rlft.policy.policies import Policy


@dataclass
class EpisodeResult:
    index: int
    seed: int
    episode_return: float
    length: int
    terminated: bool


@dataclass
class RolloutResult:
    episodes: list[EpisodeResult]
    seconds: float
    policy_seconds: float
    env_seconds: float
    env_steps: int  # steps of evaluated episodes (idle slots not counted)
    agreement_hits: int = 0
    agreement_total: int = 0
    expert_match: int = 0
    expert_total: int = 0
    expert_abs_diff_sum: float = 0.0
    expert_abs_diff_n: int = 0
    state_actions: dict[int, dict[int, int]] = field(default_factory=dict)  # tabular envs: state -> action counts
    videos: list[str] = field(default_factory=list)


class Agreement:
    """Agreement of the policy's actions with an expert on the same observations."""

    def __init__(self, qtable=None, expert_model=None):
        self.qtable, self.expert = qtable, expert_model

    def update(self, result: RolloutResult, obs: np.ndarray, actions: np.ndarray) -> None:
        if self.qtable is not None:
            for state, action in zip(np.asarray(obs).reshape(-1), np.asarray(actions).reshape(-1), strict=True):
                counts = result.state_actions.setdefault(int(state), {})
                counts[int(action)] = counts.get(int(action), 0) + 1
                ok = self.qtable.agrees(int(state), int(action))
                if ok is not None:
                    result.agreement_hits += int(ok)
                    result.agreement_total += 1
        if self.expert is not None:
            expert_actions = np.asarray(self.expert.predict(obs, deterministic=True)[0])
            actions = np.asarray(actions)
            if np.issubdtype(expert_actions.dtype, np.integer) and np.issubdtype(actions.dtype, np.integer):
                result.expert_match += int((expert_actions.reshape(-1) == actions.reshape(-1)).sum())
                result.expert_total += len(actions)
            else:
                diff = np.abs(expert_actions.reshape(len(actions), -1) - actions.reshape(len(actions), -1))
                result.expert_abs_diff_sum += float(diff.sum())
                result.expert_abs_diff_n += int(diff.size)


@dataclass
class _Slots:
    """The episode each vector slot runs (-1: idle, all episodes handed out), its running return and length,
    the finished episodes by index and the time spent in the policy and in the environments."""

    episode: list[int]
    returns: np.ndarray
    lengths: np.ndarray
    next_episode: int
    finished: dict[int, EpisodeResult] = field(default_factory=dict)
    policy_seconds: float = 0.0
    env_seconds: float = 0.0

    @classmethod
    def first(cls, k_envs: int) -> _Slots:
        """Slot k runs episode k; episode K is the next one to hand out."""
        return cls(list(range(k_envs)), np.zeros(k_envs), np.zeros(k_envs, dtype=np.int64), k_envs)

    def any_live(self) -> bool:
        """Whether some slot still runs an episode."""
        return any(ep >= 0 for ep in self.episode)

    def live(self) -> list[int]:
        """The slots that run an episode."""
        return [k for k in range(len(self.episode)) if self.episode[k] >= 0]


def rollout(policy: Policy, env_fns: list[Callable], episodes: int, seed: int, idle_action,
            agreement: Agreement | None = None, video: VideoSlots | None = None,
            on_episode: Callable[[EpisodeResult], None] | None = None,
            result: RolloutResult | None = None) -> RolloutResult:
    """Run ``episodes`` episodes (episode i seeded ``seed + i``) over ``len(env_fns)`` vector slots; a policy that
    plays a NaN or infinite action stops the run with one line naming it (the env would blame its reward).

    ``result`` (optional) is filled in place, so a caller keeps the finished episodes when the policy fails
    mid-run (a generation server that dies): they are in ``result.episodes`` when the exception arrives."""
    import gymnasium as gym
    from gymnasium.vector import AutoresetMode

    if episodes < 1:
        raise InvalidInputError(f"--episodes must be at least 1, got {episodes}")
    envs = gym.vector.SyncVectorEnv(env_fns, autoreset_mode=AutoresetMode.DISABLED)
    result = result if result is not None else RolloutResult([], 0.0, 0.0, 0.0, 0)
    slots = _Slots.first(len(env_fns))
    start = time.perf_counter()
    try:
        obs = _reset_all_slots(envs, policy, seed, video)
        while slots.any_live():
            live = slots.live()
            live_obs = take(obs, live)
            t0 = time.perf_counter()
            actions = policy.act(live_obs, live)
            slots.policy_seconds += time.perf_counter() - t0
            check_finite_actions(actions, policy)
            if agreement is not None:
                agreement.update(result, live_obs, actions)
            full = _all_slot_actions(envs, live, actions, idle_action)
            t1 = time.perf_counter()
            obs, rewards, terminated, truncated, _ = envs.step(full)
            slots.env_seconds += time.perf_counter() - t1
            policy.record(live, actions, rewards[live])
            done = np.logical_or(terminated, truncated)
            _add_step(slots, live, rewards, terminated, done, seed, result, on_episode)
            if done.any():
                obs = _start_next_episodes(envs, policy, slots, done, seed, episodes, video)
    finally:
        # also on an exception: the caller reports the episodes finished so far
        result.seconds = time.perf_counter() - start
        result.policy_seconds, result.env_seconds = slots.policy_seconds, slots.env_seconds
        result.episodes = [slots.finished[i] for i in sorted(slots.finished)]
        _close_quietly(envs)
    if video is not None:
        result.videos = video.finish()
    return result


def check_finite_actions(actions, policy: Policy) -> None:
    """Refuse a NaN or infinite action before the env is stepped with it (a diverged offline or BC policy)."""
    values = np.asarray(actions)
    if values.dtype.kind == "f" and not np.isfinite(values).all():
        bad = values[~np.isfinite(values)].ravel()[0]
        raise InvalidInputError(f"the {policy.kind} policy played a non-finite "
                                f"action ({bad}): its weights or inputs hold NaN or infinite values",
                                hint="train it again (rlft train refuses non-finite rows), or check its file")


def _reset_all_slots(envs, policy: Policy, seed: int, video: VideoSlots | None):
    """Reset every slot k to episode k (seed ``seed + k``) and start that episode in the policy."""
    k_envs = envs.num_envs
    if video is not None:
        for k in range(k_envs):
            video.before_reset(k, k, seed + k)
    obs, _ = envs.reset(seed=[seed + k for k in range(k_envs)])
    for k in range(k_envs):
        policy.begin_episode(k, k, seed + k, take(obs, k))
    return obs


def _all_slot_actions(envs, live: list[int], actions, idle_action):
    """The actions of all K slots: the policy's for the live slots, ``idle_action`` for the idle ones."""
    import gymnasium as gym

    k_envs = envs.num_envs
    if len(live) == k_envs:
        return actions
    space = envs.single_action_space
    if isinstance(space, gym.spaces.Discrete):
        full = np.full(k_envs, idle_action, dtype=np.int64)
    else:
        full = np.stack([np.asarray(idle_action, dtype=space.dtype)] * k_envs)
    full[live] = actions
    return full


def _add_step(slots: _Slots, live: list[int], rewards, terminated, done, seed: int, result: RolloutResult,
              on_episode: Callable[[EpisodeResult], None] | None) -> None:
    """Add one step to the live slots' episodes; an episode that ended becomes an :class:`EpisodeResult`."""
    for k in live:
        slots.returns[k] += float(rewards[k])
        slots.lengths[k] += 1
        result.env_steps += 1
        if done[k]:
            ep = slots.episode[k]
            res = EpisodeResult(ep, seed + ep, float(slots.returns[k]), int(slots.lengths[k]), bool(terminated[k]))
            slots.finished[ep] = res
            if on_episode is not None:
                on_episode(res)


def _start_next_episodes(envs, policy: Policy, slots: _Slots, done, seed: int, episodes: int,
                         video: VideoSlots | None):
    """Give each finished slot the next episode (or make it idle once all are handed out), reset the finished
    slots and start their new episodes in the policy; returns the observations of all slots."""
    seeds: list[int | None] = [None] * len(slots.episode)
    new = []
    for k in np.flatnonzero(done):
        if slots.episode[k] >= 0 and slots.next_episode < episodes:
            slots.episode[k] = slots.next_episode
            seeds[k] = seed + slots.next_episode
            new.append(k)
            slots.next_episode += 1
        else:
            slots.episode[k] = -1  # idle: reset (stepping a finished env is refused) and never read
        slots.returns[k], slots.lengths[k] = 0.0, 0
        if video is not None:
            video.before_reset(int(k), slots.episode[k] if slots.episode[k] >= 0 else None, seeds[k])
    t0 = time.perf_counter()
    obs, _ = envs.reset(seed=seeds, options={"reset_mask": done.copy()})
    slots.env_seconds += time.perf_counter() - t0
    for k in new:
        policy.begin_episode(k, slots.episode[k], seed + slots.episode[k], take(obs, k))
    return obs


def _close_quietly(envs) -> None:
    """Close the vector env, silencing the warnings gymnasium may emit while closing."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        envs.close()

