"""The RUN folder a training stage writes, and how evaluation loads a policy from it.

RUN/ holds::

    rlft_run.json        {"stage", "status", "base_model", "base_model_arg", "dataset", "lora", "config",
                          "metrics", "rlft_version", ...}; status is "running" until the run completes
    rlft_codec.json      copy of the dataset's codec (prompts and answer parsing for evaluation)
    adapter_config.json  + adapter_model.safetensors (LoRA), or config.json + model.safetensors (--no-lora)
    tokenizer files      tokenizer.json, tokenizer_config.json, chat template
    logs/                TensorBoard event files
    checkpoints/         trainer checkpoints (resume with --resume)
    summary.json         the final summary table as JSON

``base_model`` is the local folder the weights were loaded from (a Hub id stays a Hub id). It may itself be a
RUN folder (GRPO on top of an SFT run): :func:`load_policy_model` then loads that run first, recursively.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from rlft import __version__
from rlft.codecs.base import CODEC_FILENAME, Codec, load_codec
from rlft.core.claims import claim_output, recover_set_aside, set_aside
from rlft.core.console import console, kv_table
from rlft.core.errors import InvalidInputError, OutputExistsError
from rlft.core.io import atomic_output_dir, atomic_write_text, check_output_dir, refuse_foreign
from rlft.core.manifest import RUN_FILE, run_foreign
from rlft.core.output_names import check_output_parent
from rlft.core.reading import read_json_mapping
from rlft.core.secrets import redact
from rlft.models.resolve import (
    MODEL_INFO_FILENAME,
    check_model_numbers,
    load_model,
    load_tokenizer,
    resolve_model,
)

RUN_FILENAME = RUN_FILE
SUMMARY_FILENAME = "summary.json"
LOGS_DIR = "logs"
CHECKPOINTS_DIR = "checkpoints"
ADAPTER_CONFIG = "adapter_config.json"
_MAX_DEPTH = 8


def read_run_info(path: str | os.PathLike) -> dict[str, Any] | None:
    """The ``rlft_run.json`` of a RUN folder, or None when ``path`` is not one."""

    file = Path(path) / RUN_FILENAME
    return read_json_mapping(file, "run file") if file.is_file() else None


def write_run_info(run_dir: Path, info: dict[str, Any]) -> Path:
    return atomic_write_text(Path(run_dir) / RUN_FILENAME, json.dumps(redact(info), indent=2, default=str) + "\n")


def run_identity(stage: str, base_model: str, dataset: str) -> dict[str, Any]:
    return {"stage": stage, "base_model": base_model, "dataset": dataset}


TRAINER_STATE = "trainer_state.json"  # transformers writes it last into a checkpoint: there, the save completed


def last_complete_checkpoint(folder: Path) -> str | None:
    """The newest ``checkpoint-N`` under ``folder`` whose save completed (it holds ``trainer_state.json``, which
    transformers writes after the weights, optimizer and RNG states), or None. A run killed while saving (SIGKILL,
    a full disk) leaves a newer, partial folder that ``--resume`` would otherwise load and fail on; a checkpoint whose
    weights or trainer state do not read back (a file damaged after the save) is passed over the same way."""
    import re

    if not folder.is_dir():
        return None
    found = sorted(((int(m.group(1)), p) for p in folder.iterdir()
                    if p.is_dir() and (m := re.fullmatch(r"checkpoint-(\d+)", p.name))), reverse=True)
    for i, (_, path) in enumerate(found):
        if _state_readable(path) and _weights_readable(path):
            if i:
                skipped = ", ".join(p.name for _, p in found[:i])
                console.print(f"[yellow]{skipped} under {folder} did not finish saving or is damaged; "
                              f"resuming from {path.name}[/]")
            return str(path)
    return None


def _state_readable(checkpoint: Path) -> bool:
    """Whether ``trainer_state.json`` is there and parses (transformers reads it first on resume)."""
    try:
        json.loads((checkpoint / TRAINER_STATE).read_text())
    except (OSError, ValueError):
        return False
    return True


def _weights_readable(checkpoint: Path) -> bool:
    """Whether every safetensors file of ``checkpoint`` reads back (its header and its size agree)."""
    from safetensors import safe_open

    for file in checkpoint.glob("*.safetensors"):
        try:
            with safe_open(str(file), framework="pt") as weights:
                for name in weights.keys():  # noqa: SIM118 - safe_open is no dict
                    weights.get_slice(name)
        except Exception:  # noqa: BLE001 - any failure to read means "damaged"
            return False
    return True


def _resume_checkpoint(out: Path, identity: dict[str, Any], empty: bool) -> str:
    """The checkpoint ``--resume`` continues from: ``out`` must hold a run of the same identity, nothing foreign,
    and a complete checkpoint."""
    info = read_run_info(out) if not empty else None
    if info is None:
        raise InvalidInputError(f"--resume: {out} holds no run to resume ({RUN_FILENAME} missing)")
    diff = {k: (info.get(k), v) for k, v in identity.items() if info.get(k) != v}
    if diff:
        what = "; ".join(f"{k}: {a!r} there, {b!r} now" for k, (a, b) in diff.items())
        raise InvalidInputError(f"--resume: {out} holds a different run ({what})",
                                hint="pass the same stage, --model and --dataset, or --overwrite")
    foreign = run_foreign(out)
    if foreign:  # the resumed run's manifest lists what is there at its end: it would adopt them as rlft's
        raise OutputExistsError(f"--resume: {out} holds files rlft did not write there ({', '.join(foreign[:5])})",
                                hint="move them out of the run folder, then --resume")
    checkpoint = last_complete_checkpoint(out / CHECKPOINTS_DIR)
    if checkpoint is None:
        raise InvalidInputError(f"--resume: {out} has no complete, readable checkpoint under {CHECKPOINTS_DIR}/",
                                hint="the run stopped before its first save or its checkpoints are damaged; "
                                     "pass --overwrite to restart")
    return checkpoint


def check_run_dir(out: Path, identity: dict[str, Any], overwrite: bool, resume: bool) -> str | None:
    """Check ``out`` (reading only) and return the checkpoint to resume from, or None for a new run.

    * empty or missing: a new run;
    * ``resume``: ``out`` must hold a run of the same stage, base model and dataset, with a checkpoint;
    * ``overwrite``: a new run replacing the old content (removed by :func:`make_run_dir`);
    * otherwise a non-empty ``out`` is refused, saying what it holds.

    Every process of a distributed run calls this before any of them writes, so all agree.
    """
    out = Path(out)
    if overwrite and resume:
        raise InvalidInputError("--overwrite and --resume exclude each other")
    recover_set_aside(out)  # a run that replaced this one was killed before it completed: the old one comes back
    if out.exists() and not out.is_dir():
        raise OutputExistsError(f"--out {out} exists and is not a folder")
    if overwrite and not resume:
        refuse_foreign(out)

    check_output_parent(out)
    empty = not out.exists() or not any(out.iterdir())
    if resume:
        return _resume_checkpoint(out, identity, empty)
    if not empty and not overwrite:
        info = read_run_info(out)
        if info is not None:
            raise OutputExistsError(
                f"--out {out} already holds a run (stage {info.get('stage')}, model {info.get('base_model')}, "
                f"dataset {info.get('dataset')}, status {info.get('status')})",
                hint="pass --overwrite to replace it, --resume to continue it, or choose another --out",
            )
        raise OutputExistsError(f"--out {out} exists and is not empty",
                                hint="pass --overwrite to replace it, or choose another --out")
    return None


def make_run_dir(out: Path, overwrite: bool, resume: bool) -> None:
    """Create ``out`` (main process only, after :func:`check_run_dir`). With ``overwrite`` the old run is set
    aside, not deleted: it comes back if the new run fails or is interrupted, and goes once it completes."""

    out = Path(out)
    claim_output(out)  # a second writer started after the check above is refused here
    if overwrite and not resume:
        set_aside(out)
    out.mkdir(parents=True, exist_ok=True)


def is_adapter_folder(path: str | os.PathLike) -> bool:
    return (Path(path) / ADAPTER_CONFIG).is_file()


def base_model_of(path: str | os.PathLike) -> str:
    """The base model of an adapter folder: ``rlft_run.json`` first, then PEFT's adapter_config."""
    info = read_run_info(path)
    if info and info.get("base_model"):
        return str(info["base_model"])
    config = json.loads((Path(path) / ADAPTER_CONFIG).read_text(encoding="utf-8"))
    base = config.get("base_model_name_or_path")
    if not base:
        raise InvalidInputError(f"{path}: the adapter names no base model")
    return str(base)


def model_lineage(option: str, path: str | os.PathLike | None) -> list[tuple[str, str]]:
    """``(option, folder)`` of a model argument and of every local base model an adapter run stands on: the folders
    an output must stay out of (writing over a LoRA run's base changes the run). Hub ids and missing paths are
    left out; a chain too deep stops at ``_MAX_DEPTH``."""
    found: list[tuple[str, str]] = []
    current = str(path) if path is not None else None
    for _ in range(_MAX_DEPTH):
        if current is None or not Path(current).expanduser().is_dir():
            break
        found.append((option if not found else f"{option}'s base model", current))
        if not is_adapter_folder(current):
            break
        try:
            current = base_model_of(current)
        except (InvalidInputError, OSError, ValueError):
            break
    return found


def _load(path: str, merge: bool, dtype, depth: int):
    if depth > _MAX_DEPTH:
        raise InvalidInputError(f"{path}: chain of runs deeper than {_MAX_DEPTH} (a run based on itself?)")
    local = resolve_model(path)
    if not is_adapter_folder(local):
        return load_model(local, dtype=dtype)
    from peft import PeftModel

    base_path = base_model_of(local)
    base_resolved = resolve_model(base_path)
    if Path(base_resolved).resolve() == Path(local).resolve():
        raise InvalidInputError(f"{local}: the adapter names itself as its base model")
    base = _load(base_resolved, True, dtype, depth + 1)
    try:
        model = PeftModel.from_pretrained(base, local)
    except Exception as exc:  # noqa: BLE001 - adapter/base mismatch: say which
        raise InvalidInputError(f"cannot load the adapter in {local} onto {base_path}: {exc}") from exc
    return model.merge_and_unload() if merge else model


def load_policy_model(path: str | os.PathLike, *, merge: bool = True, dtype=None):
    """``(model, tokenizer, codec_or_None)`` from a RUN folder (base + LoRA adapter, or a full model) or any
    model folder / Hub id.

    ``merge=True`` folds LoRA weights into the base (faster generation; a plain ``PreTrainedModel``);
    ``merge=False`` returns the ``PeftModel``. The tokenizer comes from ``path`` (runs save theirs); the codec
    is ``path/rlft_codec.json`` when present. The model is in eval mode.
    """
    path = str(path)
    model = _load(path, merge, dtype, 0)
    local = resolve_model(path)
    read_run_info(local)  # a RUN folder's rlft_run.json that does not read back is one clear error, not ignored
    tokenizer_dir = local
    if is_adapter_folder(local) and not (Path(local) / "tokenizer_config.json").is_file():
        tokenizer_dir = resolve_model(base_model_of(local))
    tokenizer = load_tokenizer(tokenizer_dir)
    check_model_numbers(model, local, tokenizer)
    codec_file = Path(local) / CODEC_FILENAME
    codec: Codec | None = load_codec(codec_file) if codec_file.is_file() else None
    model.eval()
    return model, tokenizer, codec


def merge_run(run: str | os.PathLike, out: Path, overwrite: bool = False) -> dict[str, Any]:
    """``rlft model merge``: base + adapter of ``run`` merged into a plain model folder at ``out``."""

    check_output_dir(out, overwrite, inputs=model_lineage("run", run))
    local = resolve_model(run)
    if not is_adapter_folder(local):
        raise InvalidInputError(f"{run} holds no LoRA adapter ({ADAPTER_CONFIG})",
                                hint="a --no-lora run is already a full model folder")
    model, tokenizer, codec = load_policy_model(local, merge=True)
    info = {
        "kind": "merged",
        "run": str(Path(local).resolve()),
        "base_model": base_model_of(local),
        "parameters": sum(p.numel() for p in model.parameters()),
        "rlft_version": __version__,
    }
    with atomic_output_dir(out, overwrite) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if codec is not None:
            codec.save(tmp)
        (tmp / MODEL_INFO_FILENAME).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    console.print(kv_table(f"merged {run} -> {out}", info))
    return info
