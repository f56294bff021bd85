"""What evaluation reads from a dataset folder: its codec, Q-tables, (observation, action) columns."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from rlft.codecs.base import Codec, load_codec
from rlft.core.errors import InvalidInputError
from rlft.hub.layout import DATA_DIR, INFO_FILENAME


def dataset_dir(path: str | os.PathLike) -> Path:
    """A local rlft dataset folder (a Hub dataset id is resolved through the training code's resolver)."""
    local = Path(path).expanduser()
    if local.is_dir():
        return local
    from rlft.train.models import resolve_dataset

    return resolve_dataset(str(path))


def read_split(path: str | os.PathLike, columns: list[str] | None = None, split: str = "train"):
    """The Parquet shards of ``split`` as one Arrow table (only ``columns`` when given)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = Path(path)
    files = sorted((root / DATA_DIR).glob(f"{split}-*.parquet"))
    if not files:
        raise InvalidInputError(f"{root} has no {split} split ({DATA_DIR}/{split}-*.parquet)")
    schema = pq.read_schema(files[0])
    if columns is not None:
        missing = [c for c in columns if c not in schema.names]
        if missing:
            raise InvalidInputError(f"{root} has no column {', '.join(missing)} (columns: {', '.join(schema.names)})")
    return pa.concat_tables([pq.read_table(f, columns=columns) for f in files])


def column_array(table, name: str) -> np.ndarray:
    """A column as numpy: (N,) for scalars, (N, D) for fixed-length lists."""
    import pyarrow as pa

    col = table.column(name).combine_chunks()
    if pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
        n = len(col)
        flat = np.asarray(col.flatten().to_numpy(zero_copy_only=False))
        return flat.reshape(n, -1) if n else flat.reshape(0, 0)
    return np.asarray(col.to_numpy(zero_copy_only=False))


def observation_column(table) -> str:
    for name in ("observation", "state"):
        if name in table.column_names:
            return name
    raise InvalidInputError("the dataset has no observation (or state) column")


def observations_actions(path: str | os.PathLike, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """The dataset's raw observation (or FrozenLake state) and action columns."""
    import pyarrow.parquet as pq

    root = Path(path)
    files = sorted((root / DATA_DIR).glob(f"{split}-*.parquet"))
    names = pq.read_schema(files[0]).names if files else []
    obs_col = "observation" if "observation" in names else "state"
    table = read_split(root, [obs_col, "action"], split)
    return column_array(table, obs_col), column_array(table, "action")


def dataset_info(path: str | os.PathLike) -> dict:
    file = Path(path) / INFO_FILENAME
    if not file.is_file():
        return {}
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return {}


def load_dataset_codec(path: str | os.PathLike) -> Codec:
    return load_codec(dataset_dir(path))


class QTable:
    """Exact Q-values of a FrozenLake Q dataset: greedy action and optimal set per state."""

    def __init__(self, path: str | os.PathLike, n_states: int):
        table = read_split(path, ["state", "q_values", "optimal_actions"])
        states = column_array(table, "state").astype(np.int64)
        q = column_array(table, "q_values")
        optimal = table.column("optimal_actions").to_pylist()
        if len(states) and (states.max() >= n_states or states.min() < 0):
            raise InvalidInputError(f"{path}: state {states.max()} is outside the environment's {n_states} states")
        self.source = str(path)
        self.greedy = np.zeros(n_states, dtype=np.int64)  # terminal states (absent) never ask for an action
        self.greedy[states] = q.argmax(axis=1)
        self.optimal: dict[int, set[int]] = {int(s): set(map(int, o)) for s, o in zip(states, optimal, strict=True)}
        info = dataset_info(path)
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


def has_q_values(path: str | os.PathLike) -> bool:
    import pyarrow.parquet as pq

    files = sorted((Path(path) / DATA_DIR).glob("train-*.parquet"))
    return bool(files) and {"state", "q_values", "optimal_actions"} <= set(pq.read_schema(files[0]).names)
