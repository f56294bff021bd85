"""Multi-process training, really run: ``accelerate launch`` with two processes on the CPU (gloo) for SFT and
GRPO with a tiny model; the RUN folder records two processes, loads, and its LoRA adapter moved off its zero
initialisation. The shipped accelerate configs hold only keys accelerate knows."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
CONFIGS = sorted((REPO / "pipelines" / "accelerate").glob("*.yaml"))


def test_shipped_accelerate_configs_hold_only_keys_accelerate_knows():
    from accelerate.commands.config.config_args import ClusterConfig
    from accelerate.utils import DistributedType

    known = {f.name for f in dataclasses.fields(ClusterConfig)}
    assert {c.name for c in CONFIGS} >= {"multi_gpu.yaml", "zero3.yaml", "multi_process_cpu.yaml"}
    for path in CONFIGS:
        data = yaml.safe_load(path.read_text())
        assert set(data) <= known, (path.name, set(data) - known)
        ClusterConfig(**data)  # accelerate's own config class accepts it
        assert data["distributed_type"] in {t.value for t in DistributedType}, path.name


@pytest.fixture(scope="module")
def lake_and_model(tmp_path_factory):
    from typer.testing import CliRunner

    from rlft.cli.main import app

    root = tmp_path_factory.mktemp("multiprocess")
    runner = CliRunner()
    for args in (["data", "export-q", "frozenlake", "--out", root / "fl", "--episodes", "5"],
                 ["model", "init", "--dataset", root / "fl", "--out", root / "tiny"],
                 # GRPO starts from a model that answers in the format: sampled actions then differ in reward
                 ["train", "sft", "--dataset", root / "fl", "--model", root / "tiny", "--out", root / "sft",
                  "--no-lora", "--max-steps", "30", "--learning-rate", "1e-3", "--batch-size", "16",
                  "--eval-split", "none"]):
        result = runner.invoke(app, [str(a) for a in args])
        assert result.exit_code == 0, result.output
    return root / "fl", {"sft": root / "tiny", "grpo": root / "sft"}


def _launch(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    accelerate = Path(sys.executable).with_name("accelerate")
    cmd = [str(accelerate), "launch", "--config_file", str(REPO / "pipelines/accelerate/multi_process_cpu.yaml"),
           "--num_processes", "2", "-m", "rlft.cli.main", *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def _adapter_moved(run: Path) -> float:
    """The largest |B| of the LoRA adapter (PEFT initialises B to zero: above zero means it learned)."""
    from safetensors.numpy import load_file

    weights = load_file(run / "adapter_model.safetensors")
    return max(float(abs(v).max()) for k, v in weights.items() if "lora_B" in k)


@pytest.mark.slow
@pytest.mark.parametrize("stage,extra", [
    ("sft", ["--eval-split", "none", "--batch-size", "4", "--lora"]),
    ("grpo", ["--reward", "format,q-advantage", "--batch-size", "8", "--num-generations", "4", "--lora"]),
])
def test_two_process_training_on_the_cpu(lake_and_model, tmp_path, stage, extra):
    lake, models = lake_and_model
    model = models[stage]
    run = tmp_path / stage
    done = _launch(["train", stage, "--dataset", str(lake), "--model", str(model), "--out", str(run), "--max-steps",
                    "3", "--save-steps", "1000", "--learning-rate", "1e-2", *extra], cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["processes"] == 2 and summary["global_step"] == 3
    assert json.loads((run / "rlft_run.json").read_text())["status"] == "complete"
    assert _adapter_moved(run) > 0.0
    from rlft.models.run import load_policy_model

    loaded, tokenizer, codec = load_policy_model(str(run))
    assert codec is not None and codec.kind == "frozenlake-grid" and tokenizer.eos_token is not None
    assert sum(p.numel() for p in loaded.parameters()) > 0
