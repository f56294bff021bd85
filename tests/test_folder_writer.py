"""The dataset folder's Parquet writer: splits and shards as the Hub lays them out, written by a thread while
the caller builds the next table, with a failure on either side raised once and nothing left behind."""

from __future__ import annotations

import errno

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rlft.core.errors import OutputError
from rlft.datasets.folder import write_dataset_folder


def _tables(start: int, sizes: list[int], built: list[int] | None = None):
    for size in sizes:
        if built is not None:
            built.append(size)
        yield pa.table({"prompt": [f"p{i}" for i in range(start, start + size)],
                        "step": pa.array(range(start, start + size), pa.int64())})
        start += size


def test_splits_become_shards_in_order_with_their_row_counts(tmp_path):
    out = tmp_path / "ds"
    with write_dataset_folder(out) as folder:
        folder.write_splits({"train": _tables(0, [4, 3, 5]), "test": _tables(100, [2])}, rows_per_shard=5)
        assert folder.rows == {"train": 12, "test": 2}
    names = sorted(p.name for p in (out / "data").iterdir())
    assert names == ["test-00000-of-00001.parquet", "train-00000-of-00003.parquet",
                     "train-00001-of-00003.parquet", "train-00002-of-00003.parquet"]
    shards = [pq.read_table(out / "data" / n) for n in names[1:]]
    assert [s.num_rows for s in shards] == [5, 5, 2]
    assert pa.concat_tables(shards)["step"].to_pylist() == list(range(12))
    assert pq.read_table(out / "data" / names[0])["prompt"].to_pylist() == ["p100", "p101"]


def test_statistics_only_for_numbers(tmp_path):
    """Min/max of every prompt's text would cost a fifth of the write and serve no filter."""
    with write_dataset_folder(tmp_path / "ds") as folder:
        folder.write_split("train", next(_tables(0, [3])))
    meta = pq.ParquetFile(next((tmp_path / "ds" / "data").iterdir())).metadata.row_group(0)
    assert meta.column(0).statistics is None  # prompt
    assert (meta.column(1).statistics.min, meta.column(1).statistics.max) == (0, 2)  # step


def test_an_empty_split_keeps_its_schema(tmp_path):
    with write_dataset_folder(tmp_path / "ds") as folder:
        folder.write_splits({"train": _tables(0, [2]), "test": _tables(0, [0])})
    empty = pq.read_table(tmp_path / "ds" / "data" / "test-00000-of-00001.parquet")
    assert empty.num_rows == 0 and empty.schema.names == ["prompt", "step"]


def test_a_full_disk_in_the_writer_stops_the_building_and_keeps_the_old_folder(tmp_path, monkeypatch):
    out = tmp_path / "ds"
    with write_dataset_folder(out) as folder:
        folder.write_split("train", next(_tables(0, [3])))
        folder.write_info({})  # an output rlft wrote: --overwrite may replace it

    def full(self, table, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pq.ParquetWriter, "write_table", full)
    built: list[int] = []
    with pytest.raises(OutputError, match="the disk is full"), write_dataset_folder(out, overwrite=True) as folder:
        folder.write_splits({"train": _tables(0, [1] * 50, built), "test": _tables(0, [1] * 50, built)})
    assert len(built) < 10  # the building stopped soon after the write failed, it did not run to the end
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]
    assert pq.read_table(out / "data" / "train-00000-of-00001.parquet").num_rows == 3


def test_a_failure_while_building_stops_the_writer(tmp_path):
    def failing():
        yield from _tables(0, [2, 2])
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt), write_dataset_folder(tmp_path / "ds") as folder:
        folder.write_splits({"train": failing(), "test": _tables(0, [1])})
    assert list(tmp_path.iterdir()) == []
