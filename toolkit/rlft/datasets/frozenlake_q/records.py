"""Rows of the FrozenLake Q dataset: one per non-terminal state, with Q-values, ties and prompts."""

from __future__ import annotations

import numpy as np
import pandas as pd

from rlft.codecs.grid import FrozenLakeGridCodec
from rlft.datasets.frozenlake_q.config import COMPLETIONS
from rlft.datasets.frozenlake_q.solve import QSolution
from rlft.envs.frozenlake import ACTION_NAMES, LakeMap, encode_lake, render_grid

Q_COLUMNS = [f"q_value_{name.lower()}" for name in ACTION_NAMES]  # names match the Gemma experiment's CSV
GEMMA_CSV_COLUMNS = ["state", "state_str", "action", *Q_COLUMNS, "v", "optimal_actions", "action_text"]

GLOSSARY = {
    "state": "state index s = row * ncol + col",
    "row": "grid row of the agent (0 = top)",
    "col": "grid column of the agent (0 = left)",
    "state_str": "the grid as text, cells separated by spaces, S marks the agent (the prompt shows this grid, then "
    "the agent's row and column)",
    "action": "an optimal action (0=LEFT 1=DOWN 2=RIGHT 3=UP), the first one in that order when tied (with "
    "--completions all: each action in turn, one row per state and action)",
    "action_name": "the name of `action`",
    "optimal_actions": "every action whose Q is within 1e-9 of the maximum (ties are real: all are optimal)",
    **{col: f"Q*(s, {name}) under the card's gamma" for col, name in zip(Q_COLUMNS, ACTION_NAMES, strict=True)},
    "q_values": "the four Q-values as a list in action order",
    "v": "V*(s) = max_a Q*(s, a)",
    "prompt": "the model input (chat messages or text, see the codec's template)",
    "completion": "`action` in the answer format, e.g. <answer>RIGHT</answer> (with --think preceded by "
    "<think>...</think>: the state's Q-values and which is highest)",
}


def think_text(row: int, col: int, q: np.ndarray, action: int) -> str:
    """A short, true reason for ``action`` at (row, col), drawn from the state's exact Q-values."""
    values = ", ".join(f"{name} {v:.3f}" for name, v in zip(ACTION_NAMES, q, strict=True))
    best = [ACTION_NAMES[i] for i in np.flatnonzero(np.isclose(q, q.max(), rtol=0, atol=1e-9))]
    best_text = best[0] if len(best) == 1 else " and ".join(best) + " (tied)"
    reason = f"At row {row}, column {col} the expected returns are {values}; the highest is {best_text}."
    if ACTION_NAMES[action] not in best:  # --completions all: rows of non-optimal actions say so
        reason += f" This answer is {ACTION_NAMES[action]}, not the best."
    return reason


def _with_think(completion, reason: str):
    if isinstance(completion, list):  # one assistant message
        return [{**completion[-1], "content": f"<think>{reason}</think>{completion[-1]['content']}"}]
    return f"<think>{reason}</think>{completion}"


def build_q_records(lake: LakeMap, solution: QSolution, codec: FrozenLakeGridCodec, atol: float = 1e-9,
                    completions: str = "optimal", think: bool = False):
    """A DataFrame with one row per non-terminal state of ``lake`` (terminal states have no decision).

    ``completions="all"``: one row per (state, action) instead, every action once, for format-only SFT: a model
    trained on it learns the answer format with a uniform, uninformed action distribution (a task-naive start
    for GRPO). ``optimal_actions`` and the Q-values still say which actions are right. ``think``: completions are
    ``<think>REASON</think><answer>ACTION</answer>`` with a reason read from the Q-values (:func:`think_text`).
    """
    if completions not in COMPLETIONS:
        raise ValueError(f"completions must be one of {COMPLETIONS}, got {completions!r}")
    states = np.array([s for s in range(lake.n_states) if not lake.is_terminal(s)], dtype=np.int64)
    q = solution.q[states]
    optimal = solution.optimal_mask(atol)[states]
    action = q.argmax(axis=1)
    if completions == "all":
        n_actions = q.shape[1]
        states, q, optimal = (np.repeat(x, n_actions, axis=0) for x in (states, q, optimal))
        action = np.tile(np.arange(n_actions), len(states) // n_actions)
    frame = pd.DataFrame(
        {
            "state": states,
            "row": states // lake.ncol,
            "col": states % lake.ncol,
            "state_str": [render_grid(lake, s) for s in states],
            "action": action,
            "action_name": [ACTION_NAMES[a] for a in action],
            "optimal_actions": [np.flatnonzero(m).tolist() for m in optimal],
            **{col: q[:, i] for i, col in enumerate(Q_COLUMNS)},
            "q_values": [row.tolist() for row in q],
            "v": q.max(axis=1),
        }
    )
    # a random-maps codec reads the map from the observation: give it the map with the position
    frame["prompt"] = [codec.build_prompt(s if codec.lake is not None else encode_lake(lake.rows, s)) for s in states]
    frame["completion"] = [codec.build_completion(a) for a in action]
    if think:
        frame["completion"] = [_with_think(c, think_text(s // lake.ncol, s % lake.ncol, qs, a))
                               for c, s, qs, a in zip(frame["completion"], states, q, action, strict=True)]
    return frame


def to_gemma_csv(frame: pd.DataFrame) -> pd.DataFrame:
    """The CSV layout of the Gemma FrozenLake GRPO experiment (grid rows joined by ``|``)."""
    out = frame[["state", "state_str", "action", *Q_COLUMNS, "v"]].copy()
    out["state_str"] = out["state_str"].str.replace("\n", "|", regex=False)
    out["optimal_actions"] = [" ".join(ACTION_NAMES[a] for a in acts) for acts in frame["optimal_actions"]]
    # the name of the row's action: the notebook's SFT loader reads this column
    out["action_text"] = [ACTION_NAMES[int(a)] for a in frame["action"]]
    return out[GEMMA_CSV_COLUMNS]
