"""``rlft train grpo``: TRL GRPOTrainer with LoRA and the codec-driven control rewards.

Each prompt gets ``num_generations`` sampled completions; the rewards (``rlft.train.grpo.rewards``) decode them
with the dataset's codec and score them against the row's columns. TRL logs ``rewards/<name>/mean`` and the
rates the rewards report (``parse_rate``, ``optimal_action_rate``) to the console and TensorBoard.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rich.markup import escape

from rlft.core.console import console
from rlft.core.errors import InvalidInputError
from rlft.train.config_values import refuse_unneeded
from rlft.train.configs import trl_overrides
from rlft.train.grpo.action_targets import check_advantage
from rlft.train.grpo.answers import EveryAnswerGRPO
from rlft.train.grpo.config import GRPOStageConfig
from rlft.train.grpo.episode_answers import EpisodeAnswersGRPO
from rlft.train.grpo.episodic import EpisodicGRPO
from rlft.train.grpo.rewards import check_finite_q_values
from rlft.train.grpo.settings import (
    action_space_defaults,
    check_generation_batch,
    check_grpo_settings,
    resolve_group,
    reward_names,
    warn_forced_kl,
    warn_unrepeated_states,
)
from rlft.train.grpo.signals import stall_watch
from rlft.train.grpo.step import StepGRPO
from rlft.train.grpo.variant import GRPOVariant
from rlft.train.inputs import StageInputs, load_inputs, prompt_token_metrics
from rlft.train.lifecycle import TRLStage
from rlft.train.run_summary import first_logged, last_logged, parameter_metrics
from rlft.train.stage import criterion_callback, stage_callbacks, training_args

GRPO_COLUMNS = ("prompt",)
EPISODE_METRICS = ("episode/return", "episode/success_rate", "episode/invalid_rate", "episode/turns",
                   "episode/truncated_rate", "episode/rollout_seconds", "episode/episodes_per_second",
                   "credit/state_groups", "credit/state_groups_informative", "credit/turns_with_step_credit",
                   "credit/start_value", "credit/model_states")
GRPO_LEARNING_RATES = (3e-4, 1e-5)  # default peak rate: (from-scratch models under 20M parameters, pretrained)


class GRPOStage(TRLStage):
    """``rlft train grpo``: the lifecycle of :mod:`rlft.train.lifecycle` with TRL's ``GRPOTrainer``; the kind of
    run the settings ask for (:func:`grpo_variant`) brings its rewards, rollout and trainer class."""

    name, title = "grpo", "GRPO"
    learning_rates = GRPO_LEARNING_RATES

    def check(self) -> None:
        config = self.config
        self.episodic, constrained = check_grpo_settings(config)
        self.inputs = inputs = load_inputs(config, "grpo", GRPO_COLUMNS)
        self.config, self.constrained = action_space_defaults(config, inputs.codec, self.episodic, constrained)
        config = self.config
        self.names = reward_names(config, self.episodic, inputs.train.column_names)
        if "q-advantage" in self.names and "q_values" in inputs.train.column_names:  # a missing one is named later
            check_finite_q_values(inputs.train, inputs.dataset)
        self.group = resolve_group(config, inputs.codec, self.episodic)
        warn_unrepeated_states(config, inputs.codec)
        # accelerate launch sets WORLD_SIZE for every process it starts
        check_advantage(config.advantage, self.group, int(os.environ.get("WORLD_SIZE", "1")))
        warn_forced_kl(config, self.group)
        refuse_unneeded(config, mode_conditions(config, self.episodic, self.group, self.names))

    def load_data(self) -> None:
        check_inputs = self.inputs  # the criterion checks decisions on the dataset's rows
        self.variant = grpo_variant(self.config, self.inputs, self.episodic, self.constrained, self.group)
        self.rewards, self.inputs = self.variant.rewards(self.names)
        check_generation_batch(self.config)
        self.criterion = criterion_callback(self.config, check_inputs)

    def prepare(self) -> None:
        self.rollout = self.variant.rollout(self.inputs, self.model, self.tokenizer)

    def training_args(self, run_dir: Path):
        return grpo_training_args(self.config, run_dir, self.model, self.episodic)

    def record(self) -> dict[str, Any]:
        return run_record(self.config, self.rewards, self.variant, self.constrained, self.group)

    def trainer_class(self):
        return self.variant.trainer_class(self.rollout)

    def trainer_inputs(self) -> dict[str, Any]:
        return {"reward_funcs": self.rewards, "train_dataset": self.inputs.train,
                **({"rollout_func": self.rollout} if self.rollout is not None else {})}

    def callbacks_for(self, run_dir: Path) -> list:
        self.watch = stall_watch(self.config.stall_steps, self.names, self.group, self.constrained)
        return stage_callbacks(self.criterion, run_dir, [*self.watch, *(self.extra_callbacks or [])])

    def train(self, trainer, run_dir: Path, checkpoint) -> dict[str, Any]:
        rewards = self.rewards
        console.print(f"[bold]GRPO[/] {escape(str(self.inputs.base_model))} on {escape(str(self.inputs.dataset))} -> "
                      f"{escape(str(run_dir))}; rewards "
                      + ", ".join(f"{r.name} [{r.low:g}, {r.high:g}]" for r in rewards))
        result = train_then_close(trainer, checkpoint, rewards, self.rollout)
        metrics = grpo_metrics(trainer, result, self.inputs, self.tokenizer, self.rollout, self.variant)
        metrics.update(logged_first_last(trainer.state.log_history, logged_keys(rewards)))
        for callback in self.watch:
            metrics.update(callback.summary())
        return metrics


def mode_conditions(config: GRPOStageConfig, episodic: bool, group: str, names: list[str]) -> dict[str, tuple]:
    """Where each mode's settings apply (their fields' ``needs``): one given where it does nothing is refused
    (hostile pass 16, B6: --env-samples without the env reward, --credit-window under --credit episode exited 0)."""
    credit = config.credit if episodic else None
    return {"episodic": (episodic, "with --rollout episode"),
            "q bonus": ("q-advantage" in names or (episodic and group == "actions"),
                        "with the q-advantage reward, or --rollout episode --credit answers"),
            "target": (group == "actions" and config.advantage == "target", "with --group actions --advantage target"),
            "env": (not episodic and "env" in names, "with the env reward (--reward ...,env) of step rollouts"),
            # recorded in the run as used though no reward read it (hostile pass 21, F9)
            "critic": (not episodic and "critic" in names, "with the critic reward (--reward ...,critic)"),
            "credit": (credit not in (None, "episode"), "with --rollout episode --credit state|action|model|answers"),
            "step credit": (credit in ("state", "action", "model"),
                            "with --rollout episode --credit state|action|model"),
            "action credit": (credit == "action", "with --rollout episode --credit action")}


def run_grpo(config: GRPOStageConfig, callbacks: list | None = None) -> dict[str, Any]:
    """Train and save one GRPO run; returns the run info (``rlft_run.json``).

    ``callbacks`` are extra ``transformers.TrainerCallback`` objects (e.g. to inspect weights during training).
    """
    return GRPOStage(config, callbacks).run()


def grpo_variant(config: GRPOStageConfig, inputs: StageInputs, episodic: bool, constrained: bool,
                 group: str) -> GRPOVariant:
    """The kind of run the settings ask for (:mod:`rlft.train.grpo.variant`); ``check_grpo_settings`` has refused
    the combinations none of them is."""
    if episodic:
        kind = EpisodeAnswersGRPO if group == "actions" else EpisodicGRPO
    else:
        kind = EveryAnswerGRPO if group == "actions" else StepGRPO
    return kind(config, inputs, constrained)


def run_record(config: GRPOStageConfig, rewards: list, variant: GRPOVariant, constrained: bool,
               group: str = "sampled") -> dict[str, Any]:
    """What ``rlft_run.json`` records of the GRPO setup: the rewards and their ranges, weights, rollout and what the
    run's kind adds."""
    return {"rewards": [{"name": r.name, "low": r.low, "high": r.high} for r in rewards],
            "reward_weights": config.reward_weights, "rollout": config.rollout, "group": group,
            "variant": variant.name, "constrained_sampling": constrained and group == "sampled", **variant.record()}


def grpo_training_args(config: GRPOStageConfig, run_dir, model, episodic: bool):
    """(the shared TrainingArguments fields, TRL's ``GRPOConfig``), the user's TRL settings applied last."""
    from trl import GRPOConfig

    n_params = sum(p.numel() for p in model.parameters())
    args = training_args(config, run_dir, n_params)
    try:
        grpo_args = GRPOConfig(**trl_overrides(config, dict(
            **args,  # with the TRL settings the stage names (trl_settings)
            # an episode's last answer need not end in EOS (the episode can end on any turn)
            mask_truncated_completions=config.mask_truncated_completions and not episodic,
            remove_unused_columns=False,  # the rewards read the dataset's other columns
        )))
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"invalid GRPO settings: {exc}") from exc
    return args, grpo_args


def train_then_close(trainer, checkpoint, rewards: list, rollout):
    """``trainer.train()``, then close the rewards and rollout that hold environments, even when training fails."""
    try:
        return trainer.train(resume_from_checkpoint=checkpoint)
    finally:
        for reward in rewards:
            if hasattr(reward, "close"):
                reward.close()
        if hasattr(rollout, "close"):
            rollout.close()


def grpo_metrics(trainer, result, inputs: StageInputs, tokenizer, rollout, variant: GRPOVariant) -> dict[str, Any]:
    """Rows, steps, speed, parameter counts and prompt lengths, plus what the run's kind measured of its rollouts."""
    metrics: dict[str, Any] = {
        "train_rows": len(inputs.train),
        "global_step": trainer.state.global_step,
        "train_runtime_s": result.metrics.get("train_runtime"),
        "train_steps_per_second": result.metrics.get("train_steps_per_second"),
        **parameter_metrics(trainer.model),
        **prompt_token_metrics(inputs.train, tokenizer, inputs.conversational),
    }
    metrics.update(variant.metrics(rollout, metrics["train_runtime_s"] or 0.0))
    return metrics


def logged_keys(rewards: list) -> list[str]:
    """The logged values whose first and last values the run records."""
    return ["reward", *[f"rewards/{r.name}/mean" for r in rewards], "parse_rate", "optimal_action_rate",
            "completions/mean_length", "frac_reward_zero_std", "entropy", "kl", "clip_ratio/region_mean",
            "grad_norm", "policy_entropy", "policy_correct_prob", "policy_correct_prob_min", *EPISODE_METRICS]


def logged_first_last(history: list[dict], keys: list[str]) -> dict[str, Any]:
    """``<key>_first`` and ``<key>_last`` for each of ``keys`` that was logged."""
    metrics: dict[str, Any] = {}
    for key in keys:
        first, last = first_logged(history, key), last_logged(history, key)
        if last is not None:
            metrics[f"{key}_first"] = first
            metrics[f"{key}_last"] = last
    return metrics
