"""``rlft train online``: PPO (Stable-Baselines3) or TRPO (sb3-contrib) whose policy network is a language model.

The observation goes through the codec into text, the transformer reads it, and SB3's action and value heads
sit on the last real token's hidden state (:class:`rlft.policy.backbone.TransformerFeatures`, one backbone
shared by both heads). ``--backbone mlp`` is SB3's own MLP policy with everything else identical (algorithm,
hyperparameters from the shipped RL-Zoo files, heads, seeds), the baseline the LLM is measured against.

A RUN folder holds ``online.zip`` (the SB3 checkpoint), ``rlft_online.json`` (settings, learning curve,
steps/s, final evaluation), the codec and, for an LLM backbone, its config and tokenizer under ``backbone/``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from rlft.core.console import console, progress
from rlft.core.errors import InvalidInputError
from rlft.core.io import atomic_output_dir, atomic_write_text, check_output_dir
from rlft.core.plotting import figure, save_figure
from rlft.core.trackers import move_logs, scratch_logdir
from rlft.envs.registry import check_env_id, make_env, normalized_score
from rlft.envs.spaces import space_to_dict
from rlft.envs.vector_envs import check_spaces
from rlft.policy.backbone import (
    BACKBONE_DIR,
    BACKBONE_MODES,
    ONLINE_FILE,
    ONLINE_INFO,
    TransformerFeatures,
    online_algo_class,
    policy_kwargs_for_info,
    scaled_optimizer_kwargs,
)
from rlft.sources.experts import EVAL_SEED_OFFSET, check_sb3_trackers, evaluate, quiet_logger
from rlft.sources.hyperparams import check_rollout, load_hyperparams
from rlft.train.config_values import refuse_unneeded
from rlft.train.lifecycle import Stage
from rlft.train.online_config import OnlineConfig


def check_config(config: OnlineConfig) -> None:
    """Refuse bad settings before any model is built or anything is written."""

    check_sb3_trackers(config.report_to)
    check_env_id(config.env)
    if config.backbone_mode not in BACKBONE_MODES:
        raise InvalidInputError(f"--backbone-mode must be one of {', '.join(BACKBONE_MODES)}, "
                                f"got {config.backbone_mode!r}")
    if config.backbone != "mlp" and not Path(config.backbone).is_dir():
        raise InvalidInputError(f"--backbone {config.backbone} is not a model folder",
                                hint="make one with rlft model init / rlft model fetch, or use --backbone mlp")
    if config.backbone_lr_scale is not None and not config.backbone_lr_scale > 0:
        raise InvalidInputError(f"--backbone-lr-scale must be > 0, got {config.backbone_lr_scale}")
    if config.num_envs is not None and config.num_envs < 1:
        raise InvalidInputError(f"--num-envs must be at least 1, got {config.num_envs}")
    if config.eval_episodes < 1:
        raise InvalidInputError(f"--eval-episodes must be at least 1, got {config.eval_episodes}")
    if config.backbone == "mlp" and config.codec is not None:
        raise InvalidInputError("--codec is read by an LLM backbone; --backbone mlp reads the observations as numbers",
                                hint="drop --codec, or give --backbone MODEL_DIR")
    llm = config.backbone != "mlp"  # settings of another backbone or of checks that are off (pass 17, B6)
    refuse_unneeded(config, {"transformer": (llm, "to an LLM backbone (--backbone MODEL_DIR)"),
                          "trainable": (llm and config.backbone_mode != "frozen", "to a trained LLM backbone "
                                        "(--backbone-mode lora or full)"),
                          "lora": (llm and config.backbone_mode == "lora", "with --backbone-mode lora"),
                          "text": (llm and config.codec is None, "to the raw codec an LLM backbone makes without "
                                   "--codec"),
                          "checks": (config.check_freq > 0, "with --check-freq N")})
    if config.format != "raw" and config.codec is None:
        raise InvalidInputError(f"--format {config.format} needs --codec DATASET_DIR (its bins or tokens come from "
                                "data); without a dataset use --format raw")
    check_output_dir(config.out, config.overwrite, inputs=[
        ("--codec", config.codec), ("--backbone", None if config.backbone == "mlp" else config.backbone),
        ("--hyperparams", config.hyperparams)])


def build_codec(config: OnlineConfig, env):
    """The codec that writes observations: the dataset's, or a raw codec of the env's spaces."""
    from rlft.codecs import load_codec, make_codec

    if config.codec is not None:
        codec = load_codec(config.codec)
        check_spaces(f"the codec of {config.codec}", codec.observation_space, codec.action_space, config.env,
                     env.observation_space, env.action_space)
        return codec
    if config.precision < 0:
        raise InvalidInputError(f"--precision must be >= 0, got {config.precision}")
    return make_codec("raw", space_to_dict(env.observation_space), space_to_dict(env.action_space),
                      precision=config.precision, prompt_style="plain", env_id=config.env)


DEFAULT_BACKBONE_LR_SCALE = {"ppo": 0.1, "trpo": 1.0}  # PPO: row 10e; TRPO's policy step takes no learning rate


def backbone_lr_scale(config: OnlineConfig) -> float:
    """``--backbone-lr-scale``, or the algorithm's default."""
    if config.backbone_lr_scale is not None:
        return float(config.backbone_lr_scale)
    return DEFAULT_BACKBONE_LR_SCALE.get(config.algo, 1.0)


def policy_kwargs(config: OnlineConfig, codec, base: dict | None) -> dict[str, Any]:
    kwargs = dict(base or {})
    if config.backbone == "mlp":
        return kwargs

    kwargs.update(
        features_extractor_class=TransformerFeatures,
        features_extractor_kwargs={
            "backbone": str(Path(config.backbone).resolve()), "codec": codec.to_dict(), "mode": config.backbone_mode,
            "lora_r": config.lora_r,
            # TRPO differentiates twice (Hessian-vector products): CPU's fused attention has no double backward
            "attn_implementation": "eager" if config.algo == "trpo" and config.backbone_mode != "frozen" else None},
    )
    kwargs.setdefault("share_features_extractor", True)  # one transformer pass feeds both heads, unless told not to

    kwargs.update(scaled_optimizer_kwargs(backbone_lr_scale(config)))
    return kwargs


# SB3's own per-update diagnostics (its logger's train/ keys), kept per update in rlft_online.json: a collapse
# shows there first (approx_kl and clip_fraction jump, explained_variance falls, the entropy vanishes).
UPDATE_SIGNALS = ("approx_kl", "clip_fraction", "entropy_loss", "explained_variance", "value_loss",
                  "policy_gradient_loss", "learning_rate", "std", "kl_divergence_loss", "policy_objective",
                  "is_line_search_success")


def _curve_callback(bar, task, curve: list[tuple[int, float]], signals: list[dict[str, float]]):
    from stable_baselines3.common.callbacks import BaseCallback

    class Curve(BaseCallback):
        """The progress bar, each finished training episode's return (Monitor's ``episode`` info) and, per
        update, SB3's train/ diagnostics (recorded by ``train()``, still in the logger when the next rollout
        starts: SB3 dumps them only at its log interval)."""

        def _on_rollout_start(self) -> None:
            self.keep_signals()

        def _on_training_end(self) -> None:  # the last update has no rollout after it
            self.keep_signals()

        def keep_signals(self) -> None:
            values = self.model.logger.name_to_value
            row = {k: float(values.pop(f"train/{k}")) for k in UPDATE_SIGNALS if f"train/{k}" in values}
            if row:
                signals.append({"step": int(self.num_timesteps), **row})

        def _on_step(self) -> bool:
            for info in self.locals.get("infos", []):
                if "episode" in info:
                    curve.append((int(self.num_timesteps), float(info["episode"]["r"])))
            bar.update(task, completed=self.num_timesteps)
            return True

    return Curve()


class PolicyChecks:
    """``--check-freq``: seeded check episodes every ``check_freq`` steps and at the end, and the weights of the best
    policy seen (a later policy wins a tie: it trained longer), put back into the model before it is saved."""

    def __init__(self, config: OnlineConfig):
        self.config = config
        self.seed = config.seed + EVAL_SEED_OFFSET // 2  # the final evaluation's are seed + EVAL_SEED_OFFSET
        self.last_check = 0
        self.history: list[tuple[int, float]] = []
        self.best_step: int | None = None
        self.best_return = -np.inf
        self.weights: dict | None = None

    def check(self, model) -> None:
        import copy

        ev = evaluate(model, self.config.env, self.config.check_episodes, self.seed)
        self.history.append((int(model.num_timesteps), ev.mean))
        if ev.mean >= self.best_return:
            self.best_step, self.best_return = int(model.num_timesteps), ev.mean
            self.weights = copy.deepcopy(model.policy.state_dict())

    def restore(self, model) -> None:
        if self.weights is not None:
            model.policy.load_state_dict(self.weights)

    def summary(self) -> dict[str, Any]:
        return {"check_freq": self.config.check_freq, "check_episodes": self.config.check_episodes,
                "seed": self.seed, "history": [[s, round(r, 4)] for s, r in self.history],
                "best_step": self.best_step, "best_return": float(self.best_return)}


def _checks_callback(checks: PolicyChecks):
    from stable_baselines3.common.callbacks import BaseCallback

    class Checks(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps - checks.last_check >= checks.config.check_freq:
                checks.last_check = self.num_timesteps
                checks.check(self.model)
            return True

        def _on_training_end(self) -> None:
            if not checks.history or checks.history[-1][0] != self.num_timesteps:
                checks.check(self.model)

    return Checks()


def plot_curve(path: Path, curve: list[tuple[int, float]], title: str) -> None:
    fig, ax = figure(figsize=(6.0, 3.6))
    if curve:
        steps, returns = np.array(curve).T
        ax.plot(steps, returns, ".", ms=2, alpha=0.4, label="episode return")
        window = max(1, len(returns) // 20)
        smooth = np.convolve(returns, np.ones(window) / window, mode="valid")
        ax.plot(steps[window - 1:], smooth, "-", label=f"mean of {window}")
        ax.legend()
    ax.set(title=title, xlabel="environment steps", ylabel="return")
    fig.tight_layout()
    save_figure(fig, path)


def learn(model, config: OnlineConfig, timesteps: int, checks: PolicyChecks | None = None
          ) -> tuple[list, list, float]:
    """``model.learn`` with a progress bar: (learning curve, per-update signals, seconds), with ``checks`` of the
    policy along the way."""
    curve: list[tuple[int, float]] = []
    signals: list[dict[str, float]] = []
    start = time.perf_counter()
    with progress() as bar:
        task = bar.add_task(f"{config.algo} {config.env} ({config.backbone})", total=timesteps)
        # log_interval=None: SB3 never dumps (and clears) its logger, so each update's values are read back
        callbacks = [_curve_callback(bar, task, curve, signals)] + ([_checks_callback(checks)] if checks else [])
        model.learn(total_timesteps=timesteps, callback=callbacks, log_interval=None)
    return curve, signals, time.perf_counter() - start


class OnlineStage(Stage):
    """``rlft train online``: the lifecycle of :mod:`rlft.train.lifecycle` with SB3's PPO/TRPO/... learning from the
    env (its data), the LLM backbone or an MLP as the policy network."""

    name = "online"

    def check(self) -> None:
        check_config(self.config)

    def load_data(self) -> None:
        """No rows: the env is the data. Its hyperparameters (a file read, no generator drawn) are read here."""
        config = self.config
        self.hp = load_hyperparams(config.algo, config.env, config.hyperparams)
        self.timesteps = config.timesteps or self.hp.n_timesteps
        if not self.timesteps:
            raise InvalidInputError("--timesteps is required (the hyperparameter file gives no n_timesteps)")
        check_rollout(self.hp, config.num_envs or self.hp.n_envs, self.timesteps)

    def build_model(self) -> None:
        from stable_baselines3.common.env_util import make_vec_env

        config, hp = self.config, self.hp
        probe = make_env(config.env)
        self.codec = build_codec(config, probe) if config.backbone != "mlp" else None
        probe.close()
        self.n_envs = config.num_envs or hp.n_envs
        algo_kwargs = hp.algo_kwargs(online_algo_class(config.algo))
        kwargs = policy_kwargs(config, self.codec, algo_kwargs.pop("policy_kwargs", None))
        # checked before training: metadata that cannot be saved must not cost a run
        self.info_kwargs = policy_kwargs_for_info(kwargs) if config.backbone != "mlp" else {}
        self.venv = make_vec_env(config.env, n_envs=self.n_envs, seed=config.seed)
        try:
            self.model = online_algo_class(config.algo)(hp.policy, self.venv, seed=config.seed, verbose=0,
                                                        device="cpu", policy_kwargs=kwargs or None, **algo_kwargs)
        except AssertionError as exc:  # SB3's own checks of its settings (PPO: batch_size > 1)
            self.venv.close()
            raise InvalidInputError(f"{config.algo} refuses the settings of {hp.source}: {str(exc).strip()[:300]}",
                                    hint="mend the hyperparameters file (or the options)") from exc

    def learn(self) -> dict[str, Any]:
        config, model, codec, hp = self.config, self.model, self.codec, self.hp
        logdir = scratch_logdir("online")
        quiet_logger(model, config.report_to, logdir)  # no empty SB3-<date> folder left in the temporary directory
        trainable = sum(p.numel() for p in model.policy.parameters() if p.requires_grad)
        checks = PolicyChecks(config) if config.check_freq else None
        curve, signals, train_s = learn(model, config, self.timesteps, checks)
        self.venv.close()
        if checks is not None:
            checks.restore(model)  # the run keeps the best checked policy, not the last one
        ev = evaluate(model, config.env, config.eval_episodes, config.seed + EVAL_SEED_OFFSET)
        info = {
            "env_id": config.env,
            "algo": config.algo,
            "backbone": config.backbone if config.backbone == "mlp" else str(Path(config.backbone).resolve()),
            "backbone_mode": config.backbone_mode if config.backbone != "mlp" else None,
            "backbone_lr_scale": backbone_lr_scale(config) if config.backbone != "mlp" else None,
            "codec": codec.describe() if codec is not None else None,
            "timesteps": int(model.num_timesteps),
            "num_envs": self.n_envs,
            "seed": config.seed,
            "hyperparams": hp.raw,
            "hyperparams_source": hp.source,
            "policy_kwargs": self.info_kwargs,
            "trainable_parameters": int(trainable),
            "train_seconds": round(train_s, 3),
            "steps_per_second": model.num_timesteps / train_s if train_s else None,
            "eval": {"mean": ev.mean, "std": ev.std, "episodes": ev.episodes, "seed": ev.seed,
                     "returns": ev.returns},
            "normalized_score": normalized_score(config.env, ev.mean),
            "curve": [[s, r] for s, r in curve],
            "update_signals": signals,
            "checks": checks.summary() if checks is not None else None,
        }
        save_online_run(config, model, codec, curve, info, logdir)
        kept = (f"; kept the policy of step {checks.best_step} (check return {checks.best_return:.1f})"
                if checks is not None else "")
        console.print(f"{config.algo} {config.env} ({Path(config.backbone).name}): {model.num_timesteps} steps in "
                      f"{train_s:.1f} s ({info['steps_per_second']:.0f} steps/s){kept}; eval return {ev.mean:.1f} "
                      f"+- {ev.std:.1f} -> {config.out}")
        return info


def train_online(config: OnlineConfig) -> dict[str, Any]:
    """Train, evaluate and save one online run; returns its metadata (``rlft_online.json``)."""
    return OnlineStage(config).run()


def save_online_run(config: OnlineConfig, model, codec, curve: list, info: dict, logdir: Path) -> None:
    """The RUN folder, written whole or not at all: the SB3 checkpoint, the backbone's config (and weights when
    frozen) and tokenizer, the curve's plot, the metadata and the logs."""
    import json

    with atomic_output_dir(config.out, config.overwrite) as tmp:
        model.save(tmp / ONLINE_FILE)
        if codec is not None:
            codec.save(tmp)
            extractor = model.policy.features_extractor
            if config.backbone_mode == "frozen":  # its weights are not in the checkpoint
                extractor.backbone.save_pretrained(tmp / BACKBONE_DIR)
            else:
                extractor.backbone.config.save_pretrained(tmp / BACKBONE_DIR)
            extractor.tokenizer.save_pretrained(tmp / BACKBONE_DIR)
        plot_curve(tmp / "curve.png", curve,
                   f"{config.algo.upper()} {config.env}, backbone {Path(config.backbone).name}")
        atomic_write_text(tmp / ONLINE_INFO, json.dumps(info, indent=1) + "\n")
        move_logs(logdir, tmp / "logs")
