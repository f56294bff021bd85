"""The ``binned`` codec: every value is ONE token, its bin index among per-dimension quantile bins of the data.

Made for continuous control with language models (issue #26): a HalfCheetah step is 17 observation and 6 action
tokens instead of 114 + 40 digits. What differs from ``discretized``:

* each bin stands for the **mean of the data that fell in it** (not the bin's midpoint), so a decoded action is
  the average recorded action of its bin, and the end bins of a long-tailed dimension do not decode to the tail;
* a dimension with no more distinct values than ``bins`` gets **one bin per value** (decoded exactly), where
  quantile edges would merge neighbouring values; ``bins_per_dimension`` in the codec file says how many each got;
* the tiny tokenizer made for a binned dataset (``rlft model init``) holds every index with its leading separator
  as one token (``" 15"``), so one value is one token and per-dimension decoding can read a distribution over the
  bins of each dimension (:mod:`rlft.policy.bins`);
* values outside the fitted range at encode time go to the end bins and are **counted** (``clipped``), never
  silently.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlft.codecs.base import ActionParseError, register_codec
from rlft.codecs.choices import EDGE_SOURCES
from rlft.codecs.discretized import DiscretizedCodec, fit_edges
from rlft.codecs.numeric import check_bin_count, check_index, parse_floats, parse_ints, require_rows
from rlft.core.errors import InvalidInputError


def value_edges(values: np.ndarray) -> list[float]:
    """Edges giving each distinct value of a few-valued dimension its own bin: midpoints between neighbours,
    and outer edges half a gap (or a small width) beyond the extremes."""
    gaps = np.diff(values)
    pad = float(gaps.min()) / 2 if len(gaps) else 1e-6 * max(1.0, abs(float(values[0])))
    return [float(values[0]) - pad, *((values[:-1] + values[1:]) / 2).tolist(), float(values[-1]) + pad]


def fit_bins(space: dict[str, Any], rows: np.ndarray | None, bins: int, edges_from: str, role: str):
    """(edges, means) per dimension of a Box space, (None, None) for other spaces. Quantile (or bound) edges,
    except one bin per value where a dimension of the data has at most ``bins`` distinct values; each bin's value
    is the mean of the rows that fell in it (its midpoint when none did: uniform edges over the bounds)."""
    if space["type"] != "box":
        return None, None
    rows = require_rows(rows, role, "binned")  # bin means are data statistics, whatever the edges
    edges = fit_edges(space, rows, bins, edges_from, role)
    means = []
    for j, e in enumerate(edges):
        e = np.asarray(e, dtype=np.float64)
        column = rows[:, j]
        if edges_from == "data":
            distinct = np.unique(column)
            if len(distinct) <= bins:
                e = np.asarray(value_edges(distinct))
        centres = (e[:-1] + e[1:]) / 2
        idx = np.searchsorted(e[1:-1], column, side="right")
        counts = np.bincount(idx, minlength=len(centres))
        sums = np.bincount(idx, weights=column, minlength=len(centres))
        means.append(np.where(counts > 0, sums / np.maximum(counts, 1), centres).tolist())
        edges[j] = e.tolist()
    return edges, means


@register_codec
class BinnedCodec(DiscretizedCodec):
    """Per-dimension bins of both spaces written as one index token each; a bin decodes to its data mean."""

    kind = "binned"

    def __init__(self, *args, observation_means: list[list[float]] | None = None,
                 action_means: list[list[float]] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.means = {
            "observation": self._check_means(observation_means, "observation"),
            "action": self._check_means(action_means, "action"),
        }
        self.clipped = {"observation": 0, "action": 0}  # values beyond the outer edges, written as the end bins
        # each dimension's outer edges, for counting clipped values on every encode
        self._outer = {role: None if edges is None else (np.array([e[0] for e in edges]),
                                                         np.array([e[-1] for e in edges]))
                       for role, edges in self.edges.items()}

    def _check_means(self, means, role: str) -> list[np.ndarray] | None:
        edges = self.edges[role]
        if edges is None:
            return None
        if means is None or len(means) != len(edges):
            raise InvalidInputError(f"the binned codec needs {role}_means for its {len(edges)} dims",
                                    hint="build it with make_codec")
        arrays = [np.asarray(m, dtype=np.float64) for m in means]
        for j, (m, e) in enumerate(zip(arrays, edges, strict=True)):
            if len(m) != len(e) - 1 or not np.isfinite(m).all():
                raise InvalidInputError(f"{role}_means of dimension {j} must hold one finite value per bin "
                                        f"({len(e) - 1}), got {len(m)}")
        return arrays

    @classmethod
    def fit_params(cls, observation_space, action_space, observations, actions, bins: int = 64,
                   edges_from: str = "data") -> dict:
        """Edges and per-bin data means for both spaces."""
        if edges_from not in EDGE_SOURCES:
            raise InvalidInputError(f"edges_from must be one of {EDGE_SOURCES}, got {edges_from!r}")
        check_bin_count(bins, low=2)
        obs_edges, obs_means = fit_bins(observation_space, observations, bins, edges_from, "observation")
        act_edges, act_means = fit_bins(action_space, actions, bins, edges_from, "action")
        return {"bins": bins, "edges_from": edges_from, "observation_edges": obs_edges, "action_edges": act_edges,
                "observation_means": obs_means, "action_means": act_means}

    @classmethod
    def fits_on_data(cls, observation_space, action_space, **options) -> bool:
        """Bin means are data statistics: fitted whenever either space is a Box."""
        return any(space["type"] == "box" for space in (observation_space, action_space))

    def params(self) -> dict[str, Any]:
        params = super().params()
        for role in ("observation", "action"):
            if self.edges[role] is not None:
                params[f"{role}_bins_per_dimension"] = [len(e) - 1 for e in self.edges[role]]
                params[f"{role}_means"] = [m.tolist() for m in self.means[role]]
        return params

    @classmethod
    def from_dict(cls, data: dict[str, Any]):
        params = {k: v for k, v in data.get("params", {}).items() if not k.endswith("_bins_per_dimension")}
        return super().from_dict({**data, "params": params})

    def describe(self) -> str:
        counts = [len(e) - 1 for e in self.edges["action"]] if self.edges["action"] is not None else []
        fewer = f", fewer bins in {sum(c < self.bins for c in counts)} action dims" if any(
            c < self.bins for c in counts) else ""
        return f"binned (bins={self.bins}, edges_from={self.edges_from}{fewer})"

    def box_to_ints(self, x: np.ndarray, role: str) -> tuple[np.ndarray, int]:
        idx, decimals = super().box_to_ints(x, role)
        low, high = self._outer[role]
        self.clipped[role] += int(((x < low) | (x > high)).sum())
        return idx, decimals

    def ints_to_box(self, q: np.ndarray, role: str) -> np.ndarray:
        out = np.empty(q.shape, dtype=np.float64)
        for j, m in enumerate(self.means[role]):
            out[:, j] = m[np.clip(q[:, j], 0, len(m) - 1)]
        return out

    def box_from_tokens(self, tokens: list[str], text: str) -> np.ndarray:
        """Integer indices decode to their bins' means. An index written with decimals (``12.3754``) is a position
        between two bins and decodes to the value interpolated between their means: it is how a decoder that
        reads a distribution over the bins (:mod:`rlft.policy.bins`) writes the distribution's mean as text."""
        means = self.means["action"]
        if not any("." in t for t in tokens):
            idx = parse_ints(tokens, text, "bin index")
            check_index(idx, [len(m) for m in means], text, "bin index")
            return np.array([m[i] for m, i in zip(means, idx, strict=True)])
        positions = parse_floats(tokens, text)
        out = np.empty(len(means))
        for j, (m, pos) in enumerate(zip(means, positions, strict=True)):
            if not 0.0 <= pos <= len(m) - 1:
                raise ActionParseError(f"bin position {pos:g} out of range 0..{len(m) - 1} for action dimension {j}",
                                       text)
            out[j] = np.interp(pos, np.arange(len(m)), m)
        return out

    def position_text(self, values: np.ndarray, decimals: int = 4) -> str:
        """Action values (inside each dimension's range of bin means) written as bin positions: the inverse of
        decoding a fractional index, so ``decode_action`` gives the values back to ``decimals`` places of a bin."""
        means = self.means["action"]
        positions = [np.interp(v, m, np.arange(len(m))) for v, m in zip(np.ravel(values), means, strict=True)]
        return self.separator.join(f"{p:.{decimals}f}" for p in positions)

    def bin_values(self, role: str = "action") -> list[np.ndarray]:
        """The value each bin of each dimension decodes to (what a distribution over bins averages)."""
        return self.means[role]

    def describe_values(self, role: str) -> str:
        counts = [len(e) - 1 for e in self.edges[role]]
        text = f"each is a bin index 0..{max(counts) - 1} (per-dimension quantile bins of the data"
        text += ")" if min(counts) == max(counts) else f"; some dimensions have fewer bins: {counts})"
        return text + ("; an answer index stands for the mean of the data in its bin" if role == "action" else "")
