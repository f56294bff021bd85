"""``rlft train grpo``: TRL GRPOTrainer with LoRA and the codec-driven control rewards.

Each prompt gets ``num_generations`` sampled completions; the rewards (``rlft.train.rewards``) decode them
with the dataset's codec and score them against the row's columns. TRL logs ``rewards/<name>/mean`` and the
rates the rewards report (``parse_rate``, ``optimal_action_rate``) to the console and TensorBoard.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from rlft.core.console import console
from rlft.core.errors import InvalidInputError, MissingDependencyError
from rlft.core.seeding import limit_threads, seed_everything
from rlft.train.configs import trl_overrides
from rlft.train.grpo_config import GRPOStageConfig
from rlft.train.rewards import build_rewards, parse_reward_names
from rlft.train.stage import (
    checkpointing_field,
    criterion_callback,
    finish_run,
    first_logged,
    last_logged,
    load_inputs,
    load_model_for_training,
    lora_config,
    parameter_metrics,
    prompt_token_metrics,
    stage_callbacks,
    start_run,
    training_args,
)

GRPO_COLUMNS = ("prompt",)
EPISODE_METRICS = ("episode/return", "episode/success_rate", "episode/invalid_rate", "episode/turns",
                   "episode/truncated_rate", "episode/rollout_seconds", "episode/episodes_per_second")
SCALE_REWARDS = ("group", "batch", "none")


def reward_options(config: GRPOStageConfig, names: list[str]) -> dict[str, dict[str, Any]]:
    """Per-reward keyword arguments from the config (only for the rewards in use)."""
    options: dict[str, dict[str, Any]] = {}
    if "q-advantage" in names:
        options["q-advantage"] = {"bonus": config.q_bonus}
    if "env" in names:
        env: dict[str, Any] = {"horizon": config.env_horizon, "policy": config.env_policy,
                               "gamma": config.env_gamma, "samples": config.env_samples, "seed": config.seed}
        if config.env_bounds is not None:
            if len(config.env_bounds) != 2:
                raise InvalidInputError(f"--env-bounds needs two numbers low,high, got {config.env_bounds}")
            env["bounds"] = tuple(config.env_bounds)
        options["env"] = env
    return options


def check_vllm(config: GRPOStageConfig) -> None:
    if not config.use_vllm:
        return
    if importlib.util.find_spec("vllm") is None:
        raise MissingDependencyError("--use-vllm needs the vllm package, which is not installed",
                                     hint='install it on a GPU machine with: pip install "rlft[vllm]"')
    if config.vllm_mode not in ("colocate", "server"):
        raise InvalidInputError(f"--vllm-mode must be colocate or server, got {config.vllm_mode!r}")


def run_grpo(config: GRPOStageConfig, callbacks: list | None = None) -> dict[str, Any]:
    """Train and save one GRPO run; returns the run info (``rlft_run.json``).

    ``callbacks`` are extra ``transformers.TrainerCallback`` objects (e.g. to inspect weights during training).
    """
    from rlft.train.episodes import ROLLOUTS

    limit_threads()
    if config.rollout not in ROLLOUTS:
        raise InvalidInputError(f"--rollout must be one of {', '.join(ROLLOUTS)}, got {config.rollout!r}")
    episodic = config.rollout == "episode"
    if episodic:
        from rlft.train.episodes import parse_episode_reward_names

        names = parse_episode_reward_names(config.rewards)
    else:
        names = parse_reward_names(config.rewards)
    if config.reward_weights is not None and len(config.reward_weights) != len(names):
        raise InvalidInputError(
            f"--reward-weights has {len(config.reward_weights)} values for {len(names)} rewards ({','.join(names)})"
        )
    if config.num_generations < 2:
        raise InvalidInputError(f"--num-generations must be at least 2, got {config.num_generations}")
    if config.max_completion_length < 1:
        raise InvalidInputError("--max-completion-length must be at least 1")
    if config.scale_rewards not in SCALE_REWARDS:
        raise InvalidInputError(f"--scale-rewards must be one of {SCALE_REWARDS}, got {config.scale_rewards!r}")
    if config.temperature <= 0:
        raise InvalidInputError(f"--temperature must be positive, got {config.temperature}")
    constrained = episodic if config.constrained is None else bool(config.constrained)
    if constrained and config.use_vllm:
        raise InvalidInputError("--constrained sampling runs on the transformers backend, not with --use-vllm",
                                hint="drop --use-vllm, or sample unconstrained (--no-constrained)")
    check_vllm(config)
    inputs = load_inputs(config, "grpo", GRPO_COLUMNS)
    check_inputs = inputs  # the criterion checks decisions on the dataset's rows
    if episodic:
        from dataclasses import replace

        from rlft.train.episodes import check_episode_env, episode_rewards, episode_starts

        check_episode_env(inputs.codec)
        rewards = episode_rewards(names, inputs.codec, config.max_turns)
        starts = episode_starts(inputs.codec, config.episode_starts, config.seed)
        inputs = replace(inputs, train=starts, conversational=isinstance(starts[0]["prompt"], list))
    else:
        rewards = build_rewards(names, inputs.codec, inputs.train.column_names, reward_options(config, names))
    generation_batch = config.per_device_train_batch_size * config.gradient_accumulation_steps
    if generation_batch % config.num_generations:
        raise InvalidInputError(
            f"batch size x accumulation ({generation_batch}) must be a multiple of --num-generations "
            f"({config.num_generations})",
            hint="each prompt's completions are scored as one group",
        )

    criterion = criterion_callback(config, check_inputs)
    seed_everything(config.seed)
    model, tokenizer = load_model_for_training(inputs)
    rollout = None
    if episodic:
        from rlft.train.episodes import EpisodeRollout, check_context

        rollout = EpisodeRollout(inputs.codec, tokenizer, config.max_turns, config.temperature, config.top_p,
                                 constrained)  # sets the codec's template.turns, saved with the run
        check_context(rollout, tokenizer, model)
    elif constrained:
        from rlft.train.sampling import GrammarSampler, StepRollout

        rollout = StepRollout(GrammarSampler(inputs.codec, tokenizer, config.temperature, config.top_p))
    run_dir, checkpoint, info = start_run(
        config, "grpo", inputs,
        {"rewards": [{"name": r.name, "low": r.low, "high": r.high} for r in rewards],
         "reward_weights": config.reward_weights, "rollout": config.rollout, "constrained_sampling": constrained,
         **({"max_turns": config.max_turns, "episode_starts": config.episode_starts} if episodic else {})},
    )

    from trl import GRPOConfig, GRPOTrainer

    n_params = sum(p.numel() for p in model.parameters())
    args = training_args(config, run_dir, n_params)
    try:
        grpo_args = GRPOConfig(**trl_overrides(config, dict(
            **args,
            num_generations=config.num_generations,
            max_completion_length=config.max_completion_length,
            temperature=config.temperature,
            top_p=config.top_p,
            beta=config.beta,
            epsilon=config.epsilon,
            num_iterations=config.num_iterations,
            scale_rewards=config.scale_rewards,
            loss_type=config.loss_type,
            reward_weights=config.reward_weights,
            # an episode's last answer need not end in EOS (the episode can end on any turn)
            mask_truncated_completions=config.mask_truncated_completions and not episodic,
            log_completions=config.log_completions,
            use_vllm=config.use_vllm,
            vllm_mode=config.vllm_mode,
            vllm_gpu_memory_utilization=config.vllm_gpu_memory_utilization,
            remove_unused_columns=False,  # the rewards read the dataset's other columns
        )))
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"invalid GRPO settings: {exc}") from exc
    if args[checkpointing_field()] and config.lora:
        model.enable_input_require_grads()
    trainer_class = GRPOTrainer
    if episodic:
        from rlft.train.episodes import episode_trainer_class

        trainer_class = episode_trainer_class()
    trainer = trainer_class(
        model=model,
        reward_funcs=rewards,
        args=grpo_args,
        train_dataset=inputs.train,
        processing_class=tokenizer,
        peft_config=lora_config(config) if config.lora else None,
        callbacks=stage_callbacks(criterion, run_dir, callbacks),
        **({"rollout_func": rollout} if rollout is not None else {}),
    )
    console.print(f"[bold]GRPO[/] {inputs.base_model} on {inputs.dataset} -> {run_dir}; rewards "
                  + ", ".join(f"{r.name} [{r.low:g}, {r.high:g}]" for r in rewards))
    try:
        result = trainer.train(resume_from_checkpoint=checkpoint)
    finally:
        for reward in rewards:
            if hasattr(reward, "close"):
                reward.close()
        if hasattr(rollout, "close"):
            rollout.close()
    history = trainer.state.log_history
    metrics: dict[str, Any] = {
        "train_rows": len(inputs.train),
        "global_step": trainer.state.global_step,
        "train_runtime_s": result.metrics.get("train_runtime"),
        "train_steps_per_second": result.metrics.get("train_steps_per_second"),
        **parameter_metrics(trainer.model),
        **prompt_token_metrics(inputs.train, tokenizer, inputs.conversational),
    }
    if rollout is not None and not episodic:
        metrics["sampling_seconds"] = rollout.seconds  # constrained sampling, all steps
    if episodic:
        runtime = metrics["train_runtime_s"] or 0.0
        metrics.update({
            "episodes_played": rollout.episodes,
            "episodes_per_second": rollout.episodes / runtime if runtime else None,
            "rollout_share": rollout.seconds / runtime if runtime else None,  # generation+env vs optimisation
            "episode_retokenized_turns": rollout.retokenized,  # answers re-tokenized canonically
        })
    keys = ["reward", *[f"rewards/{r.name}/mean" for r in rewards], "parse_rate", "optimal_action_rate",
            "completions/mean_length", *EPISODE_METRICS]
    for key in keys:
        first, last = first_logged(history, key), last_logged(history, key)
        if last is not None:
            metrics[f"{key}_first"] = first
            metrics[f"{key}_last"] = last
    return finish_run(trainer, run_dir, info, metrics, f"GRPO run -> {run_dir}", criterion)
