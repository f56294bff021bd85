"""How a local model answers a codec's prompts, chosen in one place for ``rlft eval``, the decision checks of
training and GRPO's sampling: a binned codec's bins read per dimension (:mod:`rlft.policy.bins`) where the
tokenizer allows it, else text generation, held to the codec's grammar (its token table, built once) or free."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlft.codecs.base import Codec
from rlft.core.errors import InvalidInputError
from rlft.policy.bins import BinBackend, resolve_bin_decoding
from rlft.policy.constrained import build_token_table
from rlft.policy.generation import TransformersBackend, default_max_new_tokens


def choose_bins(requested: str, codec: Codec, tokenizer, temperature: float = 0.0) -> str:
    """The bin decoding of ``requested`` (``auto``, ``off`` or a mode), ``off`` for text generation: sampling
    (temperature > 0) generates text, and a mode asked for by name with sampling is refused."""
    if temperature > 0 and requested == "auto":
        return "off"
    mode = resolve_bin_decoding(requested, codec, tokenizer)
    if mode != "off" and temperature > 0:
        raise InvalidInputError(f"--bin-decoding {mode} is deterministic: drop --temperature or pass "
                                "--bin-decoding off to sample text")
    return mode


@dataclass
class LocalDecoding:
    """The decoding chosen for a local model; :meth:`backend` makes a fresh backend over the model as it is now
    (backends cache answers, and a model in training changes between calls)."""

    codec: Codec
    tokenizer: Any
    bins: str  # a bin decoding mode, or "off": text generation
    table: Any  # the grammar's token table (constrained text generation), or None
    max_new_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0

    @classmethod
    def choose(cls, codec: Codec, tokenizer, model, *, bin_decoding: str = "auto", constrained: bool = True,
               temperature: float = 0.0, top_p: float = 1.0, max_new_tokens: int | None = None) -> LocalDecoding:
        bins = choose_bins(bin_decoding, codec, tokenizer, temperature)
        table = build_token_table(codec, tokenizer, model) if constrained and bins == "off" else None
        return cls(codec, tokenizer, bins, table, max_new_tokens or default_max_new_tokens(codec, table),
                   temperature, top_p)

    def backend(self, model, cache: bool = True) -> TransformersBackend:
        if self.bins != "off":
            return BinBackend(model, self.tokenizer, self.codec, self.bins, cache=cache)
        return TransformersBackend(model, self.tokenizer, self.max_new_tokens, self.temperature, self.top_p,
                                   self.table, cache=cache)

    def describe(self) -> str:
        if self.bins != "off":
            return f"bins ({self.bins})"
        mode = "greedy" if self.temperature <= 0 else f"sampled at temperature {self.temperature:g}"
        return f"{mode}, constrained" if self.table is not None else mode
