"""The ``raw`` codec: every value written in decimal with a fixed number of digits, "0.123 -1.500 2.000"."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlft.codecs.base import register_codec
from rlft.codecs.numeric import NumericCodec, parse_floats
from rlft.core.errors import InvalidInputError
from rlft.core.textfmt import quantize

_BLOCK_VALUES = 32_768  # values per block: its temporaries stay in L2 cache (4x faster than 16k-row blocks)
MAX_PRECISION = 9  # value * 10**precision must stay an exact integer in float64 for ordinary magnitudes


@register_codec
class RawCodec(NumericCodec):
    """Fixed-precision decimals; decoding parses floats and clips them to the action bounds."""

    kind = "raw"

    def __init__(self, *args, precision: int = 3, signed_zero: bool = False, **kwargs: Any):
        super().__init__(*args, **kwargs)
        # Python writes a negative value that rounds to zero as "-0.000"; rlft writes "0.000" unless asked
        # (the rlft4rl profile asks: its prompts must be character-identical to RLFT4RL's f-strings)
        self.signed_zero = bool(signed_zero)
        if isinstance(precision, bool) or not isinstance(precision, int) or not 0 <= precision <= MAX_PRECISION:
            raise InvalidInputError(f"raw precision must be an integer in 0..{MAX_PRECISION}, got {precision!r}")
        self.precision = precision

    @classmethod
    def fit_params(cls, observation_space, action_space, observations, actions, precision: int = 3,
                   signed_zero: bool = False) -> dict:
        """Nothing is fitted: raw text needs only the precision."""
        return {"precision": precision, "signed_zero": signed_zero}

    @classmethod
    def fits_on_data(cls, observation_space, action_space, **options) -> bool:
        return False

    def params(self) -> dict[str, Any]:
        return {"precision": self.precision, **({"signed_zero": True} if self.signed_zero else {})}

    def fix_text(self, text, rows: np.ndarray, ints: np.ndarray):
        """With ``signed_zero``, the rows holding a negative value written as zero, as Python writes them."""
        if not self.signed_zero:
            return text
        bad = np.flatnonzero(((ints == 0) & np.signbit(rows)).any(axis=1))
        if not len(bad):
            return text
        import pyarrow as pa

        values = text.to_pylist()
        for r in bad:  # rare: a value in (-0.5e-p, 0]; the other values already equal Python's text
            values[r] = self.separator.join(f"{v:.{self.precision}f}" for v in rows[r])
        return pa.array(values, pa.string())

    def box_to_ints(self, x: np.ndarray, role: str) -> tuple[np.ndarray, int]:
        scale = 10.0**self.precision
        biggest = max(float(x.max()), -float(x.min())) if x.size else 0.0  # two reductions, no temporary array
        if biggest * scale >= 2.0**62:
            raise InvalidInputError(f"{role} value {biggest:g} is too large to write with {self.precision} decimals")
        q = np.empty(x.shape, dtype=np.int64)
        rows = max(1, _BLOCK_VALUES // max(1, x.shape[1] if x.ndim > 1 else 1))
        for i in range(0, len(x), rows):
            # rounded as Python's format() rounds the exact binary value (near-ties redone by Python itself)
            q[i : i + rows] = quantize(x[i : i + rows], self.precision)
        return q, self.precision

    def ints_to_box(self, q: np.ndarray, role: str) -> np.ndarray:
        return q / 10.0**self.precision

    def box_decimals(self) -> int:
        return self.precision

    def box_from_tokens(self, tokens: list[str], text: str) -> np.ndarray:
        return parse_floats(tokens, text)

    def describe_values(self, role: str) -> str:
        return f"each is a decimal number written with {self.precision} digits after the point"
