"""What the SFT and GRPO stages share: inputs (dataset, codec, model), device settings, LoRA, the RUN folder's
bookkeeping, TensorBoard logging and the final summary."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import time
import warnings
from pathlib import Path
from typing import Any

from rlft import __version__
from rlft.core.claims import release_aside
from rlft.core.console import console, kv_table
from rlft.core.errors import FaultError, InvalidInputError
from rlft.core.faults import as_disk_full, is_output_fault, output_error
from rlft.core.io import atomic_write_text
from rlft.core.manifest import write_manifest
from rlft.core.secrets import redact
from rlft.core.trackers import finish_library_trackers
from rlft.datasets.layout import HELD_OUT_SPLITS
from rlft.models.run import (
    CHECKPOINTS_DIR,
    LOGS_DIR,
    RUN_FILENAME,
    SUMMARY_FILENAME,
    check_run_dir,
    make_run_dir,
    run_identity,
    write_run_info,
)
from rlft.train.closed_loop import ReturnCheck
from rlft.train.config_values import refuse_unneeded, unneeded
from rlft.train.configs import StageConfig, config_to_dict
from rlft.train.criterion import CriterionCallback, decision_check
from rlft.train.inputs import StageInputs
from rlft.train.run_summary import criterion_line
from rlft.train.trl_config import trl_settings

GRADIENT_CHECKPOINTING_MIN_PARAMS = 50_000_000  # below this, recomputing activations costs more than it saves


@functools.lru_cache(maxsize=1)
def checkpointing_field() -> str:
    """transformers 5 renamed ``gradient_checkpointing`` to ``activation_checkpointing`` (the old name warns)."""
    try:
        from transformers import TrainingArguments
    except ImportError:  # pragma: no cover
        return "gradient_checkpointing"
    names = {f.name for f in dataclasses.fields(TrainingArguments)}
    return "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"


def distributed_state():
    """accelerate's process state. ``cpu=True`` without CUDA: only then does accelerate see a multi-process CPU
    run (torchrun) as one (gloo); the state is a singleton, so the first call decides for the whole process."""
    import torch
    from accelerate import PartialState

    return PartialState(cpu=not torch.cuda.is_available())


def main_process() -> bool:
    return distributed_state().is_main_process


def wait_for_everyone() -> None:
    distributed_state().wait_for_everyone()


SMALL_MODEL_PARAMETERS = 20_000_000  # below: a from-scratch model (rlft model init); above: a pretrained one


def model_defaults(config: StageConfig, model, learning_rates: tuple[float, float] | None = None) -> StageConfig:
    """``config`` with the settings left to the model resolved: LoRA (off for a small from-scratch model, whose every
    weight must learn; on for a pretrained one) and, with ``learning_rates`` = (small, pretrained), the learning
    rate."""
    from dataclasses import replace

    small = sum(p.numel() for p in model.parameters()) < SMALL_MODEL_PARAMETERS
    if config.lora is None:
        config = replace(config, lora=not small)
    if learning_rates is not None and config.learning_rate is None:
        config = config.with_trl(learning_rate=learning_rates[0] if small else learning_rates[1])
    if config.lora:
        check_lora_targets(config.lora_target_modules, model)
    # known only now: --lora-r on a small model trained whole (hostile pass 16, B6)
    refuse_unneeded(config, {"lora": (bool(config.lora), "with LoRA (--lora; the default for a pretrained model of "
                                                      f"{SMALL_MODEL_PARAMETERS / 1e6:g}M parameters or more)")})
    return config


def check_lora_targets(targets: list[str], model) -> None:
    """Refuse LoRA target modules the model does not have, before anything is written (PEFT raises mid-setup)."""
    if targets in (["all-linear"], ["all_linear"]):
        return
    from torch import nn

    linear = sorted({name.rsplit(".", 1)[-1] for name, module in model.named_modules()
                     if isinstance(module, nn.Linear)})
    missing = [t for t in targets if t not in linear]
    if missing:
        raise InvalidInputError(f"--lora-target-modules {','.join(missing)}: the model has no such linear module",
                                hint=f"its linear modules: {', '.join(linear)} (or all-linear)")


def device_args(config: StageConfig, n_params: int) -> dict[str, Any]:
    """CPU: ``use_cpu=True, bf16=False``; GPU: bf16 when supported. Gradient checkpointing on for big models."""
    import torch

    cuda = torch.cuda.is_available()
    bf16 = config.bf16 if config.bf16 is not None else bool(cuda and torch.cuda.is_bf16_supported())
    checkpointing = (
        config.gradient_checkpointing if config.gradient_checkpointing is not None
        else n_params > GRADIENT_CHECKPOINTING_MIN_PARAMS
    )
    return {"use_cpu": not cuda, "bf16": bf16, "fp16": False, checkpointing_field(): checkpointing}


def training_args(config: StageConfig, run_dir: Path, n_params: int) -> dict[str, Any]:
    """TrainingArguments fields shared by both stages."""
    # TRL 1.16 still reads the deprecated transformers 5 names; the warnings say nothing the user can act on.
    warnings.filterwarnings("ignore", message=".*gradient_checkpointing.* is deprecated", category=FutureWarning)
    return {
        **trl_settings(config),  # the stage's own TRL-named settings, then those rlft resolves or fixes
        "output_dir": str(run_dir / CHECKPOINTS_DIR),
        "logging_first_step": True,
        "save_strategy": "steps",
        "seed": config.seed,
        "data_seed": config.seed,
        "report_to": "none",  # TensorBoard is added by tensorboard_callback, writing to RUN/logs
        "dataloader_num_workers": 0,
        **device_args(config, n_params),
    }


_CHECKS = "with the decision checks (--check-steps N, --stop-at-accuracy or --stop-at-action-error)"


def criterion_callback(config: StageConfig, inputs: StageInputs):
    """The decision-state check of ``config`` (:mod:`rlft.train.criterion`), or None when it is off. Built
    before anything is written, so bad settings fail first."""
    every = config.check_steps
    if every < 0:
        raise InvalidInputError(f"--check-steps must be at least 0, got {every}")
    if (config.stop_at_accuracy is not None or config.stop_at_action_error is not None) and every == 0:
        every = 10
    if every == 0:
        # a recipe passes --check-states beside a --check-steps its user may set to 0: said, not refused
        for flag, applies in unneeded(config, {"checks": (False, _CHECKS), "continuous": (False, _CHECKS)}):
            console.print(f"[yellow]Note:[/] {flag} is not used: it applies {applies}", highlight=False)
        if config.check_episodes or config.stop_at_return is not None or config.keep_best_check:
            raise InvalidInputError("--check-episodes, --stop-at-return and --keep-best-check play episodes every "
                                    "--check-steps N",
                                    hint="e.g. --check-steps 500 --check-episodes 5")
        return None
    if not 0.0 <= config.check_tolerance < 1.0:
        raise InvalidInputError(f"--check-tolerance must be in [0, 1), got {config.check_tolerance}")

    rows, split = check_rows(inputs)
    check = decision_check(rows, inputs.codec, config.check_states, config.seed, config.check_tolerance, split)
    refuse_unneeded(config, {"continuous": (not check.discrete, "to continuous actions (this dataset's are discrete)")})
    return CriterionCallback(check, every, config.stop_at_accuracy, config.check_constrained,
                             config.stop_at_action_error, return_check(config, inputs), config.keep_best_check)


def return_check(config: StageConfig, inputs: StageInputs):
    """The closed-loop check of ``config`` (:mod:`rlft.train.closed_loop`), or None without --check-episodes."""
    if not config.check_episodes:
        if config.stop_at_return is not None or config.check_max_episode_steps is not None or config.keep_best_check:
            raise InvalidInputError("--stop-at-return, --check-max-episode-steps and --keep-best-check need "
                                    "--check-episodes N")
        return None

    return ReturnCheck(inputs.codec, config.check_episodes, config.seed, config.check_max_episode_steps,
                       config.stop_at_return)



def check_rows(inputs: StageInputs) -> tuple[Any, str]:
    """(rows, split name) the decision check grades: the training rows for discrete actions (FrozenLake's states
    are the whole task); for continuous actions the held-out split (validation, else test) when the dataset has
    one with the same columns, so the logged action error is measured on states the model never trained on."""
    if inputs.codec.action_space["type"] == "discrete":
        return inputs.train, "train"

    splits = inputs.data.splits()
    for name in HELD_OUT_SPLITS:
        if name in splits and {"prompt", "action"} <= set(splits[name].column_names) and len(splits[name]):
            return splits[name], name
    return inputs.train, "train"


def criterion_first(trainer, criterion) -> None:
    """The criterion's ``on_log`` runs before every reporter's: transformers puts the trackers named by
    ``report_to`` (W&B, trackio, TensorBoard...) ahead of the callbacks a trainer is given, and a tracker that logs
    first never sees decision_accuracy, action_error or the policy signals the criterion adds."""
    if criterion is not None:
        callbacks = trainer.callback_handler.callbacks
        callbacks.remove(criterion)
        callbacks.insert(0, criterion)


def stage_callbacks(criterion, run_dir: Path, extra: list | None) -> list:
    """The criterion first (it adds ``decision_accuracy`` to the logs TensorBoard then writes), TensorBoard,
    then the caller's callbacks."""
    return [*([criterion] if criterion is not None else []), tensorboard_callback(run_dir), *(extra or [])]


def lora_config(config: StageConfig):
    """The LoRA adapter's config, made the way TRL's scripts make it (``ModelConfig`` + ``get_peft_config``)."""
    from trl import ModelConfig, get_peft_config

    targets = config.lora_target_modules
    target = "all-linear" if targets in (["all-linear"], ["all_linear"]) else list(targets)
    return get_peft_config(ModelConfig(use_peft=True, lora_r=config.lora_r, lora_alpha=config.lora_alpha,
                                       lora_dropout=config.lora_dropout, lora_target_modules=target,
                                       lora_task_type="CAUSAL_LM"))


def tensorboard_callback(run_dir: Path):
    from transformers.integrations import TensorBoardCallback

    callback = TensorBoardCallback()
    callback.logging_dir = str(run_dir / LOGS_DIR)
    return callback


def start_run(config: StageConfig, stage: str, inputs: StageInputs, extra: dict[str, Any] | None = None):
    """Check ``--out`` and write ``rlft_run.json`` (status running). Returns (run_dir, checkpoint, info)."""
    run_dir = Path(config.out)
    identity = run_identity(stage, inputs.base_model, inputs.dataset)
    is_main = main_process()
    checkpoint = check_run_dir(run_dir, identity, config.overwrite, config.resume)
    wait_for_everyone()  # every process has checked before the main one changes anything
    info = {
        **identity,
        "status": "running",
        "base_model_arg": config.model,
        "dataset_arg": config.dataset,
        "lora": bool(config.lora),
        "codec_kind": inputs.codec.kind,
        "config": config_to_dict(config),
        "metrics": {},
        "rlft_version": __version__,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "resumed_from": checkpoint,
        **(extra or {}),
    }
    if is_main:
        make_run_dir(run_dir, config.overwrite, config.resume)
        write_run_info(run_dir, info)
        inputs.codec.save(run_dir)
    wait_for_everyone()
    return run_dir, checkpoint, info


@contextlib.contextmanager
def run_outcome(run_dir: Path, info: dict[str, Any]):
    """Training and saving a run: when they stop with an error, ``rlft_run.json`` says so (status ``failed`` with
    the reason, or ``interrupted``), where it said ``running``; checkpoints stay for ``--resume``. An OSError
    writing the run (a full disk) becomes one line (exit code 1). However it ends, the W&B / trackio run that
    ``report_to`` opened is ended with it."""
    try:
        yield
    except KeyboardInterrupt:
        _mark_run(run_dir, info, "interrupted", "Ctrl-C or SIGTERM")
        raise
    except Exception as exc:
        # writing the run failed (a full disk), Python's file API or a checkpoint's writer (torch, safetensors) said so
        fault = (exc if isinstance(exc, OSError) and is_output_fault(exc, run_dir)
                 else as_disk_full(exc, run_dir))
        if fault is None:
            _mark_run(run_dir, info, "failed", f"{type(exc).__name__}: {str(exc)[:500]}")
            raise
        error = output_error(run_dir, fault)
        error.hint = (f"{RUN_FILENAME} there says failed; free the space, then --resume from its last checkpoint "
                      "or --overwrite")
        _mark_run(run_dir, info, "failed", error.message)
        raise error from exc
    finally:
        finish_library_trackers()
    if main_process():  # last: the list of what the run wrote, so a later --overwrite replaces nothing else
        write_manifest(run_dir)
    # only now may an --overwrite'd run go: a SIGKILL at any moment before leaves it set aside, and the next command
    # on this --out puts it back (the new one kept beside it, named)
    release_aside(run_dir)


def _mark_run(run_dir: Path, info: dict[str, Any], status: str, reason: str) -> None:
    if not main_process():
        return
    with contextlib.suppress(Exception):  # best effort: the disk may be what failed
        write_run_info(run_dir, {**info, "status": status, "error": reason,
                                 "finished": time.strftime("%Y-%m-%dT%H:%M:%S")})


def check_finite_weights(model, what: str = "training") -> None:
    """Refuse to save a model whose weights went NaN or infinite (a learning rate far too high): the run fails with
    one line, and an --overwrite'd earlier run comes back, instead of a model that answers garbage."""
    bad = [name for name, p in model.named_parameters() if not bool(p.detach().isfinite().all())]
    if bad:
        total = sum(1 for _ in model.parameters())
        raise FaultError(f"{what} diverged: {len(bad)} of {total} weight tensors hold NaN or infinite values "
                         f"(first: {bad[0]})", hint="lower --learning-rate; nothing was saved as a result")


def finish_run(trainer, run_dir: Path, info: dict[str, Any], metrics: dict[str, Any], title: str,
               criterion=None) -> dict:
    """Save the adapter (or full model) and tokenizer at RUN, complete ``rlft_run.json``, write the summary
    (with the criterion's record when there was one)."""
    check_finite_weights(trainer.model)
    metrics = {**metrics, "processes": int(trainer.args.world_size)}  # > 1: accelerate launch --num_processes
    if criterion is not None:
        metrics = {**metrics, "criterion": criterion.summary()}
    trainer.save_model(str(run_dir))  # PEFT: adapter_config + adapter_model.safetensors; else the full model
    if not trainer.is_world_process_zero():
        return info
    model = trainer.model
    if hasattr(model, "peft_config"):  # the recorded base is authoritative (it may be a RUN folder)
        adapter_file = run_dir / "adapter_config.json"
        if adapter_file.is_file():
            adapter = json.loads(adapter_file.read_text(encoding="utf-8"))
            adapter["base_model_name_or_path"] = info["base_model"]
            atomic_write_text(adapter_file, json.dumps(adapter, indent=2) + "\n")
    info = {**info, "status": "complete", "metrics": metrics, "finished": time.strftime("%Y-%m-%dT%H:%M:%S")}
    write_run_info(run_dir, info)
    summary = {"stage": info["stage"], "base_model": info["base_model"], "dataset": info["dataset"],
               "lora": info["lora"], **metrics, "run": str(run_dir)}
    atomic_write_text(run_dir / SUMMARY_FILENAME, json.dumps(redact(summary), indent=2, default=str) + "\n")
    console.print(kv_table(title, {k: v for k, v in summary.items() if k != "criterion"}))
    if criterion is not None:
        console.print(criterion_line(metrics["criterion"]))
    return info


