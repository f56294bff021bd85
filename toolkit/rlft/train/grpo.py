"""``rlft train grpo``: TRL GRPOTrainer with LoRA and the codec-driven control rewards.

Each prompt gets ``num_generations`` sampled completions; the rewards (``rlft.train.rewards``) decode them
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
from rlft.policy.action_scores import ActionChoices
from rlft.train.action_targets import action_set_trainer_class, check_advantage
from rlft.train.configs import trl_overrides
from rlft.train.episode_answers import CriticReward, EpisodeAnswerRollout, episode_answers_trainer_class
from rlft.train.episode_rewards import episode_rewards
from rlft.train.episode_setup import check_context, check_episode_env, episode_starts
from rlft.train.episode_trainer import episode_trainer_class
from rlft.train.episodes import EpisodeRollout
from rlft.train.grpo_config import GRPOStageConfig
from rlft.train.grpo_settings import (
    action_space_defaults,
    check_generation_batch,
    check_grpo_settings,
    check_start_format,
    resolve_group,
    reward_names,
    warn_forced_kl,
    warn_unrepeated_states,
)
from rlft.train.inputs import StageInputs, load_inputs, load_model_for_training, prompt_token_metrics
from rlft.train.rewards import build_rewards, check_finite_q_values
from rlft.train.run_summary import first_logged, last_logged, parameter_metrics
from rlft.train.sampling import ActionSetRollout, GrammarSampler, StepRollout
from rlft.train.signals import stall_watch
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


def reward_options(config: GRPOStageConfig, names: list[str]) -> dict[str, dict[str, Any]]:
    """Per-reward keyword arguments from the config (only for the rewards in use)."""
    options: dict[str, dict[str, Any]] = {}
    if "q-advantage" in names:
        options["q-advantage"] = {"bonus": config.q_bonus}
    if "critic" in names:
        options["critic"] = {"critic": config.critic}
    if "env" in names:
        env: dict[str, Any] = {"horizon": config.env_horizon, "policy": config.env_policy,
                               "gamma": config.env_gamma, "samples": config.env_samples, "seed": config.seed}
        if config.env_bounds is not None:
            if len(config.env_bounds) != 2:
                raise InvalidInputError(f"--env-bounds needs two numbers low,high, got {config.env_bounds}")
            env["bounds"] = tuple(config.env_bounds)
        options["env"] = env
    return options


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
    check_advantage(config.advantage, config.target_temperature, group, int(os.environ.get("WORLD_SIZE", "1")))
    warn_forced_kl(config, group)
    check_inputs = inputs  # the criterion checks decisions on the dataset's rows
    rewards, inputs = make_rewards(config, names, inputs, episodic)
    check_generation_batch(config)

    criterion = criterion_callback(config, check_inputs)
    seed_everything(config.seed)
    model, tokenizer = load_model_for_training(inputs, config.allow_tokenizer_mismatch)
    config = model_defaults(config, model, GRPO_LEARNING_RATES)
    rollout = make_rollout(config, inputs, model, tokenizer, episodic, constrained, group)
    # built before start_run (the run folder is --out): TRL refuses bad settings before anything is written
    args, grpo_args = grpo_training_args(config, Path(config.out), model, episodic)
    run_dir, checkpoint, info = start_run(config, "grpo", inputs,
                                          run_record(config, rewards, episodic, constrained, group))

    with run_outcome(run_dir, info):
        watch = stall_watch(config.stall_steps, names, group, constrained)
        if args[checkpointing_field()] and config.lora:
            model.enable_input_require_grads()  # LoRA + checkpointing: inputs must carry grad or adapters never learn
        trainer = grpo_trainer_class(episodic, config, rollout)(
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
        metrics = grpo_metrics(trainer, result, inputs, tokenizer, rollout, episodic)
        metrics.update(logged_first_last(trainer.state.log_history, logged_keys(rewards)))
        for callback in watch:
            metrics.update(callback.summary())
        return finish_run(trainer, run_dir, info, metrics, f"GRPO run -> {run_dir}", criterion)


def make_rewards(config: GRPOStageConfig, names: list[str], inputs: StageInputs, episodic: bool):
    """(reward functions, inputs to train on): episodic runs train on the env's start states instead of the rows."""
    if not episodic:
        rewards = build_rewards(names, inputs.codec, inputs.train.column_names, reward_options(config, names))
        for reward in rewards:
            reward.preflight(inputs.train)
        return rewards, inputs
    from dataclasses import replace

    check_episode_env(inputs.codec)
    if config.credit == "answers":
        if names != ["return"]:
            raise InvalidInputError(f"--credit answers scores each answer by the return it leads to (the critic's "
                                    f"Q): --reward return, not {','.join(names)}",
                                    hint="every answer of its groups is valid, so a format reward carries nothing")
        rewards = [CriticReward(inputs.codec, bonus=config.q_bonus)]
    else:
        rewards = episode_rewards(names, inputs.codec, config.max_turns)
    starts = episode_starts(inputs.codec, config.episode_starts, config.seed)
    return rewards, replace(inputs, train=starts, conversational=isinstance(starts[0]["prompt"], list))


def make_rollout(config: GRPOStageConfig, inputs: StageInputs, model, tokenizer, episodic: bool, constrained: bool,
                 group: str = "sampled"):
    """The ``rollout_func`` TRL samples with: whole episodes, every valid answer per group, one constrained answer per
    row, or None (TRL's own sampling)."""
    if episodic:
        check_start_format(config, inputs, conversation=group != "actions")
        rollout = EpisodeRollout(inputs.codec, tokenizer, config.max_turns, config.temperature, config.top_p,
                                 constrained, credit=config.credit, credit_gamma=config.credit_gamma,
                                 step_weight=config.step_weight,
                                 credit_window=config.credit_window,
                                 episode_weight=config.episode_weight, credit_key=config.credit_key,
                                 # sets the codec's template.turns (saved) unless --credit answers (states)
                                 conversation=group != "actions")
        check_context(rollout, tokenizer, model)
        if group == "actions":  # --credit answers
            return EpisodeAnswerRollout(rollout, ActionChoices(inputs.codec, tokenizer, model), config.num_generations,
                                        config.seed)
        return rollout
    if group == "actions":
        return ActionSetRollout(ActionChoices(inputs.codec, tokenizer, model), config.num_generations)
    if constrained:
        return StepRollout(GrammarSampler(inputs.codec, tokenizer, config.temperature, config.top_p))
    return None


def run_record(config: GRPOStageConfig, rewards: list, episodic: bool, constrained: bool,
               group: str = "sampled") -> dict[str, Any]:
    """What ``rlft_run.json`` records of the GRPO setup: the rewards and their ranges, weights and rollout."""
    return {"rewards": [{"name": r.name, "low": r.low, "high": r.high} for r in rewards],
            "reward_weights": config.reward_weights, "rollout": config.rollout, "group": group,
            "constrained_sampling": constrained and group == "sampled",
            **({"advantage": config.advantage, "target_temperature": config.target_temperature}
               if group == "actions" else {}),
            **({"max_turns": config.max_turns, "episode_starts": config.episode_starts, "credit": config.credit,
                **({"credit_gamma": config.credit_gamma} if config.credit != "episode" else {}),
                **({"step_weight": config.step_weight, "episode_weight": config.episode_weight}
                   if config.credit not in ("episode", "answers") else {}),
                **({"credit_window": config.credit_window} if config.credit == "action" else {})}
               if episodic else {})}


def grpo_training_args(config: GRPOStageConfig, run_dir, model, episodic: bool):
    """(the shared TrainingArguments fields, TRL's ``GRPOConfig``), the user's TRL settings applied last."""
    from trl import GRPOConfig

    n_params = sum(p.numel() for p in model.parameters())
    args = training_args(config, run_dir, n_params)
    try:
        grpo_args = GRPOConfig(**trl_overrides(config, dict(
            **args,  # with the GRPO settings marked for TRL (trl_settings)
            # an episode's last answer need not end in EOS (the episode can end on any turn)
            mask_truncated_completions=config.mask_truncated_completions and not episodic,
            remove_unused_columns=False,  # the rewards read the dataset's other columns
        )))
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"invalid GRPO settings: {exc}") from exc
    return args, grpo_args


def grpo_trainer_class(episodic: bool, config: GRPOStageConfig | None = None, rollout=None):
    """TRL's ``GRPOTrainer``; its episodic subclass that hands the rollout the batch's rows; for ``--group
    actions`` the subclass that writes each answer's advantage on its decisive tokens (``--advantage target``: moving
    each state's answers toward the target policy)."""
    if isinstance(rollout, EpisodeAnswerRollout):
        return episode_answers_trainer_class(rollout, config.advantage, config.target_temperature)
    if episodic:
        return episode_trainer_class()
    from trl import GRPOTrainer

    if isinstance(rollout, ActionSetRollout):
        return action_set_trainer_class(GRPOTrainer, rollout.choices, config.advantage, config.target_temperature)
    return GRPOTrainer


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


def grpo_metrics(trainer, result, inputs: StageInputs, tokenizer, rollout, episodic: bool) -> dict[str, Any]:
    """Rows, steps, speed, parameter counts and prompt lengths, plus the sampling or episode figures."""
    metrics: dict[str, Any] = {
        "train_rows": len(inputs.train),
        "global_step": trainer.state.global_step,
        "train_runtime_s": result.metrics.get("train_runtime"),
        "train_steps_per_second": result.metrics.get("train_steps_per_second"),
        **parameter_metrics(trainer.model),
        **prompt_token_metrics(inputs.train, tokenizer, inputs.conversational),
    }
    if rollout is not None and not episodic:
        metrics["sampling_seconds"] = rollout.seconds  # constrained sampling or answer enumeration, all steps
    if episodic:
        runtime = metrics["train_runtime_s"] or 0.0
        metrics.update({
            "episodes_played": rollout.episodes,
            "episodes_per_second": rollout.episodes / runtime if runtime else None,
            "rollout_share": rollout.seconds / runtime if runtime else None,  # generation+env vs optimisation
            "episode_retokenized_turns": rollout.retokenized,  # answers re-tokenized canonically
        })
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
