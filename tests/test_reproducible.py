"""Same pipeline, same seed, same machine: the same dataset, the same training record, the same reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
REPORTS = ("llm-sft", "q-greedy", "random")
RUN_TIMINGS = ("train_runtime_s", "train_steps_per_second", "train_samples_per_second")


def _snapshot(out: Path) -> dict:
    import pyarrow.parquet as pq

    from rlft.evaluate.report import without_timings

    data = sorted((out / "datasets" / "frozenlake-q" / "data").glob("*.parquet"))
    summary = json.loads((out / "runs" / "sft" / "summary.json").read_text())
    return {
        "dataset": [pq.read_table(f).to_pylist() for f in data],
        "dataset_info": json.loads((out / "datasets" / "frozenlake-q" / "rlft_info.json").read_text()),
        "sft": {k: v for k, v in summary.items() if k not in RUN_TIMINGS},
        "reports": {name: without_timings(json.loads((out / "reports" / f"{name}.json").read_text()))
                    for name in REPORTS},
    }


@pytest.mark.slow
def test_demo_pipeline_twice_with_one_seed_gives_identical_results(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)  # the pipeline names pipelines/sft.yaml as a user running it from the checkout would
    out = tmp_path / "demo"
    snapshots = []
    for _ in range(2):
        result = cli("pipeline", "run", "pipelines/demo.yaml", "--out", out, "--overwrite",
                     "--set", "episodes=16", "--set", "seed=3")
        assert result.exit_code == 0, result.output
        snapshots.append(_snapshot(out))
    first, second = snapshots
    assert first["reports"]["llm-sft"]["seed"] == 3000 and first["sft"]["criterion"]["reached"]
    assert first["reports"]["llm-sft"]["seeds"] == list(range(3000, 3016))  # each seed plays its own episodes
    assert first["dataset_info"]["seed"] == 3
    for key in ("dataset", "dataset_info", "sft"):
        assert first[key] == second[key], key
    for name in REPORTS:
        assert first["reports"][name] == second["reports"][name], name
