"""Write a dataset folder atomically: Parquet shards, codec, card, info JSON, plots."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rlft.codecs.base import Codec
from rlft.core.errors import InvalidInputError
from rlft.core.io import atomic_output_dir
from rlft.datasets.card import CardSpec, render_card
from rlft.datasets.layout import CARD_FILENAME, DATA_DIR, INFO_FILENAME, PLOTS_DIR, SPLITS, shard_path


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
        self.write_splits({split: [tables] if isinstance(tables, pa.Table) else tables}, rows_per_shard)

    def write_splits(self, splits: dict[str, Iterable[pa.Table]], rows_per_shard: int = 500_000):
        """Write several splits, each as :meth:`write_split` does. The tables are built (the iterables consumed)
        in this thread while a writer thread encodes and compresses the previous ones: Parquet does that without
        the GIL, so building and writing overlap on two cores (``benchmarks/serialize.py`` measures the command).
        At most two built tables wait, so memory stays bounded; a write error stops the building and is raised
        here."""
        with _ShardWriter(self, rows_per_shard) as writer:
            for split, tables in splits.items():
                writer.start(split)
                for table in tables:
                    writer.put(table)

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


class _ShardWriter:
    """The writer thread behind :meth:`DatasetFolderWriter.write_splits`: it writes what :meth:`put` queues as
    shards of the split named by the last :meth:`start`, and renames a split's parts once it is complete."""

    _DONE = object()

    def __init__(self, folder: DatasetFolderWriter, rows_per_shard: int):
        self.folder, self.rows_per_shard = folder, rows_per_shard
        self.queue: queue.Queue = queue.Queue(maxsize=2)
        self.error: BaseException | None = None
        self.parts: list[Path] = []
        self.schema: pa.Schema | None = None
        self.writer: pq.ParquetWriter | None = None
        self.written = 0
        self.thread = threading.Thread(target=self._run, name="rlft-parquet-writer", daemon=True)

    def __enter__(self) -> _ShardWriter:
        self.thread.start()
        return self

    def start(self, split: str) -> None:
        self._send(("split", split))

    def put(self, table: pa.Table) -> None:
        self._send(("table", table))

    def _send(self, item) -> None:
        while self.error is None:  # a writer that failed takes nothing more: never block on its full queue
            try:
                self.queue.put(item, timeout=0.05)
                return
            except queue.Full:
                continue
        raise self.error

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None and self.error is None:
            self.error = exc  # the building failed: the writer stops at its next item (the folder is discarded)
        while self.thread.is_alive():  # wake it; a writer that has stopped takes nothing more
            try:
                self.queue.put(self._DONE, timeout=0.05)
                break
            except queue.Full:
                continue
        self.thread.join()
        if exc_type is None and self.error is not None:
            raise self.error

    def _run(self) -> None:
        split = None
        try:
            while (item := self.queue.get()) is not self._DONE and self.error is None:
                kind, value = item
                if kind == "split":
                    self._finish(split)
                    split, self.parts, self.schema, self.writer, self.written = value, [], None, None, 0
                else:
                    self._write(split, value)
            if self.error is None:
                self._finish(split)
        except BaseException as exc:  # noqa: BLE001 - handed to the building thread, which raises it
            self.error = exc
        if self.error is not None and self.writer is not None:  # the folder is discarded: just let go of it
            with contextlib.suppress(Exception):
                self.writer.close()

    def _write(self, split: str, table: pa.Table) -> None:
        root, rows = self.folder.root, self.folder.rows
        self.schema = self.schema or table.schema
        offset = 0
        while offset < table.num_rows:
            if self.writer is None:
                self.parts.append(root / DATA_DIR / f".{split}-{len(self.parts):05d}.part")
                self.writer = _parquet_writer(self.parts[-1], self.schema)
            take = min(self.rows_per_shard - self.written, table.num_rows - offset)
            self.writer.write_table(table.slice(offset, take).cast(self.schema))
            offset += take
            self.written += take
            rows[split] = rows.get(split, 0) + take
            if self.written >= self.rows_per_shard:
                self.writer.close()
                self.writer, self.written = None, 0

    def _finish(self, split: str | None) -> None:
        """Close the split's last shard and give its parts their final names (``-NNNNN-of-MMMMM``)."""
        if split is None:
            return
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        root = self.folder.root
        if not self.parts and self.schema is not None:  # an empty split still gets one file with its schema
            self.parts.append(root / DATA_DIR / f".{split}-00000.part")
            pq.write_table(self.schema.empty_table(), self.parts[-1])
        for i, part in enumerate(self.parts):
            os.replace(part, shard_path(root, split, i, len(self.parts)))
        self.folder.rows.setdefault(split, 0)


def _parquet_writer(path: Path, schema: pa.Schema) -> pq.ParquetWriter:
    """No dictionary encoding (prompts are nearly all distinct, so it only costs time), and min/max statistics
    only for integer, float and boolean columns: nobody filters on a prompt's lexical range (or on a list), and
    computing it for the text was a fifth of the write."""
    stats = [f.name for f in schema
             if pa.types.is_integer(f.type) or pa.types.is_floating(f.type) or pa.types.is_boolean(f.type)]
    return pq.ParquetWriter(path, schema, use_dictionary=False, write_statistics=stats)


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

    try:
        return pq.read_table(path, columns=columns, memory_map=memory_map)
    except (pa.ArrowException, OSError) as exc:
        raise InvalidInputError(f"cannot read {path}: not a valid Parquet file ({str(exc).splitlines()[0]})",
                                hint="the dataset folder is damaged: re-create it") from exc


def read_parquet_schema(path: str | os.PathLike):
    """The schema of one Parquet shard, with the same error as :func:`read_parquet`."""

    try:
        return pq.read_schema(path)
    except (pa.ArrowException, OSError) as exc:
        raise InvalidInputError(f"cannot read {path}: not a valid Parquet file ({str(exc).splitlines()[0]})",
                                hint="the dataset folder is damaged: re-create it") from exc


def split_names(root: str | os.PathLike) -> list[str]:
    """The splits with shards under ``data/``, train/validation/test first."""
    found = {p.name.split("-")[0] for p in (Path(root) / DATA_DIR).glob("*.parquet")}
    return sorted(found, key=lambda s: (s not in SPLITS, s))


def load_dataset_folder(root: str | os.PathLike):
    """A local rlft dataset folder as a ``datasets.DatasetDict``, read straight from its Parquet shards.

    No cache is involved: ``datasets.load_dataset(folder)`` caches by the files' modification times, not
    their folder, and a regenerated folder must never be served stale rows.
    """
    import datasets


    data = Path(root) / DATA_DIR
    found = split_names(root)
    if not found:

        raise InvalidInputError(f"no Parquet data under {data}", hint="pass an rlft dataset folder")
    splits = {}
    for split in found:
        tables = [read_parquet(p, memory_map=True) for p in sorted(data.glob(f"{split}-*.parquet"))]
        splits[split] = datasets.Dataset(pa.concat_tables(tables))
    return datasets.DatasetDict(splits)
