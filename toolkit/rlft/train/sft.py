"""``rlft train sft``: TRL SFTTrainer on an rlft dataset's prompt/completion columns (string or chat).

The loss is on the completion only (TRL's default for prompt/completion data); EOS (the end-of-turn token)
ends each completion, so the model learns to stop. LoRA by default for pretrained models, full
fine-tuning for small from-scratch ones (``lora`` decides).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rich.markup import escape

from rlft.core.console import console
from rlft.core.errors import InvalidInputError
from rlft.models.offline import load_checked_critic
from rlft.train.awr import WEIGHT_COLUMN, advantage_weights, weighted_sampling_trainer
from rlft.train.bin_targets import BinTargets, bin_smoothing_trainer
from rlft.train.config_values import refuse_unneeded
from rlft.train.configs import trl_overrides
from rlft.train.inputs import StageInputs, load_inputs, pick_eval_split, prompt_token_metrics
from rlft.train.lifecycle import TRLStage
from rlft.train.run_summary import first_logged, last_logged, parameter_metrics
from rlft.train.sft_config import SFTStageConfig
from rlft.train.stage import criterion_callback, stage_callbacks, training_args

SFT_COLUMNS = ("prompt", "completion")


class SFTStage(TRLStage):
    """``rlft train sft``: the lifecycle of :mod:`rlft.train.lifecycle` with TRL's ``SFTTrainer``; with
    ``--critic``, each row weighted by its advantage (AWR)."""

    name, title = "sft", "SFT"

    def check(self) -> None:
        self.inputs = load_inputs(self.config, "sft", SFT_COLUMNS)
        check_sft_settings(self.config)

    def load_data(self) -> None:
        config = self.config
        critic = load_checked_critic(config.critic, self.inputs.codec) if config.critic else None
        self.train_rows, self.evaluation, self.eval_name = sft_splits(config, self.inputs)
        self.awr = _weigh_rows(config, critic, self.train_rows) if critic is not None else {}
        if critic is not None:
            weights = self.awr.pop("weights").tolist()
            self.train_rows = self.train_rows.add_column(WEIGHT_COLUMN, weights).select_columns(
                [*SFT_COLUMNS, WEIGHT_COLUMN])
        self.criterion = criterion_callback(config, self.inputs)

    def training_args(self, run_dir: Path):
        return sft_training_args(self.config, run_dir, self.model, self.evaluation is not None)

    def trainer_class(self):
        return sft_trainer_class(self.config, self.inputs, self.tokenizer)

    def trainer_inputs(self) -> dict[str, Any]:
        return {"train_dataset": self.train_rows, "eval_dataset": self.evaluation}

    def callbacks_for(self, run_dir: Path) -> list:
        return sft_callbacks(self.config, self.criterion, run_dir, self.extra_callbacks)

    def record(self) -> dict[str, Any]:
        return {"eval_split": self.eval_name}

    def train(self, trainer, run_dir: Path, checkpoint) -> dict[str, Any]:
        config, inputs, evaluation = self.config, self.inputs, self.evaluation
        metrics: dict[str, Any] = {**self.awr, "train_rows": len(self.train_rows), "eval_split": self.eval_name,
                                   "eval_rows": len(evaluation) if evaluation is not None else 0,
                                   "train_rows_dropped": dropped_rows(len(self.train_rows), trainer, config)}
        if evaluation is not None and config.eval_at_start and checkpoint is None:
            metrics["eval_loss_start"] = trainer.evaluate()["eval_loss"]
        console.print(f"[bold]SFT[/] {escape(str(inputs.base_model))} on {escape(str(inputs.dataset))} -> "
                      f"{escape(str(run_dir))}"
                      f" ({'LoRA r=' + str(config.lora_r) if config.lora else 'full fine-tuning'})")
        result = trainer.train(resume_from_checkpoint=checkpoint)
        metrics.update(train_metrics(trainer, result, inputs, self.tokenizer))
        if evaluation is not None:
            metrics.update(final_eval_metrics(trainer, config))
        return metrics


def run_sft(config: SFTStageConfig, callbacks: list | None = None) -> dict[str, Any]:
    """Train, evaluate and save one SFT run; returns the run info (``rlft_run.json``).

    ``callbacks`` are extra ``transformers.TrainerCallback`` objects (e.g. to inspect weights during training).
    """
    return SFTStage(config, callbacks).run()


def sft_trainer_class(config: SFTStageConfig, inputs: StageInputs, tokenizer):
    """TRL's ``SFTTrainer``, or with ``bin_smoothing`` its subclass training bins against soft targets
    (:mod:`rlft.train.bin_targets`)."""
    from trl import SFTTrainer

    trainer = SFTTrainer
    if config.bin_smoothing:
        trainer = bin_smoothing_trainer(trainer, BinTargets(inputs.codec, tokenizer, config.bin_smoothing))
    return weighted_sampling_trainer(trainer, config.seed) if config.critic else trainer


def _weigh_rows(config: SFTStageConfig, critic, train) -> dict[str, Any]:
    """The AWR weight of every training row (``--critic``) and a summary of them, printed and logged."""
    import numpy as np

    if "observation" not in train.column_names or "action" not in train.column_names:
        raise InvalidInputError("--critic weighs rows by their observation and action columns; this dataset has "
                                "none", hint="serialize the dataset from Minari episodes (rlft data serialize)")
    rows = train.select_columns(["observation", "action"]).with_format("numpy")
    found = advantage_weights(critic, np.asarray(rows["observation"], np.float32),
                              np.asarray(rows["action"], np.float32), config.awr_temperature, config.awr_max_weight)
    summary = found.summary(config.awr_temperature, config.awr_max_weight)
    console.print(f"[bold]AWR[/] rows weighted by exp({config.awr_temperature} A) from {config.critic}: "
                  f"advantage {summary['awr_advantage_mean']:+.3f} +- {summary['awr_advantage_std']:.3f}, "
                  f"{summary['awr_capped_fraction']:.1%} capped, effective rows "
                  f"{summary['awr_effective_rows_fraction']:.1%}")
    return {"weights": found.weights, **summary}


def dropped_rows(rows: int, trainer, config: SFTStageConfig) -> int | None:
    """Rows TRL left out of training, said out loud: it truncates each row to ``max_length`` tokens and drops the
    rows whose answer the cut removed entirely (long multi-turn prompts), which would otherwise go unnoticed.
    None with packing, where rows are merged and the counts no longer compare."""
    if getattr(trainer.args, "packing", False):
        return None
    dropped = rows - len(trainer.train_dataset)
    if dropped == rows:
        raise InvalidInputError(f"every training row is longer than --max-length {config.max_length} tokens up to "
                                "its answer, so TRL dropped them all",
                                hint="raise --max-length (up to the model's positions), or serialize with fewer "
                                     "--turns / --history")
    if dropped:
        console.print(f"[yellow]warning: {dropped:,} of {rows:,} training rows ({dropped / rows:.0%}) are longer "
                      f"than --max-length {config.max_length} tokens up to their answer; TRL dropped them[/] "
                      "(raise --max-length, up to the model's positions, to train on them)")
    return dropped


def check_sft_settings(config: SFTStageConfig) -> None:
    """Refuse SFT-only settings that cannot work (the shared ones are checked by ``load_inputs``)."""
    refuse_unneeded(config, {"critic": (config.critic is not None, "with --critic (advantage-weighted SFT)"),
                             "eval": (config.eval_split != "none", "with an evaluated split (not --eval-split none)")})
    if config.max_length < 8:
        raise InvalidInputError(f"--max-length must be at least 8, got {config.max_length}")
    if config.early_stopping_patience is not None and config.early_stopping_patience < 1:
        raise InvalidInputError("--early-stopping-patience must be at least 1")
    if config.eval_steps < 1:
        raise InvalidInputError("--eval-steps must be at least 1")
    if config.awr_temperature < 0 or config.awr_max_weight < 1:
        raise InvalidInputError(f"--awr-temperature must be >= 0 and --awr-max-weight >= 1, got "
                                f"{config.awr_temperature}, {config.awr_max_weight}")
    if not 0.0 <= config.bin_smoothing <= 16.0:
        raise InvalidInputError(f"--bin-smoothing must be in [0, 16] bins (0: off), got {config.bin_smoothing}")


def sft_splits(config: SFTStageConfig, inputs: StageInputs):
    """(train, evaluation or None, evaluation split name), cut to the prompt/completion columns."""

    splits = inputs.data.splits()
    train, evaluation, eval_name = pick_eval_split(
        splits, inputs.train, config.eval_split, config.val_fraction, config.seed, config.max_eval_samples
    )
    if config.early_stopping_patience and evaluation is None:
        raise InvalidInputError("--early-stopping-patience needs an evaluation split",
                                hint="the dataset has no validation/test split: pass --val-fraction 0.1")
    train = train.select_columns([c for c in (*SFT_COLUMNS, "observation", "action") if c in train.column_names]
                                 if config.critic else list(SFT_COLUMNS))
    evaluation = evaluation.select_columns(list(SFT_COLUMNS)) if evaluation is not None else None
    return train, evaluation, eval_name


def sft_training_args(config: SFTStageConfig, run_dir, model, evaluating: bool):
    """(the shared TrainingArguments fields, TRL's ``SFTConfig``): evaluation and early stopping added, the
    user's TRL settings applied last."""
    from trl import SFTConfig

    n_params = sum(p.numel() for p in model.parameters())
    args = training_args(config, run_dir, n_params)
    if evaluating:
        args.update(eval_strategy="steps", eval_steps=config.eval_steps,
                    per_device_eval_batch_size=config.per_device_eval_batch_size)
    if config.early_stopping_patience:
        # early stopping restores the best checkpoint, so one is saved at every evaluation
        args.update(load_best_model_at_end=True, metric_for_best_model="eval_loss", greater_is_better=False,
                    save_steps=config.eval_steps)
    try:
        sft_args = SFTConfig(**trl_overrides(config, dict(
            **args,  # with the TRL settings the stage names (trl_settings)
            packing=False,
            dataset_num_proc=None,
        )))
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"invalid SFT settings: {exc}") from exc
    return args, sft_args


def sft_callbacks(config: SFTStageConfig, criterion, run_dir, extra: list | None) -> list:
    """The stage's callbacks (criterion, TensorBoard, the caller's), then early stopping when it is on."""
    from transformers import EarlyStoppingCallback

    callbacks = stage_callbacks(criterion, run_dir, extra)
    if config.early_stopping_patience:
        callbacks.append(EarlyStoppingCallback(early_stopping_patience=config.early_stopping_patience))
    return callbacks


def train_metrics(trainer, result, inputs: StageInputs, tokenizer) -> dict[str, Any]:
    """Step count, losses, speed, parameter counts and prompt lengths of the finished training."""
    history = trainer.state.log_history
    return dict(
        global_step=trainer.state.global_step,
        train_loss=result.metrics.get("train_loss"),
        train_loss_first=first_logged(history, "loss"),
        train_loss_last=last_logged(history, "loss"),
        train_runtime_s=result.metrics.get("train_runtime"),
        train_steps_per_second=result.metrics.get("train_steps_per_second"),
        train_samples_per_second=result.metrics.get("train_samples_per_second"),
        **parameter_metrics(trainer.model),
        **prompt_token_metrics(inputs.train, tokenizer, inputs.conversational),
    )


def final_eval_metrics(trainer, config: SFTStageConfig) -> dict[str, Any]:
    """The evaluation loss and perplexity after training, and the best checkpoint when early stopping was on."""
    final = trainer.evaluate()
    # the perplexity is capped: a diverged loss would overflow exp
    metrics = {"eval_loss_end": final["eval_loss"], "eval_perplexity_end": math.exp(min(final["eval_loss"], 50.0))}
    if config.early_stopping_patience:
        metrics["best_eval_loss"] = trainer.state.best_metric
        metrics["best_checkpoint"] = trainer.state.best_model_checkpoint
    return metrics
