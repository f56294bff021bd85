"""Rows a learner refuses before it trains: non-finite values (NaN losses, a NaN policy saved) and Box actions
outside the action space (a policy fitted to actions the env clips, learned silently). BC and offline RL share them."""

from __future__ import annotations

import numpy as np

from rlft.core.errors import InvalidInputError

BOUND_TOLERANCE = 1e-4  # float32 storage and clipping round the bounds themselves


def check_finite_rows(source, split: str, named: list[tuple[str, np.ndarray]]) -> None:
    """Refuse the first column of ``named`` with a non-finite row, naming the row (text columns are skipped)."""
    for name, values in named:
        try:
            rows = np.asarray(values, dtype=np.float64).reshape(len(values), -1)
        except (TypeError, ValueError):
            continue  # text observations: nothing to be non-finite
        bad = np.flatnonzero(~np.isfinite(rows).all(axis=1))
        if len(bad):
            raise InvalidInputError(f"{source}: {len(bad)} {split} row(s) have a non-finite {name} "
                                    f"(first: row {int(bad[0])}, {rows[bad[0]].tolist()[:8]})",
                                    hint="re-serialize with rlft data serialize --drop-nonfinite, or fix the source")


def check_box_actions(source, split: str, actions: np.ndarray, action_space: dict, column: str = "action") -> None:
    """Refuse Box actions outside the codec's action space, naming the first row and its bounds."""
    if action_space.get("type") != "box" or "low" not in action_space:
        return
    rows = np.asarray(actions, dtype=np.float64).reshape(len(actions), -1)
    low, high = np.asarray(action_space["low"], np.float64), np.asarray(action_space["high"], np.float64)
    if rows.shape[1] != low.size:
        return  # a shape mismatch is refused by the learner with its own words
    span = np.where(np.isfinite(high - low), high - low, 1.0)
    outside = (rows < low - BOUND_TOLERANCE * span) | (rows > high + BOUND_TOLERANCE * span)
    bad = np.flatnonzero(outside.any(axis=1))
    if len(bad):
        raise InvalidInputError(f"{source}: {len(bad)} {split} row(s) have a {column} outside the action space "
                                f"[{low.min():g}, {high.max():g}] (first: row {int(bad[0])}, "
                                f"{rows[bad[0]].tolist()[:8]})",
                                hint="the env clips such actions, so a policy fitted to them learns what it never "
                                     "plays: fix the source, or serialize it with the action space it was recorded in")
