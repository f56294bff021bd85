"""The replay buffer of an off-policy expert's training run as a Minari dataset: D4RL's "medium-replay" kind,
every transition the agent saw while it trained, its first random-action steps included, in the order it saw them.

SB3 keeps each transition as (obs, action, reward, next_obs, done, timeout), with the true final observation of an
episode as ``next_obs`` (not the reset one); Minari keeps an episode as T+1 observations for T actions. An episode
is cut where ``done`` is set: ``terminations`` = done and not a timeout, ``truncations`` = the timeout. The last,
unfinished episode of the run (training stopped mid-episode) is kept and marked truncated at its last step. Actions
are recorded as the env received them (SAC and TQC store them squashed to [-1, 1]; they are unscaled).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from rlft.core.errors import InvalidInputError, OutputExistsError
from rlft.envs.registry import reference_scores
from rlft.sources.minari_source import check_dataset_id, datasets_root, env_requirements, staged_dataset

OFF_POLICY = ("sac", "tqc", "dqn")


def check_replay_request(dataset_id: str, algo: str, buffer_size: int | None, timesteps: int,
                         overwrite: bool) -> None:
    """Refuse, before training, a replay recording that could not be complete: an on-policy algorithm (no replay
    buffer), a buffer smaller than the run (its first transitions would be overwritten), an id Minari refuses or
    that exists (without ``overwrite``)."""
    check_dataset_id(dataset_id)
    if algo not in OFF_POLICY:
        raise InvalidInputError(f"--record-replay needs an off-policy algorithm with a replay buffer "
                                f"({', '.join(OFF_POLICY)}); --algo {algo} has none",
                                hint="train with --algo sac (Box actions) or dqn (discrete)")
    if buffer_size is not None and buffer_size < timesteps:
        raise InvalidInputError(f"--record-replay keeps every transition of the run, but buffer_size {buffer_size:,} "
                                f"is smaller than the {timesteps:,} steps asked for: the first ones would be lost",
                                hint="raise buffer_size in the hyperparameter file, or lower --timesteps")
    if (datasets_root() / dataset_id).exists() and not overwrite:
        raise OutputExistsError(f"Minari dataset {dataset_id} already exists in {datasets_root()}",
                                hint="pass --overwrite to replace it, or bump the version (-vN)")


def replay_episodes(buffer, observation_space, action_space, unscale=None) -> list:
    """Minari ``EpisodeBuffer`` s from an SB3 ``ReplayBuffer``, env by env in the order the transitions were
    stored. ``unscale`` maps stored actions to the env's (SAC/TQC keep them in [-1, 1])."""
    from minari.data_collector.episode_buffer import EpisodeBuffer

    if buffer.full:
        raise InvalidInputError("the replay buffer wrapped around: its first transitions are gone")
    if getattr(buffer, "next_observations", None) is None or isinstance(buffer.observations, dict):
        raise InvalidInputError("--record-replay needs a plain replay buffer that keeps next observations "
                                "(no optimize_memory_usage, no Dict observations)")
    n = buffer.pos
    episodes = []
    for k in range(buffer.n_envs):
        obs = _squeeze_discrete(buffer.observations[:n, k], observation_space)
        next_obs = _squeeze_discrete(buffer.next_observations[:n, k], observation_space)
        actions = buffer.actions[:n, k]
        actions = _squeeze_discrete(unscale(actions) if unscale is not None else actions, action_space)
        dones, timeouts = buffer.dones[:n, k].astype(bool), buffer.timeouts[:n, k].astype(bool)
        ends = list(np.flatnonzero(dones))
        if not ends or ends[-1] != n - 1:
            ends.append(n - 1)  # the run stopped mid-episode: keep its steps, truncated
        start = 0
        for end in ends:
            if end < start:
                continue
            steps = slice(start, end + 1)
            terminations = dones[steps] & ~timeouts[steps]
            truncations = timeouts[steps].copy()
            truncations[-1] |= not dones[end]
            episodes.append(EpisodeBuffer(
                observations=np.concatenate([obs[steps], next_obs[end:end + 1]]),
                actions=actions[steps], rewards=buffer.rewards[steps, k].astype(np.float64),
                terminations=terminations, truncations=truncations,
            ))
            start = end + 1
    return episodes


def _squeeze_discrete(array: np.ndarray, space) -> np.ndarray:
    """SB3 stores a Discrete value as shape (1,); Minari as a scalar."""
    from gymnasium import spaces

    return array.reshape(len(array)).astype(space.dtype) if isinstance(space, spaces.Discrete) else array


def write_replay(model, env_id: str, dataset_id: str, expert_meta: dict, overwrite: bool) -> Path:
    """Write ``model.replay_buffer`` as the Minari dataset ``dataset_id`` (staged, then moved into place; one that
    exists is replaced only with ``overwrite``)."""
    import minari
    from gymnasium import spaces

    unscale = model.policy.unscale_action if isinstance(model.action_space, spaces.Box) else None
    episodes = replay_episodes(model.replay_buffer, model.observation_space, model.action_space, unscale)
    ref = reference_scores(env_id)
    steps = sum(len(e.rewards) for e in episodes)
    kwargs = {"ref_min_score": ref.random, "ref_max_score": ref.expert} if ref is not None else {}
    returns = np.array([float(np.sum(e.rewards)) for e in episodes])
    with staged_dataset(dataset_id, overwrite) as final, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Minari warns about every optional field left out
        dataset = minari.create_dataset_from_buffers(
            dataset_id, episodes, env=env_id, algorithm_name=f"{expert_meta['algo'].upper()} replay buffer",
            author="rlft", requirements=env_requirements(env_id),
            description=(f"The replay buffer of rlft expert train ({expert_meta['algo'].upper()}, seed "
                         f"{expert_meta['seed']}) on {env_id}: all {steps:,} transitions of the run that trained "
                         f"the policy, its random first steps included, {len(episodes)} episodes in the order seen "
                         "(D4RL's medium-replay kind)."),
            **kwargs,
        )
        dataset.storage.update_metadata({"rlft": {
            "kind": "replay",
            "policy": "the training run's own actions (exploration included)",
            "policy_metadata": {k: expert_meta[k] for k in ("env_id", "algo", "timesteps", "seed", "eval",
                                                            "normalized_score", "hyperparams_source")
                                if k in expert_meta},
            "deterministic_policy": False,
            "seed": expert_meta["seed"],
            "return_mean": float(returns.mean()),
            "return_std": float(returns.std()),
            "episodes": len(episodes),
        }})
    return final
