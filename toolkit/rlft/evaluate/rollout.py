"""The evaluation loop: a policy for N episodes over K vector environments.

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
from rlft.policy.policies import Policy
from rlft.policy.vector_envs import VideoSlots


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


def rollout(policy: Policy, env_fns: list[Callable], episodes: int, seed: int, idle_action,
            agreement: Agreement | None = None, video: VideoSlots | None = None,
            on_episode: Callable[[EpisodeResult], None] | None = None,
            result: RolloutResult | None = None) -> RolloutResult:
    """Run ``episodes`` episodes (episode i seeded ``seed + i``) over ``len(env_fns)`` vector slots.

    ``result`` (optional) is filled in place, so a caller keeps the finished episodes when the policy fails
    mid-run (a generation server that dies): they are in ``result.episodes`` when the exception arrives."""
    import gymnasium as gym
    from gymnasium.vector import AutoresetMode

    if episodes < 1:
        raise InvalidInputError(f"--episodes must be at least 1, got {episodes}")
    k_envs = len(env_fns)
    envs = gym.vector.SyncVectorEnv(env_fns, autoreset_mode=AutoresetMode.DISABLED)
    space = envs.single_action_space
    results: dict[int, EpisodeResult] = {}
    result = result if result is not None else RolloutResult([], 0.0, 0.0, 0.0, 0)
    slot_ep = list(range(k_envs))
    returns = np.zeros(k_envs)
    lengths = np.zeros(k_envs, dtype=np.int64)
    next_ep = k_envs
    t_policy = t_env = 0.0
    start = time.perf_counter()
    try:
        if video is not None:
            for k in range(k_envs):
                video.before_reset(k, k, seed + k)
        obs, _ = envs.reset(seed=[seed + k for k in range(k_envs)])
        for k in range(k_envs):
            policy.begin_episode(k, k, seed + k, take(obs, k))
        while any(ep >= 0 for ep in slot_ep):
            live = [k for k in range(k_envs) if slot_ep[k] >= 0]
            live_obs = take(obs, live)
            t0 = time.perf_counter()
            actions = policy.act(live_obs, live)
            t1 = time.perf_counter()
            t_policy += t1 - t0
            if agreement is not None:
                agreement.update(result, live_obs, actions)
            if len(live) == k_envs:
                full = actions
            else:
                full = np.stack([np.asarray(idle_action, dtype=space.dtype)] * k_envs) if not isinstance(
                    space, gym.spaces.Discrete) else np.full(k_envs, idle_action, dtype=np.int64)
                full[live] = actions
            t2 = time.perf_counter()
            obs, rewards, terminated, truncated, _ = envs.step(full)
            t_env += time.perf_counter() - t2
            policy.record(live, actions, rewards[live])
            done = np.logical_or(terminated, truncated)
            for k in live:
                returns[k] += float(rewards[k])
                lengths[k] += 1
                result.env_steps += 1
                if done[k]:
                    ep = slot_ep[k]
                    res = EpisodeResult(ep, seed + ep, float(returns[k]), int(lengths[k]), bool(terminated[k]))
                    results[ep] = res
                    if on_episode is not None:
                        on_episode(res)
            if done.any():
                seeds: list[int | None] = [None] * k_envs
                new = []
                for k in np.flatnonzero(done):
                    if slot_ep[k] >= 0 and next_ep < episodes:
                        slot_ep[k] = next_ep
                        seeds[k] = seed + next_ep
                        new.append(k)
                        next_ep += 1
                    else:
                        slot_ep[k] = -1  # idle: reset (stepping a finished env is refused) and never read
                    returns[k], lengths[k] = 0.0, 0
                    if video is not None:
                        video.before_reset(int(k), slot_ep[k] if slot_ep[k] >= 0 else None, seeds[k])
                t3 = time.perf_counter()
                obs, _ = envs.reset(seed=seeds, options={"reset_mask": done.copy()})
                t_env += time.perf_counter() - t3
                for k in new:
                    policy.begin_episode(k, slot_ep[k], seed + slot_ep[k], take(obs, k))
    finally:
        result.seconds = time.perf_counter() - start
        result.policy_seconds, result.env_seconds = t_policy, t_env
        result.episodes = [results[i] for i in sorted(results)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            envs.close()
    if video is not None:
        result.videos = video.finish()
    return result


# -- assembling an evaluation -------------------------------------------------------------------------------
