"""Resolving and loading models: a local model folder (``rlft model init`` / ``fetch``, a training RUN) first,
then a Hub id (which fails fast and clearly when offline; datasets are resolved the same way by
:mod:`rlft.datasets.loading`)."""

from __future__ import annotations

import os
from pathlib import Path

from rlft.core.errors import InvalidInputError
from rlft.datasets.loading import hub_snapshot, looks_like_hub_id

MODEL_INFO_FILENAME = "rlft_model.json"  # what rlft model init / fetch write about the model in its folder


# --------------------------------------------------------------------------------------------------------
def resolve_model(name: str | os.PathLike) -> str:
    """A local folder holding a model (config.json) or a LoRA adapter for ``name`` (local path or Hub id)."""
    path = Path(name).expanduser()
    if path.is_dir():
        if not ((path / "config.json").is_file() or (path / "adapter_config.json").is_file()):
            raise InvalidInputError(
                f"{path} holds no model (no config.json or adapter_config.json)",
                hint="make one with rlft model init / rlft model fetch, or pass a training RUN folder",
            )
        return str(path)
    text = str(name)
    if path.exists() or not looks_like_hub_id(text):
        raise InvalidInputError(f"model {text!r} does not exist", hint="pass a model folder or a Hub id")
    return hub_snapshot(text, "model")


def load_tokenizer(path: str):
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
    except Exception as exc:  # noqa: BLE001 - a damaged or missing tokenizer file: say which folder
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InvalidInputError(f"cannot load the tokenizer of {path}: {first}",
                                hint="the model folder is damaged: make or fetch it again") from exc
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model(path: str, dtype=None):
    """``AutoModelForCausalLM.from_pretrained`` of a resolved local folder, with a clear error."""
    from transformers import AutoModelForCausalLM

    try:
        return AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    except Exception as exc:  # noqa: BLE001 - report which folder failed
        raise InvalidInputError(f"cannot load a causal LM from {path}: {exc}") from exc


def count_parameters(model) -> tuple[int, int]:
    """(trainable, total) parameter counts."""
    def numel(p) -> int:
        return int(getattr(p, "ds_numel", 0) or p.numel())  # DeepSpeed ZeRO-3 partitions parameters

    total = sum(numel(p) for p in model.parameters())
    trainable = sum(numel(p) for p in model.parameters() if p.requires_grad)
    return trainable, total
