"""One rlft dataset folder as one object (LeRobot's ``LeRobotDatasetMetadata`` in spirit): the name resolved once,
then its codec, info, card and splits read from the folder on demand and kept. Commands open the dataset once
(``RlftDataset.open(name)``) and pass the object down; nothing below them resolves the name again. It is thin: the
reading itself is :mod:`rlft.datasets.loading`'s."""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from rlft.codecs.base import Codec, load_codec
from rlft.core.errors import InvalidInputError
from rlft.datasets.folder import split_names
from rlft.datasets.layout import CARD_FILENAME, DATA_DIR
from rlft.datasets.loading import (
    Transitions,
    column_names,
    dataset_dir,
    dataset_info,
    has_q_values,
    load_dataset_dict,
    observations_actions,
    read_split,
    read_transitions,
    resolve_dataset,
)
from rlft.envs.registry import ReferenceScores, reference_scores


def recorded_name(given: str | os.PathLike) -> str:
    """How a run records a dataset or model it was given: a local folder by its absolute path, anything resolved
    through the Hub by its id."""
    path = Path(given).expanduser()
    return str(path.resolve()) if path.exists() else str(given)


class RlftDataset:
    """A local rlft dataset folder (``path``) and the name it was given by (``given``)."""

    def __init__(self, path: Path, given: str):
        self.path = Path(path)
        self.given = given

    @classmethod
    def open(cls, name: str | os.PathLike, require_codec: bool = True) -> RlftDataset:
        """The dataset ``name`` names: a local folder, or a Hub dataset id downloaded (or taken from the cache).
        Errors are :func:`~rlft.datasets.loading.resolve_dataset`'s. With ``require_codec=False`` an existing
        folder is taken as it is (the rule of :func:`~rlft.datasets.loading.dataset_dir`), and a missing codec
        is only an error when :attr:`codec` is read (``load_codec``'s "no codec file at ...")."""
        path = resolve_dataset(name) if require_codec else dataset_dir(name)
        return cls(path, str(name))

    def __repr__(self) -> str:
        return f"RlftDataset({self.given!r}, path={str(self.path)!r})"

    @cached_property
    def recorded(self) -> str:
        """The dataset as a run records it: the absolute folder when given one, else the Hub id."""
        return recorded_name(self.given)

    @cached_property
    def codec(self) -> Codec:
        """The codec the dataset was written with (``rlft_codec.json``), read once."""
        return load_codec(self.path)

    @cached_property
    def info(self) -> dict[str, Any]:
        """``rlft_info.json`` ({} when the folder has none; a damaged one is an error), read once."""
        return dataset_info(self.path)

    @property
    def env_id(self) -> str | None:
        return self.codec.env_id

    @property
    def reference_scores(self) -> ReferenceScores | None:
        """The random and expert returns a normalized score runs between: the source's own (``ref_min_score`` /
        ``ref_max_score`` of the Minari metadata kept in ``info['source_info']``, what the dataset card shows),
        else rlft's table for the codec's environment (what evaluation reports use), else None."""
        source = self.info.get("source_info") or {}
        low, high = source.get("ref_min_score"), source.get("ref_max_score")
        if low is not None and high is not None:
            return ReferenceScores(float(low), float(high), "the source dataset's metadata (ref_min_score, "
                                                            "ref_max_score)")
        return reference_scores(self.env_id) if self.env_id else None

    @property
    def split_names(self) -> list[str]:
        """The splits with shards under ``data/``, train/validation/test first (the order of :meth:`splits`)."""
        return split_names(self.path)

    def has_split(self, name: str) -> bool:
        return any((self.path / DATA_DIR).glob(f"{name}-*.parquet"))

    def splits(self):
        """All splits as a ``datasets.DatasetDict`` (read from the Parquet shards once, then kept)."""
        if "_splits" not in self.__dict__:
            self._splits = load_dataset_dict(self.path)
        return self._splits

    def split(self, name: str):
        """One split as a ``datasets.Dataset``."""
        data = self.splits()
        if name not in data:
            raise InvalidInputError(f"dataset {self.given} has no split {name!r}",
                                    hint=f"its splits: {', '.join(data)}")
        return data[name]

    def table(self, columns: list[str] | None = None, split: str = "train"):
        """The Parquet shards of ``split`` as one Arrow table (only ``columns`` when given)."""
        return read_split(self.path, columns, split)

    @property
    def card_text(self) -> str | None:
        """The dataset card (README.md), or None when the folder has none."""
        card = self.path / CARD_FILENAME
        return card.read_text(encoding="utf-8") if card.is_file() else None

    def columns(self, split: str = "train") -> list[str]:
        """The columns of ``split``'s rows."""
        return column_names(self.path, split)

    def transitions(self, split: str = "train", max_rows: int | None = None) -> Transitions:
        return read_transitions(self.path, split, max_rows)

    def observations_actions(self, split: str = "train",
                             best_episodes: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        return observations_actions(self.path, split, best_episodes)

    @property
    def has_q_values(self) -> bool:
        """Whether the train split holds FrozenLake's exact Q-values (state, q_values, optimal_actions)."""
        return has_q_values(self.path)
