"""Resolving and loading models: a local model folder (``rlft model init`` / ``fetch``, a training RUN) first,
then a Hub id (which fails fast and clearly when offline; datasets are resolved the same way by
:mod:`rlft.datasets.loading`)."""

from __future__ import annotations

import os
from pathlib import Path

from rlft.core.errors import InvalidInputError
from rlft.core.io import kept_content
from rlft.datasets.loading import hub_snapshot, looks_like_hub_id

MODEL_INFO_FILENAME = "rlft_model.json"  # what rlft model init / fetch write about the model in its folder


# --------------------------------------------------------------------------------------------------------
def resolve_model(name: str | os.PathLike) -> str:
    """A local folder holding a model (config.json) or a LoRA adapter for ``name`` (local path or Hub id)."""
    path = Path(name).expanduser()
    kept = kept_content(path) if not (path / "config.json").is_file() else None
    if kept is not None:  # a killed --overwrite: the run the user had is whole, beside it; say where
        raise InvalidInputError(
            f"{path} holds no model: an --overwrite of it was killed before the new run was complete, and the "
            f"previous one is kept whole at {kept}",
            hint=f"the next rlft command that writes {path} (train ... --out {path}) puts it back; or use that folder",
        )
    if path.is_dir():
        if not ((path / "config.json").is_file() or (path / "adapter_config.json").is_file()):
            raise InvalidInputError(
                f"{path} holds no model (no config.json or adapter_config.json)",
                hint="make one with rlft model init / rlft model fetch, or pass a training RUN folder",
            )
        return str(path)
    text = str(name)
    if path.exists():  # a file, a pipe, a device: a model is a folder
        raise InvalidInputError(f"model {text!r} is not a folder", hint="pass a model folder or a Hub id")
    if not looks_like_hub_id(text):
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
    if tokenizer.pad_token is None:  # a batch of prompts is padded: a ValueError at the first generate (pass 16, B9)
        raise InvalidInputError(f"the tokenizer of {path} defines neither a padding nor an end-of-sequence token, and "
                                "rlft pads its batches with one", hint="the model folder is damaged: make or fetch it "
                                "again, or set pad_token in its tokenizer_config.json")
    _check_chat_template(tokenizer, path)
    return tokenizer


def _check_chat_template(tokenizer, path: str) -> None:
    """A chat template that is no Jinja (hand-edited) is named at load, not a TemplateSyntaxError traceback at the
    first prompt (hostile pass 15, B11)."""
    import jinja2

    templates = tokenizer.chat_template
    for template in (templates.values() if isinstance(templates, dict) else [templates]):
        try:
            jinja2.Environment().parse(template) if isinstance(template, str) else None
        except jinja2.TemplateSyntaxError as exc:
            raise InvalidInputError(f"the chat template of {path} is not valid Jinja (line {exc.lineno}: {exc})",
                                    hint="fix chat_template.jinja, or remove it for plain prompts") from exc


def available_memory() -> int | None:
    """Bytes of memory the machine can give now (psutil's ``available``, else /proc/meminfo's MemAvailable), or
    None when neither says."""
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except (ImportError, OSError, AttributeError):
        pass
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _dtype_bytes(config, dtype) -> int:
    """Bytes per weight as from_pretrained will load them: ``dtype``, else config.json's dtype ("auto"), else 4."""
    import torch

    chosen = dtype if dtype not in (None, "auto") else (getattr(config, "dtype", None)
                                                        or getattr(config, "torch_dtype", None))
    if isinstance(chosen, str):
        chosen = getattr(torch, chosen, None)
    return chosen.itemsize if isinstance(chosen, torch.dtype) else 4


def _whole(config, *names: str) -> int:
    value = next((getattr(config, n) for n in names if isinstance(getattr(config, n, None), int)), 0)
    return max(0, int(value))


def check_model_fits(path: str, dtype=None) -> None:
    """Refuse, before any weight is allocated, a model whose config.json asks for more memory than the machine has
    available (a damaged ``hidden_size: 10000000`` took 22 GB and the OOM killer). A lower bound from the config's
    sizes (embeddings + one hidden x hidden matrix a layer) refuses absurd configs at once; a plausible one is built
    on the meta device (no memory) and its parameters counted. A config that cannot be read is left to
    from_pretrained, which names the damage."""
    from transformers import AutoConfig, AutoModelForCausalLM

    try:
        config = AutoConfig.from_pretrained(path)
    except Exception:  # noqa: BLE001 - from_pretrained reports it
        return
    _check_sizes(config, path)
    available = available_memory()
    if available is None:
        return
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    hidden, layers = _whole(text, "hidden_size", "n_embd", "d_model"), _whole(text, "num_hidden_layers", "n_layer")
    vocab = _whole(text, "vocab_size")
    per_weight = _dtype_bytes(config, dtype)
    count = vocab * hidden + layers * hidden * hidden
    if count * per_weight <= available:
        try:
            from accelerate import init_empty_weights

            with init_empty_weights(include_buffers=True):
                empty = AutoModelForCausalLM.from_config(config)
            count = sum(p.numel() for p in empty.parameters()) + sum(b.numel() for b in empty.buffers())
        except Exception:  # noqa: BLE001 - an architecture that will not build: from_pretrained says why
            return
    needed = count * per_weight
    if needed > available:
        raise InvalidInputError(
            f"model {path} needs about {needed / 2**30:,.1f} GiB for its {count:,} weights (config.json: hidden "
            f"size {hidden:,}, {layers:,} layers, vocabulary {vocab:,}), more than the {available / 2**30:,.1f} GiB "
            "of memory available",
            hint="its config.json is damaged, or the model is too big for this machine: use a smaller model")


def load_model(path: str, dtype=None):
    """``AutoModelForCausalLM.from_pretrained`` of a resolved local folder, with a clear error; a model too big for
    the machine's memory is refused first (:func:`check_model_fits`)."""
    from transformers import AutoModelForCausalLM

    check_model_fits(path, dtype)  # its sizes checked too, from the config read once
    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    except Exception as exc:  # noqa: BLE001 - report which folder failed
        raise InvalidInputError(f"cannot load a causal LM from {path}: {first_sentence(exc)}",
                                hint="its config.json names a model type or files this transformers cannot load: "
                                     "is it a model folder (rlft model init / model fetch)?") from exc
    check_model_numbers(model, path)
    return model


def check_model_numbers(model, path: str, tokenizer=None) -> None:
    """The sizes and token ids a model folder's config files give, checked where they are loaded: a layer count of
    -1, a text or too large end-of-sequence id, a special token past the vocabulary were tracebacks at the first
    generate (hostile pass 17, B9)."""
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    vocab = getattr(config, "vocab_size", None)
    bad = []
    generation = getattr(model, "generation_config", None)
    for key in ("eos_token_id", "bos_token_id", "pad_token_id"):
        value = getattr(generation, key, None)
        ids = value if isinstance(value, list) else [value]
        if value is not None and not all(_token_id(v, vocab) for v in ids):
            bad.append(f"generation_config.json {key} is {value!r}")
    if tokenizer is not None:
        if not isinstance(tokenizer.model_max_length, int | float) or isinstance(tokenizer.model_max_length, bool):
            bad.append(f"tokenizer_config.json model_max_length is {tokenizer.model_max_length!r}")
        past = [t for t, i in zip(tokenizer.all_special_tokens, tokenizer.all_special_ids, strict=False)
                if not _token_id(i, vocab)]
        bad += [f"the special token {t!r} lies past the model's vocabulary" for t in past]
    if bad:
        raise InvalidInputError(f"{path}: {'; '.join(bad)}, which no model folder of rlft's holds",
                                hint="the model folder is damaged: make or fetch it again")


def _check_sizes(config, path: str) -> None:
    """A layer count or vocabulary of 0 or less, before the weights are read (the load would warn of every weight
    as unexpected first)."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    bad = [f"config.json {key} is {getattr(text, key)!r}" for key in ("num_hidden_layers", "vocab_size")
           if hasattr(text, key) and not (isinstance(getattr(text, key), int) and getattr(text, key) > 0)]
    if bad:
        raise InvalidInputError(f"{path}: {'; '.join(bad)}, which no model folder of rlft's holds",
                                hint="the model folder is damaged: make or fetch it again")


def _token_id(value, vocab) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0 and (vocab is None or value < vocab)


def first_sentence(exc: Exception, limit: int = 300) -> str:
    """A library's error as one line: its first paragraph's first sentence (transformers appends paragraphs of
    install advice that do not apply to a damaged folder)."""
    text = " ".join(str(exc).split("\n\n")[0].split()) or type(exc).__name__
    end = text.find(". ")
    return (text[: end + 1] if 0 < end < limit else text[:limit])


def count_parameters(model) -> tuple[int, int]:
    """(trainable, total) parameter counts."""
    def numel(p) -> int:
        return int(getattr(p, "ds_numel", 0) or p.numel())  # DeepSpeed ZeRO-3 partitions parameters

    total = sum(numel(p) for p in model.parameters())
    trainable = sum(numel(p) for p in model.parameters() if p.requires_grad)
    return trainable, total
