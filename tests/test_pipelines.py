"""Every pipeline and experiment recipe under pipelines/ parses into rlft commands whose options the CLI knows
(click parses each step's argv without running it): a typo in a recipe fails here, not an hour into a run."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rlft.cli.main import app as root
from rlft.cli.pipeline import load_pipeline, parse_step, preflight

REPO = Path(__file__).resolve().parents[1]
FILES = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "pipelines").rglob("*.yaml")
               if "steps" in (yaml.safe_load(p.read_text(encoding="utf-8")) or {}))

try:  # typer vendors click: its commands and errors are not the click package's classes
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover - a typer that uses click itself
    from click.exceptions import UsageError


def test_the_recipes_are_found():
    assert "pipelines/demo.yaml" in FILES and "pipelines/experiments/demo.yaml" in FILES


@pytest.mark.parametrize("path", FILES)
def test_every_step_is_a_valid_rlft_command(path, tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    _, runs = load_pipeline(Path(path), tmp_path / "out", True, [])
    assert runs
    for _, argv in runs:
        if argv[:2] == ["pipeline", "run"]:  # a nested pipeline: its own steps are checked as a file of this list
            assert argv[2] in FILES
        try:
            parse_step(argv, root)
        except UsageError as exc:
            pytest.fail(f"{path}: rlft {' '.join(argv)}: {exc.format_message()}")
    preflight(runs, root)  # inputs exist or are made by earlier steps (nested pipelines included)


def test_a_bad_option_is_caught(tmp_path):
    with pytest.raises(UsageError, match="--no-such-option"):
        parse_step(["train", "sft", "--no-such-option", "1"], root)
    parse_step(["train", "sft", "--weight-decay", "0.1"], root)  # a field of trl.SFTConfig: TRL takes it
    with pytest.raises(UsageError, match="integer"):
        parse_step(["eval", "--episodes", "many", "--policy", "random"], root)
    with pytest.raises(UsageError, match="unknown command"):
        parse_step(["data", "exprt-q", "frozenlake"], root)


@pytest.mark.parametrize("grpo_args,message", [
    ({"model": "/no/such/model", "reward": "format"}, "--model /no/such/model does not exist"),
    ({"model": "{out}/models/tiny", "reward": "format,q-advntage"}, "unknown reward 'q-advntage'"),
    ({"model": "{out}/models/tiny", "reward": "format", "learning_rte": 1}, "unknown option --learning-rte"),
    ({"model": "{out}/models/tiny", "reward": "format", "dataset": "{out}/datasets/nope"},
     "--dataset {out}/datasets/nope does not exist"),
])
def test_a_bad_recipe_fails_before_any_step_runs(cli, tmp_path, grpo_args, message):
    recipe = {
        "steps": [
            {"command": "data export-q frozenlake", "args": {"out": "{out}/datasets/fl", "episodes": 10}},
            {"command": "model init", "args": {"dataset": "{out}/datasets/fl", "out": "{out}/models/tiny"}},
            {"command": "train grpo", "args": {"dataset": "{out}/datasets/fl", "out": "{out}/runs/grpo", **grpo_args}},
        ],
    }
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    out = tmp_path / "out"
    result = cli("pipeline", "run", path, "--out", out)
    assert result.exit_code == 2
    assert "step 3" in result.output and message.replace("{out}", str(out)) in " ".join(result.output.split())
    assert not out.exists()  # nothing ran: not even the dataset export of step 1
