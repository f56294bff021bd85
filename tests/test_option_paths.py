"""Every path option of every command, given a bad path, is one clear line and changes nothing (issue #28).

One table over the commands: each row is a command with good arguments and the one path option under test; each
bad value (a path that does not exist, a file where a folder is wanted or the reverse, an empty folder, an output
that is one of the inputs) must exit 1 or 2 with a message, never a traceback, and leave every input as it was. A
test at the end checks that the table names every path-like option of the command tree, so a new one is added
here or fails."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import typer

from rlft.cli.main import app

MISSING, FILE, EMPTY, INPUT_OUT = "missing", "file", "empty-folder", "out-is-input"

# (command with {placeholders}, the option under test, the bad values it gets). {bad} is the value under test,
# {out} a fresh output path, and {lake} {model} {run} {expert} {report} {pipeline} the inputs the world holds.
CASES = [
    ("data serialize {bad} --out {out}", "source", [MISSING, FILE, EMPTY]),
    ("data serialize {minari} --out {bad} --overwrite", "--out", [INPUT_OUT]),
    ("data import rlft4rl {bad} --env FrozenLake-v1 --out {out}", "path", [MISSING, EMPTY]),
    ("data import rlft4rl {report} --env FrozenLake-v1 --out {bad}", "--out", [FILE]),
    ("data serialize {minari} --out {out} --card-extra {bad}", "--card-extra", [MISSING, EMPTY]),
    ("data improve {bad} --expert {expert} --out {out}", "dataset", [MISSING, FILE, EMPTY]),
    ("data improve {lake} --expert {bad} --out {out}", "--expert", [MISSING, EMPTY]),
    ("data improve {lake} --expert {expert} --out {bad} --overwrite", "--out", [INPUT_OUT]),
    ("data push {bad} --repo-id me/x", "folder", [MISSING, FILE, EMPTY]),
    ("data info {bad}", "dataset", [MISSING, FILE, EMPTY]),
    ("data export-q frozenlake --out {out} --card-extra {bad}", "--card-extra", [MISSING, EMPTY]),
    ("data export-q frozenlake --out {out} --csv {bad}", "--csv", [EMPTY]),
    ("data export-q frozenlake --out {bad}", "--out", [FILE]),
    ("data collect --env CartPole-v1 --policy {bad} --episodes 1 --dataset-id a/b-v0", "--policy",
     [MISSING, EMPTY]),
    ("data collect --env CartPole-v1 --episodes 1 --dataset-id a/b-v0 --data-path {bad}", "--data-path", [FILE]),
    ("data combine a/b-v0 a/c-v0 --dataset-id a/d-v0 --data-path {bad}", "--data-path", [FILE]),
    ("expert eval {bad}", "checkpoint", [MISSING, FILE, EMPTY]),
    ("expert train --env CartPole-v1 --timesteps 64 --out {out} --hyperparams {bad}", "--hyperparams",
     [MISSING, EMPTY]),
    ("expert train --env CartPole-v1 --timesteps 64 --out {bad} --overwrite", "--out", [EMPTY]),
    ("expert train --env CartPole-v1 --algo dqn --timesteps 64 --out {out} --record-replay a/b-v0 --data-path {bad}",
     "--data-path", [FILE]),
    ("model init --dataset {bad} --out {out}", "--dataset", [MISSING, FILE, EMPTY]),
    ("model init --dataset {lake} --out {bad} --overwrite", "--out", [INPUT_OUT]),
    ("model merge {bad} --out {out}", "run", [MISSING, FILE, EMPTY]),
    ("model merge {run} --out {bad} --overwrite", "--out", [INPUT_OUT]),
    ("model add-bins --model {model} --dataset {bad} --out {out}", "--dataset", [MISSING, FILE, EMPTY]),
    ("model add-bins --model {bad} --dataset {lake} --out {out}", "--model", [MISSING, FILE, EMPTY]),
    ("model add-bins --model {model} --dataset {lake} --out {bad} --overwrite", "--out", [INPUT_OUT]),
    ("model fetch smollm2-135m-instruct --gguf {bad} --out {out}", "--gguf", [MISSING, EMPTY]),
    ("model fetch smollm2-135m-instruct --out {bad}", "--out", [FILE]),
    ("pipeline run {bad} --out {out}", "path", [MISSING, EMPTY]),
    ("pipeline run pipelines/demo.yaml --out {bad}", "--out", [FILE]),
    ("results record x --seed 0 --reproduce y --report a={bad} --results-dir {out}", "--report", [MISSING, EMPTY]),
    ("results record x --seed 0 --reproduce y --run a={bad} --results-dir {out}", "--run", [MISSING, FILE]),
    ("results record x --seed 0 --reproduce y --dataset a={bad} --results-dir {out}", "--dataset",
     [MISSING, FILE]),
    ("results record x --seed 0 --reproduce y --report a={report} --results-dir {bad}", "--results-dir", [FILE]),
    ("results render --check --results-dir {bad}", "--results-dir", [MISSING, FILE]),
    ("results summarize x --results-dir {bad}", "--results-dir", [MISSING, FILE, EMPTY]),
    ("results check x --record {bad} --results-dir {out}", "--record", [MISSING, FILE, EMPTY]),
    ("results check x --record {report} --results-dir {bad}", "--results-dir", [MISSING, FILE]),
    ("train bc --dataset {bad} --out {out}", "--dataset", [MISSING, FILE, EMPTY]),
    ("train offline --dataset {bad} --out {out}", "--dataset", [MISSING, FILE, EMPTY]),
    ("train offline --dataset {lake} --out {bad} --overwrite", "--out", [INPUT_OUT]),
    ("train bc --dataset {lake} --out {bad} --overwrite", "--out", [INPUT_OUT]),
    ("train sft --dataset {bad} --model {model} --out {out}", "--dataset", [MISSING, FILE, EMPTY]),
    ("train sft --dataset {lake} --model {bad} --out {out}", "--model", [MISSING, FILE, EMPTY]),
    ("train sft --dataset {lake} --model {model} --out {out} --config {bad}", "--config", [MISSING, EMPTY]),
    ("train sft --dataset {lake} --model {model} --out {bad} --overwrite", "--out", [INPUT_OUT]),
    ("train grpo --dataset {bad} --model {model} --out {out}", "--dataset", [MISSING, FILE, EMPTY]),
    ("train grpo --dataset {lake} --model {bad} --out {out}", "--model", [MISSING, FILE, EMPTY]),
    ("train grpo --dataset {lake} --model {model} --out {out} --config {bad}", "--config", [MISSING, EMPTY]),
    ("train grpo --dataset {lake} --model {run} --out {bad} --overwrite", "--out", [INPUT_OUT]),
    ("train online --env FrozenLake-v1 --backbone {bad} --codec {lake} --out {out}", "--backbone",
     [MISSING, FILE, EMPTY]),
    ("train online --env FrozenLake-v1 --backbone {model} --codec {bad} --out {out}", "--codec",
     [MISSING, FILE, EMPTY]),
    ("train online --env CartPole-v1 --out {out} --hyperparams {bad}", "--hyperparams", [MISSING, EMPTY]),
    ("train online --env FrozenLake-v1 --backbone {model} --codec {lake} --out {bad} --overwrite", "--out",
     [INPUT_OUT]),
    ("eval --policy llm:{bad} --episodes 1 --out {out}", "--policy", [MISSING, FILE, EMPTY]),
    ("eval --policy llm:{run} --codec {bad} --episodes 1 --out {out}", "--codec", [MISSING, FILE, EMPTY]),
    ("eval --policy random --env CartPole-v1 --expert {bad} --episodes 1 --out {out}", "--expert",
     [MISSING, EMPTY]),
    ("eval --policy llm:{run} --action-error {bad} --episodes 1 --out {out}", "--action-error",
     [MISSING, FILE, EMPTY]),
    ("eval --policy llm:{run} --episodes 1 --out {bad} --overwrite", "--out", [INPUT_OUT, EMPTY]),
    ("eval --policy random --env CartPole-v1 --episodes 1 --video {bad} --out {out}", "--video", [FILE]),
    ("eval compare {bad}", "reports", [MISSING, FILE, EMPTY]),
    ("eval compare {report} --png {bad}", "--png", [EMPTY]),
]

# options that name no path of the file system (ids and names), and commands whose paths are not options
NOT_PATHS = {"--dataset-id", "--repo-id", "--env", "--algo", "--revision", "--token", "--title", "--name"}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The good inputs: a FrozenLake Q dataset, a tiny model, a short SFT run, a PPO expert, a report and a
    Minari dataset folder, plus the bad paths (a file, an empty folder)."""
    from eval_factories import frozenlake_dataset, sft_run, small_ppo, tiny_model
    from factories import make_minari_dataset
    from rlft.sources.minari_source import minari_root

    root = tmp_path_factory.mktemp("paths")
    lake = frozenlake_dataset(tmp_path_factory)
    model = tiny_model(tmp_path_factory, lake, "paths")
    run = sft_run(tmp_path_factory, lake, model, "paths", steps=2)
    with minari_root(root / "minari"):
        make_minari_dataset("cartpole/paths-v0", episodes=2)
    report = root / "report.json"
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["eval", "--policy", "random", "--env", "CartPole-v1", "--episodes", "2",
                                      "--out", str(report)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    (root / "not-a-folder.txt").write_text("plain text\n")
    (root / "empty").mkdir()
    return {"lake": lake, "model": model, "run": run, "expert": small_ppo(tmp_path_factory), "report": report,
            "minari": root / "minari" / "cartpole" / "paths-v0", "file": root / "not-a-folder.txt",
            "empty": root / "empty", "root": root}


def _bad(kind: str, command: str, world: dict, tmp_path: Path) -> str:
    if kind == MISSING:
        return str(tmp_path / "no" / "such" / "path")
    if kind == FILE:
        return str(world["file"])
    if kind == EMPTY:
        return str(world["empty"])
    # the output named as the command's own input: the first input placeholder in the command
    for name in ("minari", "lake", "run", "model"):
        if "{" + name + "}" in command:
            return str(world[name])
    raise AssertionError(f"no input to aim --out at in {command}")


def _fingerprint(paths: list[Path]) -> str:
    """A hash of every file (path, size, content) under the given paths."""
    digest = hashlib.sha256()
    for top in paths:
        files = sorted(p for p in top.rglob("*") if p.is_file()) if top.is_dir() else [top]
        for path in files:
            digest.update(str(path).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


ROWS = [(command, option, kind) for command, option, kinds in CASES for kind in kinds]


@pytest.mark.parametrize(("command", "option", "kind"), ROWS,
                         ids=[f"{' '.join(c.split()[:2])} {o} {k}" for c, o, k in ROWS])
def test_a_bad_path_is_one_line_and_changes_nothing(cli, world, tmp_path, command, option, kind):
    inputs = [world[k] for k in ("lake", "model", "run", "expert", "report", "minari", "file", "empty")]
    before = _fingerprint(inputs)
    values = {k: str(v) for k, v in world.items()}
    argv = command.format(bad=_bad(kind, command, world, tmp_path), out=tmp_path / "out", **values).split()
    result = cli(*argv)
    assert result.exit_code in (1, 2), result.output
    assert "Traceback" not in result.output and result.output.strip(), result.output
    assert _fingerprint(inputs) == before, f"rlft {' '.join(argv)} changed its inputs"
    assert not any(world["empty"].iterdir()), "a command wrote into the empty folder it was given"


def _path_options() -> set[tuple[str, str]]:
    """(command, option) of every option or argument whose value is a file-system path."""
    found = set()

    def walk(command, words):
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            walk(sub, [*words, name])
        for param in command.params:
            flag = param.opts[0] if param.opts else param.name
            descriptor = getattr(param, "type_descriptor", None)
            annotation = getattr(descriptor, "annotation", None)
            kind = getattr(getattr(param, "type", None), "name", "")  # click's own parameter classes
            typed = annotation is Path or "Path" in str(annotation) or kind == "path"
            named = flag.lstrip("-").replace("-", "_") in ("dataset", "model", "policy", "codec", "backbone",
                                                           "expert", "action_error", "source", "reports",
                                                           "report", "run")
            if (typed or named) and flag not in NOT_PATHS and words:
                found.add((" ".join(words), flag if flag.startswith("-") else param.name))

    walk(typer.main.get_command(app), [])
    return found


def test_the_table_names_every_path_option():
    covered = {(" ".join(c.split()[:2]) if c.split()[0] != "eval" or c.split()[1] == "compare" else "eval", o)
               for c, o, _ in CASES}
    missing = {(cmd, opt) for cmd, opt in _path_options() if (cmd, opt) not in covered}
    # --readme is an older spelling of a page argument of results render; data info takes ids as well as folders
    assert missing <= {("results render", "--readme"), ("results render", "pages")}, sorted(missing)
