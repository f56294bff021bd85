"""Every pipeline and experiment recipe under pipelines/ parses into rlft commands whose options the CLI knows
(click parses each step's argv without running it): a typo in a recipe fails here, not an hour into a run."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rlft.cli.main import app as root
from rlft.cli.pipeline import parse_step, preflight
from rlft.cli.pipeline_spec import load_pipeline

REPO = Path(__file__).resolve().parents[1]
FILES = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "pipelines").rglob("*.yaml")
               if {"steps", "extends"} & set(yaml.safe_load(p.read_text(encoding="utf-8")) or {}))

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
    # read as the command reads its options: under another of the option's names too
    ({"model": "{out}/models/tiny", "rewards": "format,q-advntage"}, "unknown reward 'q-advntage'"),
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


def _write(folder: Path, name: str, spec: dict) -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump(spec))
    return path


def test_a_pipeline_extends_another_changing_only_what_it_states(tmp_path):
    _write(tmp_path, "base.yaml", {"name": "base", "vars": {"episodes": 5, "env": "CartPole-v1"},
                                   "presets": {"quick": {"episodes": 1}},
                                   "steps": [{"command": "expert eval x.zip", "args": {"episodes": "{episodes}"}}]})
    child = _write(tmp_path, "child.yaml", {"name": "child", "extends": "base.yaml", "vars": {"episodes": 7,
                                                                                           "quick": False}})
    spec, runs = load_pipeline(child, tmp_path / "out", False, [])
    assert spec["name"] == "child" and runs == [("", ["expert", "eval", "x.zip", "--episodes", "7"])]
    assert spec["vars"] == {"episodes": 7, "env": "CartPole-v1", "quick": False}
    _, runs = load_pipeline(child, tmp_path / "out", False, ["quick=true"])
    assert runs[0][1][-1] == "1"  # the base's preset applies to the child's variables


@pytest.mark.parametrize("case,message", [
    ("circle", "extends itself through a.yaml -> b.yaml -> a.yaml"),
    ("missing", "extends nope.yaml, which is not a file next to it"),
    ("deep", "more than 8 pipelines extend each other in a chain"),
])
def test_extends_refusals(tmp_path, case, message):
    from rlft.core.errors import InvalidInputError

    step = [{"command": "expert eval x.zip"}]
    if case == "circle":
        _write(tmp_path, "a.yaml", {"extends": "b.yaml"})
        _write(tmp_path, "b.yaml", {"extends": "a.yaml", "steps": step})
        start = tmp_path / "a.yaml"
    elif case == "missing":
        start = _write(tmp_path, "a.yaml", {"extends": "nope.yaml"})
    else:
        for i in range(12):
            _write(tmp_path, f"p{i}.yaml", {"extends": f"p{i + 1}.yaml"})
        _write(tmp_path, "p12.yaml", {"steps": step})
        start = tmp_path / "p0.yaml"
    with pytest.raises(InvalidInputError, match=message.replace(".", r"\.")):
        load_pipeline(start, tmp_path / "out", False, [])


@pytest.mark.parametrize("path,section", [("pipelines/sft.yaml", "sft"), ("pipelines/grpo.yaml", "grpo")])
def test_stage_config_files_state_only_what_differs_from_the_defaults(path, section):
    """A key repeating its dataclass default is a second place the default lives, and goes stale when it moves."""
    import dataclasses

    from rlft.train.grpo.config import GRPOStageConfig
    from rlft.train.sft_config import SFTStageConfig

    config = {"sft": SFTStageConfig, "grpo": GRPOStageConfig}[section]
    defaults = {f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
                for f in dataclasses.fields(config)
                if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING}
    defaults.update({name: default.value for name, default in config.trl_defaults.items()})  # TRL's, rlft's defaults
    given = yaml.safe_load((REPO / path).read_text())[section]
    unknown = [k for k in given if k not in defaults]
    assert not unknown, f"{path}: {unknown} are not fields of {config.__name__}"
    repeated = [k for k, v in given.items() if v == defaults[k] or [v] == defaults[k]]
    assert not repeated, f"{path} repeats the defaults of {repeated}"
