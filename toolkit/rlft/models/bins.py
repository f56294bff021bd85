"""``rlft model add-bins``: a pretrained model reads and writes a ``binned`` codec's values as one token each.

A pretrained tokenizer writes a bin index as several pieces (SmolLM2: ``" 15"`` is ``" "``, ``"1"``, ``"5"``), so
per-dimension bin decoding (:mod:`rlft.policy.bins`) cannot read one distribution per action dimension and a
HalfCheetah step costs three times the tokens. This adds every bin index the codec writes, alone and after each
separator (``"15"``, ``" 15"``, ``",15"``), as a token of its own (issue #26: "added tokens with initialized
embeddings"); indices that already are one token (SmolLM2's ``"0"``..``"9"``) are reused, RT-2 style. The
tokenizer matches added tokens longest first, so ``" 15"`` is never cut into ``" 1"`` and ``"5"``.

The new embeddings start either

* ``subwords`` (default): the mean of the pretrained embeddings of the pieces the index was written as before
  (the usual initialisation of added tokens; ``" 15"`` and ``" 51"`` start equal). The model's first answers are
  then about as likely as its digits were: on 16 HalfCheetah rows SmolLM2's loss starts at 4.5 (uniform over 64
  bins: 4.2); or
* ``smooth``: bin ``k``'s embedding varies smoothly with ``k`` (as ``rlft model init --bin-embeddings smooth``,
  scaled to the pretrained embeddings), so neighbouring bins start alike; every bin token is set, reused digits
  included. The pretrained hidden states are large, so these random directions start with confident wrong logits
  (the same rows: loss 12.3).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rlft.core.console import console, kv_table
from rlft.core.errors import InvalidInputError
from rlft.core.io import atomic_output_dir, check_output_dir
from rlft.datasets.dataset import RlftDataset
from rlft.models.fetch_config import AddBinsConfig
from rlft.models.resolve import MODEL_INFO_FILENAME, load_model, load_tokenizer, resolve_model
from rlft.models.run import is_adapter_folder, model_lineage
from rlft.models.tiny import smooth_bin_embeddings
from rlft.models.tokenizer import BIN_SEPARATORS, value_token_count

BIN_INITS = ("subwords", "smooth")


def bin_pieces(codec) -> list[str]:
    """Every text a binned codec writes one value as: each bin index alone and after each separator."""
    if codec is None or codec.kind != "binned" or value_token_count(codec) < 2:
        raise InvalidInputError("rlft model add-bins needs a dataset serialized with --format binned",
                                hint="rlft data serialize SOURCE --format binned --out DATASET")
    return [f"{sep}{k}" for k in range(value_token_count(codec)) for sep in BIN_SEPARATORS]


def add_bin_tokens(model, tokenizer, codec, init: str = "subwords", seed: int = 0) -> dict[str, int]:
    """Add the codec's bin pieces that are not one token yet to ``tokenizer``, grow ``model``'s embeddings to match
    and initialise them (module doc). Returns counts: ``added``, ``reused`` (already one token), ``initialised``."""
    import torch
    from tokenizers import AddedToken

    if init not in BIN_INITS:
        raise InvalidInputError(f"--init must be one of {', '.join(BIN_INITS)}, got {init!r}")
    pieces = bin_pieces(codec)
    before = {p: tokenizer(p, add_special_tokens=False)["input_ids"] for p in pieces}
    new = [p for p in pieces if len(before[p]) != 1]
    # normalized=False: matched on the raw text, so the space of " 15" is part of the token (byte-level BPE would
    # otherwise see "Ġ15"); special=False: decoding keeps them, they are answer text
    tokenizer.add_tokens([AddedToken(p, normalized=False, special=False, lstrip=False, rstrip=False) for p in new])
    if new:
        model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    weight = model.get_input_embeddings().weight
    if init == "smooth":
        done = smooth_bin_embeddings(model, tokenizer, codec, seed)
    else:
        vocab = tokenizer.get_vocab()
        with torch.no_grad():
            for p in new:
                weight[vocab[p]] = weight[before[p]].mean(0)
        done = len(new)
    output = model.get_output_embeddings()
    if output is not None and output.weight is not weight:  # untied head: the bins' logits start from their rows
        with torch.no_grad():
            ids = [tokenizer.convert_tokens_to_ids(p) for p in new]
            output.weight[ids] = weight[ids]
    broken = [p for p in pieces if len(tokenizer(p, add_special_tokens=False)["input_ids"]) != 1]
    if broken:  # a tokenizer that normalizes or pre-splits added tokens away: say so rather than train on it
        raise InvalidInputError(f"the tokenizer still writes {len(broken)} bin pieces as several tokens "
                                f"(e.g. {broken[0]!r}) after adding them")
    return {"added": len(new), "reused": len(pieces) - len(new), "initialised": done}


def add_bins(config: AddBinsConfig) -> dict[str, Any]:
    """``rlft model add-bins``: load MODEL, add DATASET's bin tokens (:func:`add_bin_tokens`), save at OUT."""
    # the model's base models too: an adapter run's base written over was destroyed (hostile pass 21, F2)
    check_output_dir(config.out, config.overwrite,
                     inputs=[*model_lineage("--model", config.model), ("--dataset", config.dataset)])
    if is_adapter_folder(config.model):  # its resized embeddings were saved as an adapter no base fits (pass 21, F1)
        raise InvalidInputError(f"--model {config.model} is a LoRA run (an adapter): bin tokens resize the whole "
                                "model's embeddings", hint=f"merge it first: rlft model merge {config.model} --out "
                                "MERGED, then rlft model add-bins --model MERGED")
    local = resolve_model(config.model)
    codec = RlftDataset.open(config.dataset).codec
    bin_pieces(codec)  # refuse a codec without bins before loading weights
    tokenizer = load_tokenizer(local)
    model = load_model(local)
    vocab_before = len(tokenizer)
    counts = add_bin_tokens(model, tokenizer, codec, config.init, config.seed)
    base = Path(local) / MODEL_INFO_FILENAME
    info = {
        "kind": "pretrained+bins",
        "base_model": str(config.model),
        "base_info": json.loads(base.read_text(encoding="utf-8")) if base.is_file() else None,
        "dataset": str(config.dataset),
        "codec_kind": codec.kind,
        "bin_values": value_token_count(codec),
        "vocab_size_before": vocab_before,
        "vocab_size": len(tokenizer),
        "parameters": sum(p.numel() for p in model.parameters()),
        **counts,
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(config).items()},
    }
    with atomic_output_dir(config.out, config.overwrite) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / MODEL_INFO_FILENAME).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    shown = {k: v for k, v in info.items() if k not in ("config", "base_info")}
    console.print(kv_table(f"bin tokens added -> {config.out}", shown))
    return info
