"""Test settings: one thread per process (two busy threads on two cores slow TRL 50x), offline Hub, temp data."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import tempfile  # noqa: E402

# `datasets` reads its cache location once, at import: point it at a fresh folder before anything imports it.
# Its cache key for a local folder ignores the folder's absolute path, so a shared cache can serve one test's
# rows to another test whose folder has the same name.
os.environ["HF_DATASETS_CACHE"] = tempfile.mkdtemp(prefix="rlft-test-hf-datasets-")

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _isolated_data_paths(tmp_path_factory, monkeypatch):
    """Minari datasets live in a temp dir per test: tests never read or write the user's data."""
    root = tmp_path_factory.mktemp("data-paths")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(root / "minari"))


@pytest.fixture
def cli():
    """Invoke ``rlft`` in-process; returns the click Result (exit_code, output, stderr)."""
    from typer.testing import CliRunner

    from rlft.cli.main import app

    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)

    return invoke

