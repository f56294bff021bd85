"""Recording rollouts (``rlft.sources.rollouts``) over K environments as a Minari dataset with DataCollector.

Episode ``i`` is reset with seed ``seed + i`` and draws its random actions and action noise from its own
generator seeded with ``(seed, i)``, so a random-policy episode is the same whatever ``num_envs`` is. With a
policy network the same ``seed`` and ``num_envs`` reproduce a dataset exactly; another ``num_envs`` changes the
float rounding of batched inference (about 1e-7), which chaotic envs such as HalfCheetah amplify. Episodes are
assigned to environments in contiguous blocks, so appending each env's recordings in env order writes the
dataset in episode order.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import rlft
from rlft.core.errors import InvalidInputError, OutputExistsError, require
from rlft.core.faults import as_disk_full, output_error
from rlft.core.secrets import refuse_secret_text
from rlft.core.seeding import seed_everything
from rlft.envs.registry import action_space, check_env_id, make_env, reference_scores
from rlft.sources.collect_config import CollectConfig
from rlft.sources.collect_space import guard_storage
from rlft.sources.experts import check_expert_spaces, load_expert
from rlft.sources.minari_source import check_dataset_id, datasets_root, env_requirements, staged_dataset
from rlft.sources.rollouts import (
    EXECUTED_INFO,
    EpisodeStats,
    episode_blocks,
    noisy_execution,
    policy_act,
    run_episodes,
)

# --- Recording into Minari -------------------------------------------------------------------------------

@dataclass
class CollectResult:
    """The written dataset's id and folder, per-episode stats and throughput."""

    dataset_id: str
    path: Path
    stats: list[EpisodeStats]
    seconds: float

    @property
    def steps(self) -> int:
        """Environment steps recorded."""
        return sum(s.length for s in self.stats)

    @property
    def steps_per_second(self) -> float:
        """Recorded steps per second of rollout (policy + env + DataCollector; not the final write)."""
        return self.steps / self.seconds if self.seconds > 0 else float("nan")


def check_collect(config: CollectConfig) -> None:
    """Everything about ``config`` that can be refused before an env is made (the CLI asks before its bar)."""
    check_env_id(config.env_id)
    check_dataset_id(config.dataset_id)
    for flag, text in (("--author", config.author), ("description", config.description)):
        refuse_secret_text(text, flag, "it is written into the dataset's metadata, which serialize and push copy")
    if not math.isfinite(config.noise) or config.noise < 0:
        raise InvalidInputError(f"--noise must be finite and not negative, got {config.noise}")
    _check_policy_options(config)
    if config.noise > 1 and not _is_box(config.env_id):
        raise InvalidInputError(f"--noise for a discrete action space is a probability in [0, 1], got {config.noise}")
    if config.policy != "random" and not Path(config.policy).is_file():
        raise InvalidInputError(f"--policy {config.policy} is neither 'random' nor an existing checkpoint")
    if (datasets_root() / config.dataset_id).exists() and not config.overwrite:
        raise OutputExistsError(
            f"Minari dataset {config.dataset_id} already exists in {datasets_root()}",
            hint="pass --overwrite to replace it, or bump the version (-vN)",
        )


def _check_policy_options(config: CollectConfig) -> None:
    """How the policy's actions are recorded: --label-actions and --stochastic."""
    if config.label_actions == "clean" and (config.noise <= 0 or config.policy == "random"):
        raise InvalidInputError("--label-actions clean records a policy's own action while the env is stepped with "
                                "noise: it needs --policy FILE.zip and --noise > 0")
    if config.stochastic and config.policy == "random":
        raise InvalidInputError("--stochastic samples a policy's own action distribution: it needs --policy FILE.zip")


def _load_policy(config: CollectConfig):
    if config.policy == "random":
        return None, {}

    model, meta = load_expert(config.policy)
    if meta.get("env_id") not in (None, config.env_id):
        raise InvalidInputError(f"--policy {config.policy} was trained on {meta['env_id']}, not {config.env_id}")
    return model, meta


def collect_to_minari(config: CollectConfig, on_episode: Callable[[EpisodeStats], None] | None = None):
    """Roll out ``config.policy`` and write a Minari dataset; an existing one is replaced only on success.

    Collection happens under a hidden temporary Minari root inside the real one (Minari skips hidden
    folders), and the finished dataset folder is moved into place with renames.
    """
    check_collect(config)

    require("minari", package='"minari[create,hdf5]"')
    require("jax", extra="collect")  # Minari's DataCollector needs it; a one-line hint beats its ImportError

    model, policy_meta = _load_policy(config)
    seed_everything(config.seed)  # after loading: torch is imported by then, and --stochastic draws from it
    with staged_dataset(config.dataset_id, config.overwrite) as final:
        stats, seconds = _record(config, model, policy_meta, on_episode, final)
    return CollectResult(config.dataset_id, final, stats, seconds)


def executed_action_only():
    """Minari's step callback keeping, of each step's infos, only the action ``noisy_execution`` stepped with."""
    from minari.data_collector.callbacks import StepDataCallback

    class ExecutedActionOnly(StepDataCallback):
        def __call__(self, env, **kwargs):
            data = super().__call__(env, **kwargs)
            data["info"] = {EXECUTED_INFO: data["info"][EXECUTED_INFO]}
            return data

    return ExecutedActionOnly


def _record(config: CollectConfig, model, policy_meta: dict, on_episode, final: Path):
    import warnings

    import minari
    from minari.data_collector.callbacks import EpisodeMetadataCallback


    env_kwargs = {"max_episode_steps": config.max_episode_steps} if config.max_episode_steps else {}
    n_envs = min(config.num_envs, config.episodes)
    clean = config.label_actions == "clean"

    def env():
        made = make_env(config.env_id, **env_kwargs)
        # clean labels: the collector records the policy's action, the env inside it adds the noise
        return noisy_execution(made, config.noise, config.seed) if clean else made

    # clean labels: the executed action is kept in Minari's infos, the env's own infos are not (rlft reads none)
    infos = {"record_infos": True, "step_data_callback": executed_action_only()} if clean else {}
    collectors = [minari.DataCollector(env(), data_format=config.data_format, **infos) for _ in range(n_envs)]
    for collector in collectors:  # HDF5 cannot report a full disk: room is checked before each write
        guard_storage(getattr(collector, "_storage", None), final)
    try:
        if model is not None:
            check_expert_spaces(model, config.env_id, collectors[0].observation_space, collectors[0].action_space,
                                str(config.policy))
        act = policy_act(model, collectors[0].action_space, config.seed, 0.0 if clean else config.noise,
                         deterministic=not config.stochastic)
        start = time.perf_counter()
        stats = run_episodes(collectors, act, config.episodes, config.seed, on_episode)
        seconds = time.perf_counter() - start
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # Minari warns about every optional field left out
            dataset = collectors[0].create_dataset(**_dataset_kwargs(config, policy_meta))
        guard_storage(dataset.storage, final)  # the other envs' episodes are written into it
        # Blocks are contiguous, so appending env 1, 2, ... keeps episode order. Minari's copy drops the
        # per-episode seed and reward statistics, so they are written again.
        blocks = episode_blocks(config.episodes, n_envs)
        for collector, block in zip(collectors[1:], blocks[1:], strict=True):
            collector.add_to_dataset(dataset)
            ids = list(block)
            extra = list(dataset.storage.apply(EpisodeMetadataCallback(), episode_indices=ids))
            dataset.storage.update_episode_metadata(
                [{**e, "seed": config.seed + i} for e, i in zip(extra, ids, strict=True)], episode_indices=ids
            )
        dataset.storage.update_metadata({"rlft": _rlft_metadata(config, policy_meta, n_envs, stats, seconds)})
    except Exception as exc:
        full = as_disk_full(exc, final.parent)  # a writer's own words for a full disk, when it does raise
        if full is None:
            raise
        raise output_error(final, full, "--dataset-id") from exc
    finally:
        for collector in collectors:
            collector.close()
    return stats, seconds


def _dataset_kwargs(config: CollectConfig, policy_meta: dict) -> dict:
    ref = reference_scores(config.env_id)
    policy = "uniformly random actions" if config.policy == "random" else (
        f"{policy_meta.get('algo', 'SB3').upper()} expert {Path(config.policy).name}"
    )
    noise = _noise_text(config)
    description = config.description or (
        f"{config.episodes} episodes of {policy} on {config.env_id}{noise}. Episode i was reset with seed "
        f"{config.seed} + i. Collected with rlft (Minari DataCollector)."
    )
    requirements = env_requirements(config.env_id)
    kwargs = {
        "dataset_id": config.dataset_id,
        "algorithm_name": policy + noise,
        "author": config.author,
        "description": description,
        "requirements": requirements,
    }
    if ref is not None:
        kwargs.update(ref_min_score=ref.random, ref_max_score=ref.expert)
    return kwargs


def _is_box(env_id: str) -> bool:
    import gymnasium


    return isinstance(action_space(env_id), gymnasium.spaces.Box)


def _noise_text(config: CollectConfig) -> str:
    sampled = ", actions sampled from the policy (its stochastic samples, D4RL's way)" if config.stochastic else ""
    if config.noise <= 0:
        return sampled
    labels = (", actions recorded before the noise (the policy's own, DART)" if config.label_actions == "clean"
              else "")
    return f"{sampled}, action noise {config.noise} ({_noise_kind(config)}){labels}"


def _noise_kind(config: CollectConfig) -> str:
    if _is_box(config.env_id):
        return "gaussian std in half action ranges, clipped"
    return "epsilon-random probability"


def _rlft_metadata(config: CollectConfig, policy_meta: dict, n_envs: int, stats, seconds: float) -> dict:
    returns = np.array([s.episode_return for s in stats])
    keep = ("env_id", "algo", "timesteps", "seed", "eval", "normalized_score", "hyperparams_source")
    return {
        "rlft_version": rlft.__version__,
        "policy": config.policy,
        "policy_metadata": {k: policy_meta[k] for k in keep if k in policy_meta},
        "deterministic_policy": config.policy != "random" and not config.stochastic,
        "stochastic": config.stochastic,
        "noise": config.noise,
        "noise_kind": _noise_kind(config) if config.noise > 0 else None,
        "action_labels": config.label_actions if config.noise > 0 else "executed",
        "seed": config.seed,
        "episode_seeds": f"episode i is reset with seed {config.seed} + i",
        "num_envs": n_envs,
        "max_episode_steps": config.max_episode_steps,
        "return_mean": float(returns.mean()),
        "return_std": float(returns.std()),
        "collect_seconds": round(seconds, 3),
        "steps_per_second": round(sum(s.length for s in stats) / seconds, 1) if seconds > 0 else None,
    }
