"""The exact Q-values of a FrozenLake Q dataset as evaluation uses them (agreement, q-greedy, the exact rate).
Reading dataset folders in general goes through :class:`rlft.datasets.dataset.RlftDataset`."""

from __future__ import annotations

import numpy as np

from rlft.core.errors import InvalidInputError
from rlft.datasets.dataset import RlftDataset
from rlft.datasets.loading import column_array


class QTable:
    """Exact Q-values of a FrozenLake Q dataset: greedy action and optimal set per state."""

    def __init__(self, data: RlftDataset, n_states: int):
        path = data.path
        table = data.table(["state", "q_values", "optimal_actions"])
        states = column_array(table, "state").astype(np.int64)
        q = column_array(table, "q_values")
        optimal = table.column("optimal_actions").to_pylist()
        if len(states) and (states.max() >= n_states or states.min() < 0):
            raise InvalidInputError(f"{path}: state {states.max()} is outside the environment's {n_states} states")
        bad = np.flatnonzero(~np.isfinite(np.asarray(q, dtype=np.float64)).all(axis=1))
        if len(bad):
            raise InvalidInputError(f"{path}: {len(bad)} row(s) have non-finite Q-values (first: state "
                                    f"{int(states[bad[0]])}, {q[bad[0]].tolist()}), so greedy actions are undefined",
                                    hint="re-export them with rlft data export-q")
        self.source = str(path)
        self.greedy = np.zeros(n_states, dtype=np.int64)  # terminal states (absent) never ask for an action
        self.greedy[states] = q.argmax(axis=1)
        self.optimal: dict[int, set[int]] = {int(s): set(map(int, o)) for s, o in zip(states, optimal, strict=True)}
        info = data.info
        # The optimal policy's exact success probability within the dataset's step limit (rlft data export-q).
        self.exact_success: float | None = info.get("exact_success")
        self.horizon: int | None = info.get("max_episode_steps")

    def exact_success_within(self, max_episode_steps: int | None) -> float | None:
        """The exact optimal success rate when an evaluation's step limit is the one it was computed for."""
        if self.exact_success is None or (max_episode_steps is not None and max_episode_steps != self.horizon):
            return None
        return float(self.exact_success)

    def agrees(self, state: int, action: int) -> bool | None:
        """Is ``action`` optimal in ``state``? None for a state the dataset has no row for."""
        best = self.optimal.get(int(state))
        return None if best is None else int(action) in best


