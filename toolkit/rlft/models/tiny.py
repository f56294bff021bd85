"""``rlft model init``: a tiny from-scratch causal LM (Llama architecture) sized for CPU tests and demos, with a
tokenizer trained on the dataset's own text (:mod:`rlft.models.tokenizer`), saved as a model folder."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rlft.core.console import console, kv_table
from rlft.core.errors import InvalidInputError
from rlft.core.io import atomic_output_dir, check_output_dir
from rlft.datasets.dataset import RlftDataset
from rlft.models.resolve import MODEL_INFO_FILENAME
from rlft.models.tiny_config import ModelInitConfig
from rlft.models.tokenizer import BIN_SEPARATORS, dataset_texts, longest_tokens, train_tokenizer, value_token_count

BIN_EMBEDDINGS = ("random", "smooth")
# Correlation length of smooth bin embeddings, as a fraction of the bin range: bins 1/32 of the range apart start
# with embeddings correlated 0.6, neighbours of 256 bins 0.99, bins half the range apart about 0. With fewer than 64
# bins the length is two bins (neighbours 0.88), so coarse bins are not all alike.
SMOOTH_BANDWIDTH = 32.0


def smooth_bin_embeddings(model, tokenizer, codec, seed: int) -> int:
    """Give every bin-index token of a binned codec (``"k"``, ``" k"``, ``",k"``) an embedding that varies smoothly
    with ``k`` (random Fourier features of the bin's position in [0, 1], a Gaussian kernel, the same variance as
    the other weights): neighbouring bins start alike, so what the model learns for one bin carries to its rarely
    seen neighbours instead of leaving them at random vectors. Embeddings are tied, so the output logits over bins
    start smooth too. Returns the number of tokens set."""
    import torch


    count = value_token_count(codec)
    _check_bin_embeddings("smooth", codec)
    weight = model.get_input_embeddings().weight
    generator = torch.Generator().manual_seed(seed + 1)
    freq = torch.randn(weight.shape[1], generator=generator) * min(SMOOTH_BANDWIDTH, (count - 1) / 2)
    phase = torch.rand(weight.shape[1], generator=generator) * 2 * torch.pi
    scale = weight.detach().std() * 2 ** 0.5
    vocab = tokenizer.get_vocab()
    done = 0
    with torch.no_grad():
        for k in range(count):
            row = scale * torch.cos(freq * (k / (count - 1)) + phase)
            for piece in (f"{sep}{k}" for sep in BIN_SEPARATORS):
                if piece in vocab:
                    weight[vocab[piece]] = row
                    done += 1
    return done


def _check_bin_embeddings(mode: str, codec) -> None:
    if mode not in BIN_EMBEDDINGS:
        raise InvalidInputError(f"--bin-embeddings must be one of {', '.join(BIN_EMBEDDINGS)}, got {mode!r}")
    if mode == "smooth" and (codec.kind != "binned" or value_token_count(codec) < 2):
        raise InvalidInputError("--bin-embeddings smooth needs a dataset serialized with --format binned")


def default_init_std(hidden: int) -> float:
    """``hidden ** -0.5``: attention logits and the tied output logits start with unit variance.

    transformers' default (``initializer_range`` 0.02) is sized for models hundreds of units wide. At hidden 64
    it gives attention logits with a standard deviation of about 0.03: attention is uniform over the prompt, the
    gradients of the query and key weights are each proportional to the other (a saddle at zero), and a tiny
    model sits at the marginal action distribution until noise pushes it off. Measured on the FrozenLake demo
    (steps until every state is optimal, seeds 0-4): 230-450 with 0.02, 50-70 with 0.125.
    """
    return float(hidden) ** -0.5


def build_tiny_model(tokenizer, layers: int, hidden: int, heads: int, kv_heads: int | None = None,
                     intermediate: int | None = None, max_positions: int = 512, seed: int = 0,
                     init_std: float | None = None):
    """A randomly initialised ``LlamaForCausalLM`` for ``tokenizer`` (tied embeddings, seeded, weights drawn
    with standard deviation ``init_std``, default :func:`default_init_std`)."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    if layers < 1 or hidden < 1 or heads < 1:
        raise InvalidInputError(f"layers, hidden and heads must be positive, got {layers}, {hidden}, {heads}")
    if hidden % heads:
        raise InvalidInputError(f"--hidden {hidden} must be a multiple of --heads {heads}")
    kv_heads = kv_heads or heads
    if heads % kv_heads:
        raise InvalidInputError(f"--heads {heads} must be a multiple of kv heads {kv_heads}")
    if (hidden // heads) % 2:
        raise InvalidInputError(f"head size hidden/heads = {hidden // heads} must be even (rotary embeddings)")
    check_model_size(len(tokenizer), hidden, intermediate or 4 * hidden, layers)
    init_std = default_init_std(hidden) if init_std is None else float(init_std)
    if not 0.0 < init_std < 10.0:
        raise InvalidInputError(f"--init-std must be positive (and below 10), got {init_std}")
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=intermediate or 4 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=max_positions,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
        initializer_range=init_std,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return model


def check_model_size(vocab: int, hidden: int, intermediate: int, layers: int) -> None:
    """Refuse, before torch allocates it, a model whose float32 weights would not fit in half of this machine's
    memory (a typo such as --hidden 100000000 asked for 67 GB and ended in an allocator traceback)."""
    params = vocab * hidden + layers * (4 * hidden * hidden + 3 * hidden * intermediate + 2 * hidden) + hidden
    need = 4 * params
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not every platform says
        memory = None
    if memory and need > memory // 2:
        raise InvalidInputError(
            f"a model of {params:,} parameters (--hidden {hidden}, --layers {layers}, vocabulary {vocab:,}) needs "
            f"{need / 1e9:.1f} GB for its weights alone; this machine has {memory / 1e9:.1f} GB",
            hint="rlft model init makes small from-scratch models (the recipes use --hidden 64-128); a large "
                 "pretrained model comes from rlft model fetch")


def init_model(config: ModelInitConfig) -> dict[str, Any]:
    """Train the tokenizer on the dataset's text, build the tiny model, save both at ``config.out``."""

    check_output_dir(config.out, config.overwrite, inputs=[("--dataset", config.dataset)])
    if config.max_rows < 1:
        raise InvalidInputError(f"--max-rows must be at least 1, got {config.max_rows}")
    dataset = RlftDataset.open(config.dataset)
    codec = dataset.codec
    _check_bin_embeddings(config.bin_embeddings, codec)
    data = dataset.splits()
    texts = list(dataset_texts(data, config.max_rows))
    if not texts:
        raise InvalidInputError(f"dataset {config.dataset} has no prompt/completion text to train a tokenizer on")
    tokenizer = train_tokenizer(texts, codec)
    longest = longest_tokens(tokenizer, texts[:2000]) + 8  # chat markers and EOS
    if config.max_positions is not None and config.max_positions < longest:
        raise InvalidInputError(f"--max-positions {config.max_positions} is shorter than the dataset's longest example "
                                f"({longest} tokens with the chat markers): the model could not read it",
                                hint=f"leave --max-positions out (fitted to the data) or give at least {longest}")
    max_positions = config.max_positions or max(256, 1 << (2 * longest - 1).bit_length())
    model = build_tiny_model(tokenizer, config.layers, config.hidden, config.heads, config.kv_heads,
                             config.intermediate, max_positions, config.seed, config.init_std)
    smooth = smooth_bin_embeddings(model, tokenizer, codec, config.seed) if config.bin_embeddings == "smooth" else 0
    tokenizer.model_max_length = max_positions
    unk_rate = _unk_rate(tokenizer, texts[:2000])
    info = {
        "kind": "tiny",
        "dataset": str(config.dataset),
        "codec_kind": codec.kind,
        "vocab_size": len(tokenizer),
        "parameters": sum(p.numel() for p in model.parameters()),
        "max_positions": max_positions,
        "init_std": model.config.initializer_range,
        "bin_embeddings": config.bin_embeddings,
        "smooth_bin_tokens": smooth,
        "longest_example_tokens": longest - 8,
        "unknown_token_rate": unk_rate,
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(config).items()},
    }
    with atomic_output_dir(config.out, config.overwrite) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / MODEL_INFO_FILENAME).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    console.print(kv_table(f"tiny model -> {config.out}", {k: v for k, v in info.items() if k != "config"}))
    return info


def _unk_rate(tokenizer, texts: list[str]) -> float:
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    total = sum(len(x) for x in ids)
    return sum(x.count(tokenizer.unk_token_id) for x in ids) / total if total else 0.0
