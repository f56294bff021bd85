"""Stable-Baselines3 experts: train with tuned hyperparameters, stop at a target return, evaluate, load.

A checkpoint ``FILE.zip`` (SB3 format) always has ``FILE.json`` beside it: env id, algorithm, timesteps
trained, hyperparameters, seed, evaluation, normalized score, versions and wall time.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import rlft
from rlft.core.claims import claim_output
from rlft.core.console import progress
from rlft.core.errors import InvalidInputError
from rlft.core.io import atomic_write_file, atomic_write_text
from rlft.core.options import check_needed
from rlft.core.output_file import check_output_file, is_json_with, is_zip
from rlft.core.reading import read_json_mapping, require_file
from rlft.core.seeding import limit_threads, seed_everything
from rlft.envs.registry import check_env_id, make_env, normalized_score, reference_scores
from rlft.envs.spaces import space_to_dict
from rlft.envs.vector_envs import check_spaces
from rlft.sources.expert_algos import algo_class, auto_algo, check_algo_space
from rlft.sources.expert_config import ALGOS, AUTO_ALGO, ExpertConfig
from rlft.sources.hyperparams import check_rollout, load_hyperparams, tuned_algos
from rlft.sources.minari_source import datasets_root
from rlft.sources.replay import check_replay_request, write_replay
from rlft.sources.rollouts import policy_act, run_episodes

SB3_BUFFER_SIZE = 1_000_000  # SAC's, TQC's and DQN's default replay buffer size
# Evaluation episodes use seeds far from the training seeds so the score is measured on unseen starts.
EVAL_SEED_OFFSET = 1_000_000


@dataclass
class Evaluation:
    """Mean/std return of deterministic episodes with seeds ``seed .. seed+episodes-1``."""

    mean: float
    std: float
    episodes: int
    seed: int
    returns: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)


@dataclass
class ExpertResult:
    """The trained model, the metadata written to ``<out>.json`` and the checkpoint path."""

    model: Any
    metadata: dict
    path: Path


def metadata_path(model_path: str | Path) -> Path:
    """``FILE.json`` next to ``FILE.zip``."""
    return Path(model_path).with_suffix(".json")


def evaluate(model, env_id: str, episodes: int, seed: int, num_envs: int = 8, env_kwargs: dict | None = None):
    """Deterministic mean/std return over ``episodes`` (seeds ``seed + i``), batched over up to ``num_envs``."""
    envs = [make_env(env_id, **(env_kwargs or {})) for _ in range(max(1, min(num_envs, episodes)))]
    try:
        check_expert_spaces(model, env_id, envs[0].observation_space, envs[0].action_space, "policy")
        act = policy_act(model, envs[0].action_space, seed)
        stats = run_episodes(envs, act, episodes, seed)
    finally:
        for env in envs:
            env.close()
    returns, lengths = [s.episode_return for s in stats], [s.length for s in stats]
    return Evaluation(float(np.mean(returns)), float(np.std(returns)), episodes, seed, returns, lengths)


def _callbacks(config: ExpertConfig, n_envs: int, bar, task, log_dir: str):
    """rlft's progress bar, and SB3's ``EvalCallback`` (+ ``StopTrainingOnRewardThreshold`` with
    ``--stop-at-return``) every ``eval_freq`` env steps. Returns ``(callbacks, eval_callback or None)``."""
    from stable_baselines3.common.callbacks import (
        BaseCallback,
        EvalCallback,
        StopTrainingOnRewardThreshold,
    )
    from stable_baselines3.common.env_util import make_vec_env

    class ProgressCallback(BaseCallback):
        """Advances rlft's rich bar (the one every long rlft command shows) by the env steps of each vector step;
        SB3's own ``progress_bar=True`` is a tqdm bar of another look."""

        def _on_step(self) -> bool:
            bar.update(task, completed=self.num_timesteps)
            return True

    class EvalLine(BaseCallback):
        """After each evaluation: the bar's label, and one plain line so a background run's log shows the curve."""

        def _on_step(self) -> bool:
            mean = self.parent.last_mean_reward
            bar.update(task, description=f"{config.algo} {config.env_id} (eval {mean:.1f})")
            bar.console.print(f"step {self.num_timesteps}: eval mean return {mean:.1f}")
            return True

    if config.eval_freq <= 0:
        return [ProgressCallback()], None
    eval_env = make_vec_env(config.env_id, n_envs=min(8, config.eval_freq_episodes),
                            seed=config.seed + EVAL_SEED_OFFSET // 2)
    stop = (StopTrainingOnRewardThreshold(reward_threshold=config.stop_at_return)
            if config.stop_at_return is not None else None)
    # EvalCallback counts its own calls, one per vector step of n_envs env steps; with a log_path it keeps every
    # evaluation's returns in memory (evaluations_results), the final one included when the threshold stops training
    evaluation = EvalCallback(eval_env, callback_on_new_best=stop, callback_after_eval=EvalLine(),
                              n_eval_episodes=config.eval_freq_episodes, eval_freq=max(1, config.eval_freq // n_envs),
                              log_path=log_dir, deterministic=True, verbose=0, warn=False)
    return [ProgressCallback(), evaluation], evaluation


def _eval_history(evaluation) -> list[dict]:
    if evaluation is None:
        return []
    return [{"timesteps": int(t), "mean_return": float(np.mean(r)), "std_return": float(np.std(r))}
            for t, r in zip(evaluation.evaluations_timesteps, evaluation.evaluations_results, strict=True)]


def _check(config: ExpertConfig) -> None:
    check_env_id(config.env_id)
    if config.algo == AUTO_ALGO:
        config.algo = auto_algo(config.env_id)
    algo_class(config.algo)
    check_sb3_trackers(config.report_to)
    out = Path(config.out)
    if out.suffix != ".zip":
        raise InvalidInputError(f"--out must end in .zip (SB3 checkpoint), got {out}")

    check_output_file(out, config.overwrite, ours=is_zip)
    check_output_file(metadata_path(out), config.overwrite, option="the checkpoint's metadata file",
                      ours=is_json_with("env_id", "algo"))
    check_algo_space(config.algo, config.env_id)
    if config.stop_at_return is not None and config.eval_freq <= 0:
        raise InvalidInputError("--stop-at-return needs periodic evaluation: set --eval-freq above 0")
    # a setting of one mode given without it (hostile pass 18, B5: both exited 0 and did nothing)
    check_needed(config, {"periodic": (config.eval_freq > 0, "with periodic evaluation (--eval-freq above 0)"),
                          "replay": (config.record_replay is not None, "with --record-replay ID")})
    for name in ("eval_episodes", "eval_freq_episodes"):
        if getattr(config, name) < 1:
            raise InvalidInputError(f"{name} must be at least 1")


SB3_TRACKERS = ("none", "tensorboard")  # SB3's own output formats; W&B can sync TensorBoard's files


def check_sb3_trackers(report_to: str) -> list[str]:
    names = [n.strip().lower() for n in str(report_to or "none").split(",") if n.strip()]
    unknown = [n for n in names if n not in SB3_TRACKERS]
    if unknown:
        raise InvalidInputError(f"--report-to {', '.join(unknown)}: Stable-Baselines3 stages log to tensorboard",
                                hint="--report-to tensorboard (W&B and trackio can import TensorBoard's files)")
    return [n for n in names if n != "none"]


def quiet_logger(model, report_to: str = "none", logdir: Path | None = None) -> None:
    """SB3's logger: in memory, or TensorBoard files in ``logdir`` with ``--report-to tensorboard``. Left to itself,
    ``learn()`` with ``verbose=0`` makes an empty ``SB3-<date>`` folder in the temporary directory on every run
    (its default logger's folder), and never removes it."""
    from stable_baselines3.common.logger import Logger, configure

    if check_sb3_trackers(report_to) and logdir is not None:
        model.set_logger(configure(str(logdir), ["tensorboard"]))
    else:
        model.set_logger(Logger(folder=None, output_formats=[]))


def train_expert(config: ExpertConfig) -> ExpertResult:
    """Train ``config.algo`` on ``config.env_id``, evaluate it, save ``out`` and ``out.json``; return both."""
    _check(config)
    import stable_baselines3
    from stable_baselines3.common.env_util import make_vec_env

    limit_threads()
    seed_everything(config.seed)
    hp = load_hyperparams(config.algo, config.env_id, config.hyperparams)
    timesteps = config.timesteps or hp.n_timesteps
    if not timesteps or timesteps < 1:
        tuned = [a for a in tuned_algos(config.env_id) if a in ALGOS]  # trpo.yaml is for rlft train online
        hint = (f"tuned settings for {config.env_id} ship for --algo {', '.join(tuned)}" if tuned
                else "pass --timesteps N (SB3's default settings are used), or --hyperparams FILE")
        raise InvalidInputError(f"no tuned {config.algo} settings for {config.env_id} ({hp.source}), so the "
                                "number of steps is unknown", hint=hint)
    n_envs = config.num_envs or hp.n_envs
    check_rollout(hp, n_envs, timesteps)
    if config.record_replay:
        check_replay_request(config.record_replay, config.algo, hp.raw.get("buffer_size", SB3_BUFFER_SIZE),
                             timesteps, config.overwrite)
        # the id is this run's from now: a collect into it while the expert trains is refused (hostile pass 20, F4)
        claim_output(datasets_root() / config.record_replay, "--record-replay")
    cls = algo_class(config.algo)
    kwargs = hp.algo_kwargs(cls)
    from stable_baselines3.common.vec_env import VecCheckNan

    # a NaN or inf from the environment is named where it appears, not as torch's error deep in the policy
    venv = VecCheckNan(make_vec_env(config.env_id, n_envs=n_envs, seed=config.seed), raise_exception=True)
    try:
        model = cls(hp.policy, venv, seed=config.seed, verbose=0, device="cpu", **kwargs)
    except (AssertionError, ValueError) as exc:  # SB3's own checks of its settings (PPO: batch_size > 1)
        venv.close()
        raise InvalidInputError(f"{config.algo} refuses the settings of {hp.source}: {str(exc).strip()[:300]}",
                                hint="mend the hyperparameters file (or the options); nothing was written") from exc
    out_path = Path(config.out)
    quiet_logger(model, config.report_to, out_path.with_name(out_path.stem + "_tb"))

    import tempfile

    start = time.perf_counter()
    with progress() as bar, tempfile.TemporaryDirectory(prefix="rlft-expert-eval-") as log_dir:
        task = bar.add_task(f"{config.algo} {config.env_id}", total=timesteps)
        callbacks, evaluation = _callbacks(config, n_envs, bar, task, log_dir)
        try:
            model.learn(total_timesteps=timesteps, callback=callbacks)
        except ValueError as exc:
            if "nan" not in str(exc).lower() and "inf" not in str(exc).lower():
                raise
            raise InvalidInputError(f"{config.env_id} gave a non-finite value while training: "
                                    f"{str(exc).splitlines()[0][:200]}",
                                    hint="check the environment's observations and rewards; nothing was written"
                                    ) from exc
        if evaluation is not None:
            evaluation.eval_env.close()
    train_s = time.perf_counter() - start
    history = _eval_history(evaluation)
    venv.close()

    ev = evaluate(model, config.env_id, config.eval_episodes, config.seed + EVAL_SEED_OFFSET)
    if config.record_replay:  # before the checkpoint: a failure here leaves no expert without its replay
        write_replay(model, config.env_id, config.record_replay,
                     {"env_id": config.env_id, "algo": config.algo, "timesteps": int(model.num_timesteps),
                      "seed": config.seed,
                      "eval": {"mean_return": ev.mean, "std_return": ev.std, "episodes": ev.episodes},
                      "normalized_score": normalized_score(config.env_id, ev.mean),
                      "hyperparams_source": hp.source}, config.overwrite)

    # save then rename: an existing checkpoint is never half-written (SB3 insists on the .zip suffix)
    out = atomic_write_file(config.out, model.save, suffix=".zip")
    metadata = {
        "env_id": config.env_id,
        "algo": config.algo,
        "timesteps": int(model.num_timesteps),
        "timesteps_requested": int(timesteps),
        "stopped_early": int(model.num_timesteps) < int(timesteps),
        "stop_at_return": config.stop_at_return,
        "num_envs": n_envs,
        "seed": config.seed,
        "policy": hp.policy,
        "hyperparams": hp.raw,
        "hyperparams_source": hp.source,
        "eval": {"mean_return": ev.mean, "std_return": ev.std, "episodes": ev.episodes, "seed": ev.seed,
                 "deterministic": True, "returns": ev.returns},
        "eval_history": history,
        "normalized_score": normalized_score(config.env_id, ev.mean),
        "reference_scores": _refs(config.env_id),
        "replay_dataset": config.record_replay,
        "train_seconds": round(train_s, 2),
        "steps_per_second": round(model.num_timesteps / train_s, 1),
        "versions": _versions(rlft, stable_baselines3),
    }
    atomic_write_text(metadata_path(out), json.dumps(metadata, indent=2, default=str) + "\n")
    return ExpertResult(model, metadata, out)


def _refs(env_id: str) -> dict | None:
    ref = reference_scores(env_id)
    return None if ref is None else {"random": ref.random, "expert": ref.expert, "source": ref.source}


def _versions(rlft, stable_baselines3) -> dict:
    import gymnasium
    import torch

    versions = {"rlft": rlft.__version__, "stable_baselines3": stable_baselines3.__version__,
                "gymnasium": gymnasium.__version__, "torch": torch.__version__}
    try:
        import sb3_contrib

        versions["sb3_contrib"] = sb3_contrib.__version__
    except ImportError:  # pragma: no cover - sb3-contrib is a dependency, but only TQC needs it
        pass
    return versions


def check_expert_spaces(model, env_id, obs_space, act_space, what) -> None:
    """Refuse an SB3 model whose observation or action space is not ``env_id``'s (one line naming both), before it
    is asked to act there (SB3 itself raises a shape error mid-run)."""
    try:
        check_spaces(f"the expert {what}", space_to_dict(model.observation_space), space_to_dict(model.action_space),
                     env_id, obs_space, act_space)
    except InvalidInputError as exc:
        if "does not match" in exc.message:
            raise
        # spaces rlft cannot describe: compare shapes only
        if model.observation_space.shape != obs_space.shape or model.action_space.shape != act_space.shape:
            raise InvalidInputError(f"the expert {what} does not match {env_id}") from exc


def read_metadata(path: str | Path) -> dict:
    """The ``.json`` beside a checkpoint, or {} when there is none (a checkpoint made elsewhere); a damaged one is
    one clear error."""
    meta = metadata_path(path)
    return read_json_mapping(meta, "the checkpoint's metadata") if meta.is_file() else {}


def load_expert(path: str | Path) -> tuple[Any, dict]:
    """Load an SB3 checkpoint and its metadata: ``model.predict(obs_batch, deterministic=True)`` works on batches.

    The algorithm comes from the metadata; without it each known algorithm is tried in turn. Schedules are
    replaced by constants on load (they are only needed to keep training, and may not unpickle elsewhere).
    """
    path = Path(path)
    if path.is_dir():
        raise InvalidInputError(f"expert checkpoint {path} is a folder, not an SB3 checkpoint (.zip)",
                                hint="give the .zip that rlft expert train wrote")
    require_file(path, "expert checkpoint", hint="give the .zip that rlft expert train wrote")  # a pipe, a device
    metadata = read_metadata(path)
    custom = {"learning_rate": 0.0, "lr_schedule": lambda _: 0.0, "clip_range": lambda _: 0.0}
    known = metadata.get("algo") or _algo_from_zip(path)
    algos = [known] if known in ALGOS else list(ALGOS)
    errors = []
    for algo in algos:
        try:
            model = algo_class(algo).load(path, device="cpu", custom_objects=custom)
        except Exception as exc:  # noqa: BLE001 - any failure means "not this algorithm"
            errors.append(f"{algo}: {type(exc).__name__}")
            continue
        metadata.setdefault("algo", algo)
        return model, metadata
    raise InvalidInputError(f"{path} is not a loadable SB3 checkpoint ({'; '.join(errors)})")


def _algo_from_zip(path: Path) -> str | None:
    """Guess the algorithm of a checkpoint made elsewhere from the module of its policy class."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as zf:
            data = json.loads(zf.read("data"))
    except (zipfile.BadZipFile, KeyError, ValueError):
        return None
    module = str(data.get("policy_class", {}).get("__module__", ""))
    for algo in ("sac", "tqc", "dqn"):
        if f".{algo}." in module:
            return algo
    return "ppo" if module.endswith("common.policies") and "clip_range" in data else None


def evaluate_expert(path: str | Path, episodes: int = 10, seed: int | None = None, num_envs: int = 8):
    """Load ``path`` and evaluate it on the env id from its metadata; returns (Evaluation, metadata)."""
    model, metadata = load_expert(path)
    env_id = metadata.get("env_id")
    if not env_id:
        raise InvalidInputError(f"{metadata_path(path)} is missing, so the env id is unknown")
    if episodes < 1:
        raise InvalidInputError(f"--episodes must be at least 1, got {episodes}")
    seed = metadata.get("seed", 0) + EVAL_SEED_OFFSET if seed is None else seed
    return evaluate(model, env_id, episodes, seed, num_envs), metadata
