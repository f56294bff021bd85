"""The ``discretized`` codec: each value written as the index of its bin, "3 15 0"; decoding gives bin centres.

Bin edges are per dimension, from data quantiles (equal-mass bins) or uniform over the space bounds. Repeated
quantiles are merged, so a dimension may have fewer bins than asked for.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlft.codecs.base import register_codec
from rlft.codecs.choices import EDGE_SOURCES
from rlft.codecs.numeric import NumericCodec, check_bin_count, check_index, parse_ints, require_rows
from rlft.core.errors import InvalidInputError


def _uniform(space: dict[str, Any], edges_from: str) -> np.ndarray:
    """Per dimension of a Box space: whether its edges are uniform over its bounds (finite, asked for)."""
    low, high = np.asarray(space["low"], np.float64), np.asarray(space["high"], np.float64)
    return np.isfinite(low) & np.isfinite(high) & (high > low) & (edges_from == "bounds")


def fit_edges(space: dict[str, Any], rows: np.ndarray | None, bins: int, edges_from: str, role: str) -> list:
    """Per-dimension bin edges of a Box space (None for a Discrete space)."""
    if space["type"] != "box":  # Discrete and Text spaces are written as they are
        return None
    low, high = np.asarray(space["low"], np.float64), np.asarray(space["high"], np.float64)
    uniform = _uniform(space, edges_from)
    quantiles = None
    if not uniform.all():  # bounds fall back to data where they are infinite
        rows = require_rows(rows, role, "discretized")
        # edges are data values (no interpolation), so a few-valued dimension gets exactly its values as edges
        quantiles = np.quantile(rows, np.linspace(0.0, 1.0, bins + 1), axis=0, method="inverted_cdf")
    edges = []
    for j in range(len(low)):
        e = np.linspace(low[j], high[j], bins + 1) if uniform[j] else np.unique(quantiles[:, j])
        if len(e) == 1:  # a constant dimension: one narrow bin centred on its value
            half = 1e-6 * max(1.0, abs(e[0]))
            e = np.array([e[0] - half, e[0] + half])
        edges.append(e.tolist())
    return edges


@register_codec
class DiscretizedCodec(NumericCodec):
    """Bin indices per dimension; an answer index decodes to the midpoint of its bin."""

    kind = "discretized"

    def __init__(
        self,
        *args,
        bins: int = 32,
        edges_from: str = "data",
        observation_edges: list[list[float]] | None = None,
        action_edges: list[list[float]] | None = None,
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        check_bin_count(bins)
        if edges_from not in EDGE_SOURCES:
            raise InvalidInputError(f"edges_from must be one of {EDGE_SOURCES}, got {edges_from!r}")
        self.bins, self.edges_from = bins, edges_from
        self.edges = {
            "observation": self._check_edges(observation_edges, "observation"),
            "action": self._check_edges(action_edges, "action"),
        }

    def _check_edges(self, edges, role: str) -> list[np.ndarray] | None:
        space = self._space(role)
        if space["type"] != "box":
            return None
        dims = self.observation_dims if role == "observation" else self.action_dims
        if edges is None or len(edges) != dims:
            raise InvalidInputError(
                f"the discretized codec needs {role}_edges for its {dims} dims", hint="build it with make_codec"
            )
        arrays = [np.asarray(e, dtype=np.float64) for e in edges]
        if any(len(e) < 2 or not np.all(np.diff(e) > 0) or not np.isfinite(e).all() for e in arrays):
            raise InvalidInputError(f"{role}_edges must be finite and strictly increasing, 2 or more per dimension")
        return arrays

    @classmethod
    def fit_params(
        cls, observation_space, action_space, observations, actions, bins: int = 32, edges_from: str = "data"
    ) -> dict:
        """Bin edges for both spaces, from quantiles of the data or uniform over finite bounds."""
        if edges_from not in EDGE_SOURCES:
            raise InvalidInputError(f"edges_from must be one of {EDGE_SOURCES}, got {edges_from!r}")
        check_bin_count(bins)
        return {
            "bins": bins,
            "edges_from": edges_from,
            "observation_edges": fit_edges(observation_space, observations, bins, edges_from, "observation"),
            "action_edges": fit_edges(action_space, actions, bins, edges_from, "action"),
        }

    @classmethod
    def fits_on_data(cls, observation_space, action_space, edges_from: str = "data", **options) -> bool:
        """Quantile edges need the data; uniform edges over finite bounds (``edges_from="bounds"``) do not."""
        return any(space["type"] == "box" and not _uniform(space, edges_from).all()
                   for space in (observation_space, action_space))

    def params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"bins": self.bins, "edges_from": self.edges_from}
        for role, edges in self.edges.items():
            if edges is not None:  # a Discrete space has no edges
                params[f"{role}_edges"] = [e.tolist() for e in edges]
        return params

    def box_to_ints(self, x: np.ndarray, role: str) -> tuple[np.ndarray, int]:
        idx = np.empty(x.shape, dtype=np.int64)
        for j, e in enumerate(self.edges[role]):
            # inner edges only: values below the first / above the last edge land in the end bins
            idx[:, j] = np.searchsorted(e[1:-1], x[:, j], side="right")
        return idx, 0

    def ints_to_box(self, q: np.ndarray, role: str) -> np.ndarray:
        out = np.empty(q.shape, dtype=np.float64)
        for j, e in enumerate(self.edges[role]):
            i = np.clip(q[:, j], 0, len(e) - 2)
            out[:, j] = (e[i] + e[i + 1]) / 2
        return out

    def box_from_tokens(self, tokens: list[str], text: str) -> np.ndarray:
        idx = parse_ints(tokens, text, "bin index")
        edges = self.edges["action"]
        check_index(idx, [len(e) - 1 for e in edges], text, "bin index")
        return np.array([(e[i] + e[i + 1]) / 2 for e, i in zip(edges, idx, strict=True)])

    def describe_values(self, role: str) -> str:
        counts = [len(e) - 1 for e in self.edges[role]]
        source = "quantiles of the data" if self.edges_from == "data" else "uniform over the space bounds"
        text = f"each is a bin index 0..{max(counts) - 1} (bins per dimension from {source}"
        text += ")" if min(counts) == max(counts) else f"; some dimensions have fewer bins: {counts})"
        return text + ("; an answer index stands for the centre of its bin" if role == "action" else "")
