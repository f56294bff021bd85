"""What ``rlft model init`` takes: :class:`ModelInitConfig`, whose fields are the command's options
(``rlft.cli.options`` generates them: a setting is declared once, here). A light module: the CLI imports it to
build its options without loading torch or transformers."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rlft.core.options import Declared, option

MAX_WIDTH = 1 << 16  # hidden, intermediate and head counts: wider is a typo (the weights alone would not fit)
MAX_LAYERS = 1024


@dataclass(kw_only=True)
class ModelInitConfig(Declared):
    """A small causal LM (Llama architecture) with a word-level tokenizer trained on the dataset's text.

    The tokenizer has pad/bos/eos (eos = the end-of-turn token <|im_end|>) and a ChatML chat template, so chat
    datasets train as with SmolLM2; a `tokenized` codec's values 0..N-1 are one token each.
    """

    dataset: str = field(metadata={"help": "rlft dataset folder (or Hub id) to train the tokenizer on.",
                                   "required": True})
    out: Path = field(metadata={"help": "Model folder to write.", "required": True})
    layers: int = option(2, "Transformer layers.", min=1, max=MAX_LAYERS)
    hidden: int = option(64, "Hidden size.", min=1, max=MAX_WIDTH)
    # head size 32 at hidden 64: vLLM's CPU attention needs 32, 64, 80 or more
    heads: int = option(2, "Attention heads (hidden must be a multiple; head size hidden/heads >= 32 for vLLM's CPU "
                         "attention).", min=1, max=MAX_WIDTH)
    kv_heads: int | None = option(None, "Key/value heads (default: heads).", min=1, max=MAX_WIDTH)
    intermediate: int | None = option(None, "MLP size (default: 4 x hidden).", min=1, max=MAX_WIDTH)
    # bounded: the tokenizer's model_max_length is set to it, and past 2**20 it no longer truncates anything real
    max_positions: int | None = option(None, "Context length (default: fitted to the data: the longest example x2, "
                                           "at least 256).", min=1, max=1 << 20)
    max_rows: int = option(20_000, "Dataset rows read to train the tokenizer.", min=1)
    seed: int = option(0, "Seed of the weight initialisation.", min=0)
    init_std: float | None = option(None, "Std of the initial weights (default hidden ** -0.5).")
    bin_embeddings: str = option("random", "binned datasets: random, or smooth (bin k's embedding varies smoothly "
                                         "with k, so rare bins start like their neighbours).")
    overwrite: bool = option(False, "Replace a non-empty --out (atomically).")
