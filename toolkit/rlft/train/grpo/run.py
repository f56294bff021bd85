"""``rlft train grpo``: TRL GRPOTrainer with LoRA and the codec-driven control rewards.

Each prompt gets ``num_generations`` sampled completions; the rewards (``rlft.train.grpo.rewards``) decode them
with the dataset's codec and score them against the row's columns. TRL logs ``rewards/<name>/mean`` and the
rates the rewards report (``parse_rate``, ``optimal_action_rate``) to the console and TensorBoard.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rlft.core.console import console
from rlft.core.errors import InvalidInputError
from rlft.core.seeding import limit_threads, seed_everything
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
from rlft.train.inputs import StageInputs, load_inputs, load_model_for_training, prompt_token_metrics
from rlft.train.run_summary import first_logged, last_logged, parameter_metrics
from rlft.train.stage import (
    checkpointing_field,
    criterion_callback,
    criterion_first,
    finish_run,
    lora_config,
    model_defaults,
    run_outcome,
    stage_callbacks,
    start_run,
    training_args,
)

GRPO_COLUMNS = ("prompt",)
EPISODE_METRICS = ("episode/return", "episode/success_rate", "episode/invalid_rate", "episode/turns",
                   "episode/truncated_rate", "episode/rollout_seconds", "episode/episodes_per_second",
                   "credit/state_groups", "credit/state_groups_informative", "credit/turns_with_step_credit",
                   "credit/start_value", "credit/model_states")
GRPO_LEARNING_RATES = (3e-4, 1e-5)  # default peak rate: (from-scratch models under 20M parameters, pretrained)


def run_grpo(config: GRPOStageConfig, callbacks: list | None = None) -> dict[str, Any]:
    """Train and save one GRPO run; returns the run info (``rlft_run.json``).

    ``callbacks`` are extra ``transformers.TrainerCallback`` objects (e.g. to inspect weights during training).
    """
    limit_threads()
    episodic, constrained = check_grpo_settings(config)
    inputs = load_inputs(config, "grpo", GRPO_COLUMNS)
    config, constrained = action_space_defaults(config, inputs.codec, episodic, constrained)
    names = reward_names(config, episodic, inputs.train.column_names)
    if "q-advantage" in names and "q_values" in inputs.train.column_names:  # a missing column is named later
        check_finite_q_values(inputs.train, inputs.dataset)
    group = resolve_group(config, inputs.codec, episodic)
    warn_unrepeated_states(config, inputs.codec)
    # accelerate launch sets WORLD_SIZE for every process it starts
    check_advantage(config.advantage, group, int(os.environ.get("WORLD_SIZE", "1")))
    warn_forced_kl(config, group)
    check_inputs = inputs  # the criterion checks decisions on the dataset's rows
    variant = grpo_variant(config, inputs, episodic, constrained, group)
    rewards, inputs = variant.rewards(names)
    check_generation_batch(config)

    criterion = criterion_callback(config, check_inputs)
    seed_everything(config.seed)
    model, tokenizer = load_model_for_training(inputs, config.allow_tokenizer_mismatch)
    config = model_defaults(config, model, GRPO_LEARNING_RATES)
    rollout = variant.rollout(inputs, model, tokenizer)
    # built before start_run (the run folder is --out): TRL refuses bad settings before anything is written
    args, grpo_args = grpo_training_args(config, Path(config.out), model, episodic)
    run_dir, checkpoint, info = start_run(config, "grpo", inputs,
                                          run_record(config, rewards, variant, constrained, group))

    with run_outcome(run_dir, info):
        watch = stall_watch(config.stall_steps, names, group, constrained)
        if args[checkpointing_field()] and config.lora:
            model.enable_input_require_grads()  # LoRA + checkpointing: inputs must carry grad or adapters never learn
        trainer = variant.trainer_class(rollout)(
            model=model,
            reward_funcs=rewards,
            args=grpo_args,
            train_dataset=inputs.train,
            processing_class=tokenizer,
            peft_config=lora_config(config) if config.lora else None,
            callbacks=stage_callbacks(criterion, run_dir, [*watch, *(callbacks or [])]),
            **({"rollout_func": rollout} if rollout is not None else {}),
        )
        criterion_first(trainer, criterion)
        console.print(f"[bold]GRPO[/] {inputs.base_model} on {inputs.dataset} -> {run_dir}; rewards "
                      + ", ".join(f"{r.name} [{r.low:g}, {r.high:g}]" for r in rewards))
        result = train_then_close(trainer, checkpoint, rewards, rollout)
        metrics = grpo_metrics(trainer, result, inputs, tokenizer, rollout, variant)
        metrics.update(logged_first_last(trainer.state.log_history, logged_keys(rewards)))
        for callback in watch:
            metrics.update(callback.summary())
        return finish_run(trainer, run_dir, info, metrics, f"GRPO run -> {run_dir}", criterion)


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
