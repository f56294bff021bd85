"""``rlft train sft|grpo``: fine-tune a model on an rlft dataset into a RUN folder.

Settings come from the stage dataclass defaults, overridden by ``--config FILE`` (YAML), overridden by the
flags typed on the command line (every flag defaults to "not given"). The same commands run on several GPUs::

    accelerate launch --config_file pipelines/accelerate/zero3.yaml -m rlft.cli.main \\
        train grpo --dataset DIR --model MODEL --out RUN --reward format,q-advantage
"""

from __future__ import annotations

from pathlib import Path

import typer

from rlft.cli.common import command

app = typer.Typer(no_args_is_help=True)
# Flags the commands do not declare are the fields of TRL's own config class (--weight-decay 0.01, --optim
# adamw_torch, --report-to wandb ...), parsed by TRL's parser (rlft.train.configs.parse_trl_flags).
_TRL_FLAGS = {"allow_extra_args": True, "ignore_unknown_options": True}

_CONFIG = typer.Option(None, "--config", help="YAML config (pipelines/sft.yaml, pipelines/grpo.yaml); flags win.")
# Options both stages share (one declaration each, so their flags and help never drift apart).
_LORA = typer.Option(None, "--lora/--no-lora", help="LoRA adapter (default) or full fine-tuning.")
_LORA_R = typer.Option(None, help="LoRA rank [16].")
_LORA_ALPHA = typer.Option(None, help="LoRA alpha [32].")
_LORA_TARGET_MODULES = typer.Option(None, help="'all-linear' or names like q_proj,v_proj.")
_NUM_TRAIN_EPOCHS = typer.Option(None, help="Epochs [1].")
_MAX_STEPS = typer.Option(None, help="Optimizer steps (overrides epochs) [-1].")
_GRADIENT_ACCUMULATION_STEPS = typer.Option(None, help="Gradient accumulation [1].")
_TRAIN_SPLIT = typer.Option(None, help="Training split [train].")
_MAX_TRAIN_SAMPLES = typer.Option(None, help="Use only the first N training rows.")
_LOGGING_STEPS = typer.Option(None, help="Log every N steps [10].")
_SAVE_STEPS = typer.Option(None, help="Checkpoint every N steps [500].")
_BF16 = typer.Option(None, "--bf16/--no-bf16", help="[auto: on a GPU with bf16]")
_SEED = typer.Option(None, min=0, help="Seed [0].")
_OVERWRITE = typer.Option(None, "--overwrite/--no-overwrite", help="Replace an existing RUN folder.")
_GRADIENT_CHECKPOINTING = typer.Option(
    None, "--gradient-checkpointing/--no-gradient-checkpointing", help="[auto: on above 50M parameters]"
)
_RESUME = typer.Option(None, "--resume/--no-resume", help="Continue the run in --out from its last checkpoint.")
_CHECK_STEPS = typer.Option(None, help="Every N steps decode every decision state greedily (as rlft eval) and log "
                                       "decision_accuracy [0: off].")
_STOP_AT_ACCURACY = typer.Option(None, help="Stop once decision_accuracy reaches this (1.0: all optimal, ties "
                                            "count); --max-steps stays the cap.")
_STOP_AT_ACTION_ERROR = typer.Option(None, help="Continuous actions: stop once the held-out action error (mean "
                                                 "absolute error as a fraction of each dimension's range) is at "
                                                 "most this; --max-steps stays the cap.")
_CHECK_STATES = typer.Option(None, help="Decision states checked (a seeded sample beyond) [256].")
_CHECK_CONSTRAINED = typer.Option(None, "--check-constrained/--no-check-constrained",
                                  help="Check with constrained decoding [on].")
_CHECK_TOLERANCE = typer.Option(None, help="Continuous actions: right within this fraction of the range [0.05].")


@command(app, "sft", context_settings=_TRL_FLAGS)
def sft(
    ctx: typer.Context,
    dataset: str | None = typer.Option(None, "--dataset", help="rlft dataset folder or Hub dataset id."),
    model: str | None = typer.Option(None, "--model", help="Model folder, RUN folder or Hub id."),
    out: Path | None = typer.Option(None, "--out", help="RUN folder to write."),
    config: Path | None = _CONFIG,
    lora: bool | None = _LORA,
    lora_r: int | None = _LORA_R,
    lora_alpha: int | None = _LORA_ALPHA,
    lora_dropout: float | None = typer.Option(None, help="LoRA dropout [0]."),
    lora_target_modules: str | None = _LORA_TARGET_MODULES,
    learning_rate: float | None = typer.Option(None, help="Peak learning rate [2e-4]."),
    num_train_epochs: float | None = _NUM_TRAIN_EPOCHS,
    max_steps: int | None = _MAX_STEPS,
    batch_size: int | None = typer.Option(None, "--batch-size", help="Batch size per device [8]."),
    gradient_accumulation_steps: int | None = _GRADIENT_ACCUMULATION_STEPS,
    max_length: int | None = typer.Option(None, help="Longest prompt + completion in tokens [1024]."),
    train_split: str | None = _TRAIN_SPLIT,
    max_train_samples: int | None = _MAX_TRAIN_SAMPLES,
    eval_split: str | None = typer.Option(None, help="Validation split: NAME, auto or none [auto]."),
    val_fraction: float | None = typer.Option(None, help="Hold out this fraction of train when there is no "
                                                         "validation split [0]."),
    max_eval_samples: int | None = typer.Option(None, help="Evaluate on at most N rows [512]."),
    eval_steps: int | None = typer.Option(None, help="Evaluate every N steps [50]."),
    early_stopping_patience: int | None = typer.Option(None, help="Stop after N evaluations without improvement."),
    bin_smoothing: float | None = typer.Option(None, help="binned codecs: train each action bin against a Gaussian "
                                                          "over its neighbours of this width in bins (HL-Gauss, "
                                                          "about 0.75) [0: one-hot]."),
    check_steps: int | None = _CHECK_STEPS,
    stop_at_accuracy: float | None = _STOP_AT_ACCURACY,
    stop_at_action_error: float | None = _STOP_AT_ACTION_ERROR,
    check_states: int | None = _CHECK_STATES,
    check_constrained: bool | None = _CHECK_CONSTRAINED,
    check_tolerance: float | None = _CHECK_TOLERANCE,
    logging_steps: int | None = _LOGGING_STEPS,
    save_steps: int | None = _SAVE_STEPS,
    gradient_checkpointing: bool | None = _GRADIENT_CHECKPOINTING,
    bf16: bool | None = _BF16,
    seed: int | None = _SEED,
    overwrite: bool | None = _OVERWRITE,
    resume: bool | None = _RESUME,
) -> None:
    """Supervised fine-tuning (TRL SFTTrainer) on the prompt/completion columns, loss on the completion.

    Any other field of trl.SFTConfig is a flag too (TRL's name: --weight-decay 0.01, --optim adamw_torch)."""
    from rlft.train.configs import build_config
    from rlft.train.sft import run_sft
    from rlft.train.sft_config import SFTStageConfig

    cli = dict(
        dataset=dataset, model=model, out=out, lora=lora, lora_r=lora_r, lora_alpha=lora_alpha,
        lora_dropout=lora_dropout, lora_target_modules=lora_target_modules, learning_rate=learning_rate,
        num_train_epochs=num_train_epochs, max_steps=max_steps, per_device_train_batch_size=batch_size,
        gradient_accumulation_steps=gradient_accumulation_steps, max_length=max_length, train_split=train_split,
        max_train_samples=max_train_samples, eval_split=eval_split, val_fraction=val_fraction,
        max_eval_samples=max_eval_samples, eval_steps=eval_steps, early_stopping_patience=early_stopping_patience,
        bin_smoothing=bin_smoothing,
        check_steps=check_steps, stop_at_accuracy=stop_at_accuracy, stop_at_action_error=stop_at_action_error,
        check_states=check_states,
        check_constrained=check_constrained, check_tolerance=check_tolerance,
        logging_steps=logging_steps, save_steps=save_steps, gradient_checkpointing=gradient_checkpointing,
        bf16=bf16, seed=seed, overwrite=overwrite, resume=resume,
    )
    stage_config, _ = build_config(SFTStageConfig, "sft", config, cli, ctx.args)
    run_sft(stage_config)


@command(app, "grpo", context_settings=_TRL_FLAGS)
def grpo(
    ctx: typer.Context,
    dataset: str | None = typer.Option(None, "--dataset", help="rlft dataset folder or Hub dataset id."),
    model: str | None = typer.Option(None, "--model", help="Model folder, RUN folder (e.g. an SFT run) or Hub id."),
    out: Path | None = typer.Option(None, "--out", help="RUN folder to write."),
    reward: str | None = typer.Option(None, "--reward", help="Rewards: format, bc, q-advantage, env (comma list); "
                                                            "with --rollout episode: return, format [auto]."),
    reward_weights: str | None = typer.Option(None, "--reward-weights", help="One weight per reward, e.g. 1,0.5."),
    config: Path | None = _CONFIG,
    lora: bool | None = _LORA,
    lora_r: int | None = _LORA_R,
    lora_alpha: int | None = _LORA_ALPHA,
    lora_target_modules: str | None = _LORA_TARGET_MODULES,
    learning_rate: float | None = typer.Option(None, help="Peak learning rate [3e-4 under 20M parameters, else "
                                                          "1e-5]."),
    group: str | None = typer.Option(None, help="sampled, actions (every valid answer in each group) or auto "
                                                "[auto: actions for step rollouts over discrete actions]."),
    stall_steps: int | None = typer.Option(None, help="Warn after N steps with no reward signal (0: never) [20]."),
    num_train_epochs: float | None = _NUM_TRAIN_EPOCHS,
    max_steps: int | None = _MAX_STEPS,
    batch_size: int | None = typer.Option(None, "--batch-size", help="Completions per device batch [8]."),
    gradient_accumulation_steps: int | None = _GRADIENT_ACCUMULATION_STEPS,
    num_generations: int | None = typer.Option(None, help="Completions per prompt [4]."),
    max_completion_length: int | None = typer.Option(None, help="Longest completion in tokens [32]."),
    temperature: float | None = typer.Option(None, help="Sampling temperature [1.0]."),
    beta: float | None = typer.Option(None, help="KL coefficient [0.0]."),
    scale_rewards: str | None = typer.Option(None, help="group, batch or none [group]."),
    loss_type: str | None = typer.Option(None, help="TRL loss type [dapo]."),
    train_split: str | None = _TRAIN_SPLIT,
    max_train_samples: int | None = _MAX_TRAIN_SAMPLES,
    q_bonus: float | None = typer.Option(None, help="q-advantage: bonus of an optimal action [0.1]."),
    env_horizon: int | None = typer.Option(None, help="env reward: steps rolled out [1]."),
    env_policy: str | None = typer.Option(None, help="env reward lookahead: repeat, random or an SB3 .zip [repeat]."),
    env_gamma: float | None = typer.Option(None, help="env reward discount [1.0]."),
    env_samples: int | None = typer.Option(None, help="env reward: rollouts averaged [1]."),
    env_bounds: str | None = typer.Option(None, help="env reward per-step bounds low,high [per env]."),
    rollout: str | None = typer.Option(None, help="step (one answer per recorded state) or episode (whole "
                                                  "episodes in the environment, reward return[,format]) [step]."),
    max_turns: int | None = typer.Option(None, help="episode rollout: actions per episode at most [16]."),
    episode_starts: int | None = typer.Option(None, help="episode rollout: distinct reset seeds [64]."),
    credit: str | None = typer.Option(None, help="episode rollout: episode, or state (GiGPO: plus each turn's "
                                                 "advantage among turns that answered the same state) [episode]."),
    credit_gamma: float | None = typer.Option(None, help="--credit state: return-to-go discount [0.95]."),
    step_weight: float | None = typer.Option(None, help="--credit state: weight of the step advantage [1.0]."),
    constrained: bool | None = typer.Option(None, "--constrained/--no-constrained",
                                            help="Sample answers within the codec's grammar [on for episode "
                                                 "rollouts, off for step rollouts]."),
    use_vllm: bool | None = typer.Option(None, "--use-vllm/--no-vllm", help="Generate with vLLM (GPU)."),
    vllm_mode: str | None = typer.Option(None, help="colocate or server [colocate]."),
    log_completions: bool | None = typer.Option(None, "--log-completions/--no-log-completions",
                                                help="Print sampled completions."),
    check_steps: int | None = _CHECK_STEPS,
    stop_at_accuracy: float | None = _STOP_AT_ACCURACY,
    stop_at_action_error: float | None = _STOP_AT_ACTION_ERROR,
    check_states: int | None = _CHECK_STATES,
    check_constrained: bool | None = _CHECK_CONSTRAINED,
    check_tolerance: float | None = _CHECK_TOLERANCE,
    logging_steps: int | None = _LOGGING_STEPS,
    save_steps: int | None = _SAVE_STEPS,
    gradient_checkpointing: bool | None = _GRADIENT_CHECKPOINTING,
    bf16: bool | None = _BF16,
    seed: int | None = _SEED,
    overwrite: bool | None = _OVERWRITE,
    resume: bool | None = _RESUME,
) -> None:
    """GRPO (TRL GRPOTrainer) with codec-driven control rewards; LoRA by default.

    Any other field of trl.GRPOConfig is a flag too (TRL's name: --max-grad-norm 0.5, --top-k 50)."""
    from rlft.train.configs import build_config
    from rlft.train.grpo import run_grpo
    from rlft.train.grpo_config import GRPOStageConfig

    cli = dict(
        dataset=dataset, model=model, out=out, rewards=reward, reward_weights=reward_weights, lora=lora,
        lora_r=lora_r, lora_alpha=lora_alpha, lora_target_modules=lora_target_modules,
        learning_rate=learning_rate, num_train_epochs=num_train_epochs, max_steps=max_steps,
        per_device_train_batch_size=batch_size, gradient_accumulation_steps=gradient_accumulation_steps,
        num_generations=num_generations, max_completion_length=max_completion_length, temperature=temperature,
        beta=beta, scale_rewards=scale_rewards, loss_type=loss_type, train_split=train_split,
        max_train_samples=max_train_samples, q_bonus=q_bonus, env_horizon=env_horizon, env_policy=env_policy,
        env_gamma=env_gamma, env_samples=env_samples, env_bounds=env_bounds, rollout=rollout, max_turns=max_turns,
        episode_starts=episode_starts, credit=credit, credit_gamma=credit_gamma, step_weight=step_weight,
        constrained=constrained, use_vllm=use_vllm,
        vllm_mode=vllm_mode, log_completions=log_completions, logging_steps=logging_steps, save_steps=save_steps,
        check_steps=check_steps, stop_at_accuracy=stop_at_accuracy, stop_at_action_error=stop_at_action_error,
        check_states=check_states,
        check_constrained=check_constrained, check_tolerance=check_tolerance,
        gradient_checkpointing=gradient_checkpointing, bf16=bf16, seed=seed, overwrite=overwrite,
        resume=resume, group=group, stall_steps=stall_steps,
    )
    stage_config, _ = build_config(GRPOStageConfig, "grpo", config, cli, ctx.args)
    run_grpo(stage_config)


def check_trl_flags(command: str, args: list[str]) -> None:
    """What ``rlft pipeline run`` checks before any step runs: the flags of ``train sft|grpo`` that rlft does not
    declare are fields of TRL's config class (InvalidInputError naming the first that is not)."""
    from rlft.core.errors import InvalidInputError
    from rlft.train.configs import parse_trl_flags
    from rlft.train.grpo_config import GRPOStageConfig
    from rlft.train.sft_config import SFTStageConfig

    stages = {"sft": SFTStageConfig, "grpo": GRPOStageConfig}
    if command not in stages:
        raise InvalidInputError(f"unknown option {args[0]}")
    parse_trl_flags(stages[command], args)


# Commands defined in their own modules register themselves on ``app`` (imported last: they import ``app``).
from rlft.cli import train_bc, train_online  # noqa: E402,F401
