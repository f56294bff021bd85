"""What the SFT and GRPO stages share: inputs (dataset, codec, model), device settings, LoRA, the RUN folder's
bookkeeping, TensorBoard logging and the final summary."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlft import __version__
from rlft.codecs.base import Codec, load_codec
from rlft.core.console import console, kv_table
from rlft.core.errors import FaultError, InvalidInputError, OutputExistsError
from rlft.core.io import (
    atomic_write_text,
    check_output_parent,
    is_output_fault,
    output_error,
    refuse_overlap,
    release_aside,
)
from rlft.core.secrets import redact
from rlft.core.trackers import finish_library_trackers
from rlft.datasets.loading import load_dataset_dict, resolve_dataset
from rlft.models.resolve import count_parameters, resolve_model
from rlft.models.run import (
    CHECKPOINTS_DIR,
    LOGS_DIR,
    RUN_FILENAME,
    SUMMARY_FILENAME,
    check_run_dir,
    load_policy_model,
    make_run_dir,
    model_lineage,
    run_identity,
    write_run_info,
)
from rlft.train.closed_loop import ReturnCheck
from rlft.train.configs import StageConfig, config_to_dict
from rlft.train.criterion import CriterionCallback, decision_check

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


@dataclass
class StageInputs:
    dataset_dir: Path
    dataset: str  # recorded: absolute folder, or the Hub id
    codec: Codec
    train: Any  # datasets.Dataset
    model_path: str  # resolved local folder
    base_model: str  # recorded: absolute folder, or the Hub id
    conversational: bool


def _recorded(given: str) -> str:
    """A local folder is recorded by its absolute path; anything resolved through the Hub by its id."""
    path = Path(given).expanduser()
    return str(path.resolve()) if path.exists() else str(given)


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


def load_inputs(config: StageConfig, stage: str, needed_columns: tuple[str, ...]) -> StageInputs:
    """Resolve and check the dataset, its codec and splits, and the model, before anything is written."""
    config.require("dataset", "model", "out")
    refuse_overlap(config.out, [("--dataset", config.dataset), *model_lineage("--model", config.model),
                                ("--config", getattr(config, "config_file", None))])
    _check_out_folder(Path(config.out))
    _check_training_numbers(config)
    local = resolve_dataset(config.dataset)
    codec = load_codec(local)
    train = _train_split(config, load_dataset_dict(local), stage, needed_columns)
    model_path = resolve_model(config.model)
    conversational = isinstance(train[0]["prompt"], list)
    return StageInputs(
        dataset_dir=local,
        dataset=_recorded(config.dataset),
        codec=codec,
        train=train,
        model_path=model_path,
        base_model=_recorded(config.model),
        conversational=conversational,
    )


def _check_out_folder(out: Path) -> None:
    """Refuse an ``--out`` that is a file, or whose parent cannot hold a folder."""
    if out.exists() and not out.is_dir():
        raise OutputExistsError(f"--out {out} exists and is not a folder", hint="give a RUN folder path")
    check_output_parent(out)  # a parent that is a file, or no permission: refused before any model is loaded


def _check_training_numbers(config: StageConfig) -> None:
    """Refuse sizes, step counts and a learning rate TRL would take but cannot train with."""
    for name in ("lora_r", "lora_alpha", "per_device_train_batch_size", "gradient_accumulation_steps",
                 "logging_steps", "save_steps"):
        if getattr(config, name) < 1:
            raise InvalidInputError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(config, name)}")
    if config.max_steps == 0 or config.max_steps < -1:
        raise InvalidInputError(f"--max-steps must be positive (or -1 for epochs), got {config.max_steps}")
    if config.learning_rate is not None and not 0 < config.learning_rate < float("inf"):
        raise InvalidInputError(f"--learning-rate must be positive, got {config.learning_rate}")


def _train_split(config: StageConfig, data, stage: str, needed_columns: tuple[str, ...]):
    """The training split of ``data``, checked for the columns ``stage`` needs and cut to ``max_train_samples``."""
    if config.train_split not in data:
        raise InvalidInputError(f"dataset {config.dataset} has no split {config.train_split!r}",
                                hint=f"its splits: {', '.join(data)}")
    train = data[config.train_split]
    missing = [c for c in needed_columns if c not in train.column_names]
    if missing:
        raise InvalidInputError(
            f"dataset {config.dataset} lacks column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
            f"needed by {stage}",
            hint=f"its columns: {', '.join(train.column_names)}",
        )
    if len(train) == 0:
        raise InvalidInputError(f"split {config.train_split!r} of {config.dataset} is empty")
    for name in needed_columns:  # text, or chat messages: a number there is no prompt a tokenizer can read
        feature = train.features[name]
        kind = getattr(feature, "dtype", None) if not isinstance(feature, list) else "list"
        if kind not in ("string", "large_string", "list", None):
            raise InvalidInputError(f"column {name!r} of {config.dataset} holds {kind} values, not text or chat "
                                    "messages", hint="serialize the data with rlft data serialize, which writes text")
    if config.max_train_samples is not None:
        if config.max_train_samples < 1:
            raise InvalidInputError("--max-train-samples must be at least 1")
        train = train.select(range(min(config.max_train_samples, len(train))))
    return train


def pick_eval_split(data_splits: dict, train, eval_split: str, val_fraction: float, seed: int,
                    max_eval: int | None):
    """(train, eval dataset or None, eval name) following ``eval_split`` (see SFTStageConfig.eval_split)."""
    if not 0.0 <= val_fraction < 1.0:
        raise InvalidInputError(f"--val-fraction must be in [0, 1), got {val_fraction}")
    name = eval_split
    if eval_split == "none":
        return train, None, None
    if eval_split == "auto":
        name = next((s for s in ("validation", "test") if s in data_splits and len(data_splits[s])), None)
        if name is None:
            if val_fraction <= 0 or len(train) < 2:
                return train, None, None
            parts = train.train_test_split(test_size=val_fraction, seed=seed)
            train, evaluation, name = parts["train"], parts["test"], f"{int(val_fraction * 100)}% of train"
            return train, _cap(evaluation, max_eval), name
    elif eval_split not in data_splits:
        raise InvalidInputError(f"--eval-split {eval_split!r} is not a split of the dataset",
                                hint=f"its splits: {', '.join(data_splits)}; or auto / none")
    return train, _cap(data_splits[name], max_eval), name


def _cap(ds, n: int | None):
    return ds.select(range(min(n, len(ds)))) if n is not None and n > 0 else ds


def load_model_for_training(inputs: StageInputs, allow_tokenizer_mismatch: bool = False):
    """(model, tokenizer) from ``inputs.model_path`` (a RUN folder is merged first), with checks: chat template,
    EOS, and that the tokenizer reads the dataset's text and the model holds it (:func:`check_tokenizer_fits`)."""
    model, tokenizer, _ = load_policy_model(inputs.model_path, merge=True)
    model.train()
    model.requires_grad_(True)  # a merged LoRA run comes back frozen; LoRA, when on, freezes the base itself
    if inputs.conversational and not tokenizer.chat_template:
        raise InvalidInputError(
            f"the dataset's prompts are chat messages but model {inputs.base_model} has no chat template",
            hint="use a chat model (rlft model init makes one), or a dataset made with --prompt-style plain",
        )
    if tokenizer.eos_token is None:
        raise InvalidInputError(f"the tokenizer of {inputs.base_model} has no EOS token")
    if not allow_tokenizer_mismatch:
        check_tokenizer_fits(inputs, tokenizer, model)
    return model, tokenizer


UNKNOWN_TOKEN_LIMIT = 0.01  # share of <unk> tokens in the dataset's text above which a model cannot read it
CHECKED_ROWS = 256


def check_tokenizer_fits(inputs: StageInputs, tokenizer, model) -> None:
    """Refuse, before training, a model that cannot read the dataset: a tokenizer that maps more than 1% of the
    text of a sample of rows to its unknown token (a tiny tokenizer made for another dataset), or rows longer
    than the model's positions (RoPE models only warn, then train on positions they never saw)."""
    rows = inputs.train.select(range(min(CHECKED_ROWS, len(inputs.train))))
    texts = [_row_text(r, tokenizer, inputs.conversational) for r in rows]
    ids = tokenizer(texts, add_special_tokens=not inputs.conversational)["input_ids"]
    hint = "use the model made for this dataset (rlft model init --dataset DIR), or --allow-tokenizer-mismatch"
    unk = tokenizer.unk_token_id
    if unk is not None:
        total = sum(len(i) for i in ids)
        share = sum(i.count(unk) for i in ids) / max(1, total)
        if share > UNKNOWN_TOKEN_LIMIT:
            raise InvalidInputError(f"the tokenizer of {inputs.base_model} maps {share:.0%} of the dataset's tokens "
                                    f"to {tokenizer.unk_token!r}: the model cannot read this codec's text", hint=hint)
    limit = getattr(model.config, "max_position_embeddings", None)
    longest = max((len(i) for i in ids), default=0)
    if limit and longest > limit:
        raise InvalidInputError(f"rows of {inputs.dataset} are up to {longest} tokens (prompt and completion) but "
                                f"{inputs.base_model} has {limit} positions",
                                hint="make the model with rlft model init --max-positions N, use a shorter prompt "
                                     "style, or --allow-tokenizer-mismatch")


def prompt_text(prompt, tokenizer, conversational: bool) -> str:
    """A prompt as the model sees it: chat messages through the chat template (generation prompt added)."""
    if conversational:
        return tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
    return str(prompt)


def _row_text(row: dict, tokenizer, conversational: bool) -> str:
    """A row's prompt as the model sees it and its completion, as one text."""
    completion = row.get("completion")
    if isinstance(completion, list):
        completion = "".join(m.get("content", "") for m in completion)
    return prompt_text(row["prompt"], tokenizer, conversational) + str(completion or "")


SMALL_MODEL_PARAMETERS = 20_000_000  # below: a from-scratch model (rlft model init); above: a pretrained one


def model_defaults(config: StageConfig, model, learning_rates: tuple[float, float] | None = None) -> StageConfig:
    """``config`` with the settings left to the model resolved: LoRA (off for a small from-scratch model, whose every
    weight must learn; on for a pretrained one) and, with ``learning_rates`` = (small, pretrained), the learning
    rate."""
    from dataclasses import replace

    small = sum(p.numel() for p in model.parameters()) < SMALL_MODEL_PARAMETERS
    changes: dict[str, Any] = {}
    if config.lora is None:
        changes["lora"] = not small
    if learning_rates is not None and config.learning_rate is None:
        changes["learning_rate"] = learning_rates[0] if small else learning_rates[1]
    config = replace(config, **changes)
    if config.lora:
        check_lora_targets(config.lora_target_modules, model)
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
        "output_dir": str(run_dir / CHECKPOINTS_DIR),
        "learning_rate": config.learning_rate,
        "lr_scheduler_type": config.lr_scheduler_type,
        "warmup_steps": config.warmup_steps,
        "num_train_epochs": config.num_train_epochs,
        "max_steps": config.max_steps,
        "per_device_train_batch_size": config.per_device_train_batch_size,
        "gradient_accumulation_steps": config.gradient_accumulation_steps,
        "logging_steps": config.logging_steps,
        "logging_first_step": True,
        "save_strategy": "steps",
        "save_steps": config.save_steps,
        "save_total_limit": config.save_total_limit,
        "seed": config.seed,
        "data_seed": config.seed,
        "report_to": "none",  # TensorBoard is added by tensorboard_callback, writing to RUN/logs
        "dataloader_num_workers": 0,
        **device_args(config, n_params),
    }


def criterion_callback(config: StageConfig, inputs: StageInputs):
    """The decision-state check of ``config`` (:mod:`rlft.train.criterion`), or None when it is off. Built
    before anything is written, so bad settings fail first."""
    every = config.check_steps
    if every < 0:
        raise InvalidInputError(f"--check-steps must be at least 0, got {every}")
    if (config.stop_at_accuracy is not None or config.stop_at_action_error is not None) and every == 0:
        every = 10
    if every == 0:
        if config.check_episodes or config.stop_at_return is not None or config.keep_best_check:
            raise InvalidInputError("--check-episodes, --stop-at-return and --keep-best-check play episodes every "
                                    "--check-steps N",
                                    hint="e.g. --check-steps 500 --check-episodes 5")
        return None
    if not 0.0 <= config.check_tolerance < 1.0:
        raise InvalidInputError(f"--check-tolerance must be in [0, 1), got {config.check_tolerance}")

    rows, split = check_rows(inputs)
    check = decision_check(rows, inputs.codec, config.check_states, config.seed, config.check_tolerance, split)
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


HELD_OUT_SPLITS = ("validation", "test")


def check_rows(inputs: StageInputs) -> tuple[Any, str]:
    """(rows, split name) the decision check grades: the training rows for discrete actions (FrozenLake's states
    are the whole task); for continuous actions the held-out split (validation, else test) when the dataset has
    one with the same columns, so the logged action error is measured on states the model never trained on."""
    if inputs.codec.action_space["type"] == "discrete":
        return inputs.train, "train"

    splits = load_dataset_dict(inputs.dataset_dir)
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
    writing the run (a full disk) becomes one line (exit code 1)."""

    try:
        yield
    except KeyboardInterrupt:
        _mark_run(run_dir, info, "interrupted", "Ctrl-C or SIGTERM")
        finish_library_trackers()
        raise
    except OSError as exc:
        if not is_output_fault(exc, run_dir):
            _mark_run(run_dir, info, "failed", f"{type(exc).__name__}: {exc}")
            raise
        error = output_error(run_dir, exc)
        error.hint = (f"{RUN_FILENAME} there says failed; free the space, then --resume from its last checkpoint "
                      "or --overwrite")
        _mark_run(run_dir, info, "failed", error.message)
        raise error from exc
    except Exception as exc:
        _mark_run(run_dir, info, "failed", f"{type(exc).__name__}: {str(exc)[:500]}")
        finish_library_trackers()
        raise
    finish_library_trackers()


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
    release_aside(run_dir)  # the run replacing an --overwrite'd one is complete: the old one can go
    summary = {"stage": info["stage"], "base_model": info["base_model"], "dataset": info["dataset"],
               "lora": info["lora"], **metrics, "run": str(run_dir)}
    atomic_write_text(run_dir / SUMMARY_FILENAME, json.dumps(redact(summary), indent=2, default=str) + "\n")
    console.print(kv_table(title, {k: v for k, v in summary.items() if k != "criterion"}))
    if criterion is not None:
        console.print(criterion_line(metrics["criterion"]))
    return info


LARGE_ERROR_FACTOR = 2.0  # worst-tenth action error above this many tolerances: accuracy is hiding failures


def action_error_line(record: dict[str, Any], acc: str) -> str:
    """A continuous check's line: the action error first, accuracy beside it, and a warning when a high accuracy
    hides a large error on the worst states."""
    error, worst = record.get("action_error"), record.get("action_error_worst10")
    where = f"{record['states']} {record.get('split', 'train')} states ({record['decoding']})"
    if error is None:
        return f"action error n/a on {where}"
    line = (f"action error {error:.4f} of the range (worst tenth {worst:.4f}), decision accuracy {acc} within "
            f"{record['tolerance']:g} on {where}")
    target = record.get("error_target")
    if target is not None:
        line = (f"[green]criterion reached[/] at step {record['reached_at_step']}: " if record["reached"] else
                f"[red]criterion NOT reached[/] (action error <= {target:g}): ") + line
    if final_accuracy_high(record) and worst > LARGE_ERROR_FACTOR * record["tolerance"]:
        line += (f"\n[yellow]warning: accuracy {acc} hides large errors: the worst tenth of states is "
                 f"{worst:.3f} of the range off (above {LARGE_ERROR_FACTOR:g} x the tolerance); judge this run by "
                 "its action error and its return, not its accuracy[/]")
    return line


def final_accuracy_high(record: dict[str, Any]) -> bool:
    return (record.get("final_accuracy") or 0.0) >= 0.9


def criterion_line(record: dict[str, Any]) -> str:
    """One line on whether training reached its criterion, and when (the closed-loop check's return beside it)."""
    line = _decision_line(record)
    episodes = record.get("episodes")
    if episodes and episodes["history"]:
        step, mean, low, score = episodes["history"][-1]
        line += (f"; closed loop at step {step}: return {mean:.4g} (min {low:.4g})"
                 f"{'' if score is None else f', normalized {score:.1f}'} on {episodes['episodes']} episodes")
        if episodes["target"] is not None:
            line += (f" [green](return target {episodes['target']:g} reached at step {record['reached_at_step']})[/]"
                     if record["reached"] and mean >= episodes["target"] else
                     f" [red](return target {episodes['target']:g} not reached)[/]")
    return line


def _decision_line(record: dict[str, Any]) -> str:
    final = record["final_accuracy"]
    acc = "n/a" if final is None else f"{final:.3f}"
    if "action_error" in record or "error_target" in record:
        return action_error_line(record, acc)
    if record["target"] is None:
        return f"decision accuracy {acc} on {record['states']} states ({record['decoding']})"
    if record["reached"] and final is not None and final >= record["target"] - 1e-12:
        return (f"[green]criterion reached[/] at step {record['reached_at_step']}: decision accuracy {acc} >= "
                f"{record['target']:g} on {record['states']} states ({record['decoding']})")
    return (f"[red]criterion NOT reached[/]: decision accuracy {acc} < {record['target']:g} on "
            f"{record['states']} states; wrong: {record['wrong_states'][:10]}")


def prompt_token_metrics(train, tokenizer, conversational: bool, max_rows: int = 1000) -> dict[str, float]:
    """Prompt length in the model's own tokens (chat template included), mean and max over up to ``max_rows``
    training rows: what a step and an evaluation call cost, and the figure codecs and wordings are compared by."""
    rows = train.select(range(min(max_rows, len(train))))["prompt"]
    texts = [prompt_text(p, tokenizer, conversational) for p in rows]
    # the chat template writes its own special tokens; a plain prompt gets the tokenizer's
    lengths = [len(ids) for ids in tokenizer(texts, add_special_tokens=not conversational)["input_ids"]]
    return {"prompt_tokens_mean": float(sum(lengths) / len(lengths)), "prompt_tokens_max": int(max(lengths))}


def parameter_metrics(model) -> dict[str, Any]:
    """Parameter counts, where the model trained and, on a GPU, its peak memory (what a GPU recipe reports)."""
    import torch

    trainable, total = count_parameters(model)
    device = next(model.parameters()).device
    metrics: dict[str, Any] = {"trainable_parameters": trainable, "total_parameters": total, "device": str(device)}
    if device.type == "cuda":
        metrics["gpu_name"] = torch.cuda.get_device_name(device)
        metrics["gpu_peak_memory_gb"] = round(torch.cuda.max_memory_allocated(device) / 2**30, 3)
    return metrics


def last_logged(log_history: list[dict], key: str):
    for entry in reversed(log_history):
        if key in entry:
            return entry[key]
    return None


def first_logged(log_history: list[dict], key: str):
    for entry in log_history:
        if key in entry:
            return entry[key]
    return None

