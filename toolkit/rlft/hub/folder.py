"""Write a dataset folder atomically: Parquet shards, codec, card, info JSON, plots."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rlft.codecs.base import Codec
from rlft.core.io import atomic_output_dir
from rlft.hub.card import CardSpec, render_card
from rlft.hub.layout import CARD_FILENAME, DATA_DIR, INFO_FILENAME, PLOTS_DIR, shard_path


class DatasetFolderWriter:
    """Collects the parts of one dataset inside a temporary folder that replaces ``out`` on success.

    Use :func:`write_dataset_folder` as a context manager; nothing appears at ``out`` until it exits cleanly.
    """

    def __init__(self, root: Path):
        self.root = root
        self.rows: dict[str, int] = {}
        (root / DATA_DIR).mkdir(parents=True, exist_ok=True)

    def write_split(self, split: str, tables: pa.Table | Iterable[pa.Table], rows_per_shard: int = 500_000):
        """Write one split as Parquet shards ``data/<split>-NNNNN-of-MMMMM.parquet`` (streamed, bounded memory)."""
        if isinstance(tables, pa.Table):
            tables = [tables]
        parts: list[Path] = []
        writer, written, schema = None, 0, None
        try:
            for table in tables:
                if schema is None:
                    schema = table.schema
                offset = 0
                while offset < table.num_rows:
                    if writer is None:
                        parts.append(self.root / DATA_DIR / f".{split}-{len(parts):05d}.part")
                        # no dictionary encoding: prompts are nearly all distinct, so it only costs time
                        writer = pq.ParquetWriter(parts[-1], schema, use_dictionary=False)
                    take = min(rows_per_shard - written, table.num_rows - offset)
                    writer.write_table(table.slice(offset, take).cast(schema))
                    offset += take
                    written += take
                    self.rows[split] = self.rows.get(split, 0) + take
                    if written >= rows_per_shard:
                        writer.close()
                        writer, written = None, 0
        finally:
            if writer is not None:
                writer.close()
        if not parts and schema is not None:  # an empty split still gets one file with its schema
            parts.append(self.root / DATA_DIR / f".{split}-00000.part")
            pq.write_table(schema.empty_table(), parts[-1])
        for i, part in enumerate(parts):
            os.replace(part, shard_path(self.root, split, i, len(parts)))
        self.rows.setdefault(split, 0)

    def save_codec(self, codec: Codec) -> Path:
        return codec.save(self.root)

    def write_info(self, info: dict[str, Any]) -> Path:
        path = self.root / INFO_FILENAME
        path.write_text(json.dumps(info, indent=2, default=_default) + "\n", encoding="utf-8")
        return path

    def plot_path(self, name: str) -> Path:
        (self.root / PLOTS_DIR).mkdir(exist_ok=True)
        return self.root / PLOTS_DIR / name

    def write_card(self, spec: CardSpec) -> Path:
        spec.splits = {s: self.rows[s] for s in spec.splits} if spec.splits else dict(self.rows)
        path = self.root / CARD_FILENAME
        path.write_text(render_card(spec), encoding="utf-8")
        return path


def _default(value):
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serializable: {type(value)}")


class write_dataset_folder:  # noqa: N801 - used like ``open``
    """``with write_dataset_folder(out, overwrite) as w: ...`` -> an atomic :class:`DatasetFolderWriter`."""

    def __init__(self, out: str | os.PathLike, overwrite: bool = False):
        self._ctx = atomic_output_dir(out, overwrite)

    def __enter__(self) -> DatasetFolderWriter:
        return DatasetFolderWriter(self._ctx.__enter__())

    def __exit__(self, *exc) -> bool | None:
        return self._ctx.__exit__(*exc)


def read_parquet(path: str | os.PathLike, columns: list[str] | None = None, memory_map: bool = False):
    """One Parquet shard as an Arrow table; a damaged or foreign file is one clear error naming it."""
    from rlft.core.errors import InvalidInputError

    try:
        return pq.read_table(path, columns=columns, memory_map=memory_map)
    except (pa.ArrowException, OSError) as exc:
        raise InvalidInputError(f"cannot read {path}: not a valid Parquet file ({str(exc).splitlines()[0]})",
                                hint="the dataset folder is damaged: re-create it") from exc


def read_parquet_schema(path: str | os.PathLike):
    """The schema of one Parquet shard, with the same error as :func:`read_parquet`."""
    from rlft.core.errors import InvalidInputError

    try:
        return pq.read_schema(path)
    except (pa.ArrowException, OSError) as exc:
        raise InvalidInputError(f"cannot read {path}: not a valid Parquet file ({str(exc).splitlines()[0]})",
                                hint="the dataset folder is damaged: re-create it") from exc


def load_dataset_folder(root: str | os.PathLike):
    """A local rlft dataset folder as a ``datasets.DatasetDict``, read straight from its Parquet shards.

    No cache is involved: ``datasets.load_dataset(folder)`` caches by the files' modification times, not
    their folder, and a regenerated folder must never be served stale rows.
    """
    import datasets

    from rlft.hub.layout import SPLITS

    data = Path(root) / DATA_DIR
    found = sorted({p.name.split("-")[0] for p in data.glob("*.parquet")}, key=lambda s: (s not in SPLITS, s))
    if not found:
        from rlft.core.errors import InvalidInputError

        raise InvalidInputError(f"no Parquet data under {data}", hint="pass an rlft dataset folder")
    splits = {}
    for split in found:
        tables = [read_parquet(p, memory_map=True) for p in sorted(data.glob(f"{split}-*.parquet"))]
        splits[split] = datasets.Dataset(pa.concat_tables(tables))
    return datasets.DatasetDict(splits)
