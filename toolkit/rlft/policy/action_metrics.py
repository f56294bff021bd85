"""How far a policy's actions are from recorded ones, in one measure that training checks (``--check-steps``) and
``rlft eval --action-error`` both log: per dimension, the absolute error as a fraction of the dimension's range."""

from __future__ import annotations

from typing import Any

import numpy as np


def action_scale(space: dict[str, Any], recorded: np.ndarray) -> np.ndarray:
    """Per dimension of a Box action space, the width errors are measured against: the space's range where it is
    finite, else the recorded actions' range (else 1)."""
    width = np.asarray(space["high"], float).ravel() - np.asarray(space["low"], float).ravel()
    spread = np.ptp(recorded.reshape(len(recorded), -1), axis=0) if len(recorded) else np.ones_like(width)
    width = np.where(np.isfinite(width) & (width > 0), width, spread)
    return np.where(width > 0, width, 1.0)


def action_errors(actions: list[Any], recorded: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """(states, dims) ``|action - recorded| / scale``; a missing action (None: unparsable) counts 1.0 (a whole
    range off) in every dimension, so invalid answers raise the error instead of leaving the mean."""
    recorded = recorded.reshape(len(recorded), -1)
    out = np.ones(recorded.shape, dtype=float)
    for i, action in enumerate(actions):
        if action is not None:
            out[i] = np.abs(np.asarray(action, float).ravel() - recorded[i]) / scale
    return out


def error_summary(errors: np.ndarray) -> dict[str, Any]:
    """The logged action-error figures: mean over states and dims, mean over the worst tenth of states (by their
    mean over dims), and per dimension."""
    per_state = errors.mean(axis=1)
    worst = np.sort(per_state)[-max(1, len(per_state) // 10):]
    return {"action_error": float(per_state.mean()), "action_error_worst10": float(worst.mean()),
            "action_error_per_dim": [round(float(e), 5) for e in errors.mean(axis=0)]}
