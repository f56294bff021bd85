"""Every pipeline and experiment recipe under pipelines/ parses into rlft commands whose options the CLI knows
(click parses each step's argv without running it): a typo in a recipe fails here, not an hour into a run."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
import yaml

from rlft.cli.main import app
from rlft.cli.pipeline import load_pipeline

REPO = Path(__file__).resolve().parents[1]
FILES = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "pipelines").rglob("*.yaml")
               if "steps" in (yaml.safe_load(p.read_text(encoding="utf-8")) or {}))

try:  # typer vendors click: its commands and errors are not the click package's classes
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover - a typer that uses click itself
    from click.exceptions import UsageError


def parse_argv(argv: list[str]) -> None:
    """Walk the command groups, then let click parse the leaf command's options (nothing runs)."""
    command = typer.main.get_command(app)
    ctx = command.make_context("rlft", list(argv), resilient_parsing=True)
    words = list(argv)
    while hasattr(command, "list_commands"):  # a group: the next word names a command...
        if words and words[0].startswith("-"):  # ...or the group runs itself (rlft eval --policy ...)
            command.make_context(command.name, list(words), parent=ctx.parent)
            return
        name = words.pop(0)
        sub = command.get_command(ctx, name)
        assert sub is not None, f"unknown command {name!r} in {argv}"
        command = sub
        group = hasattr(sub, "list_commands")
        ctx = command.make_context(name, list(words) if not group else words[:1], parent=ctx,
                                   resilient_parsing=group)


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
            parse_argv(argv)
        except UsageError as exc:
            pytest.fail(f"{path}: rlft {' '.join(argv)}: {exc.format_message()}")


def test_a_bad_option_is_caught(tmp_path):
    with pytest.raises(UsageError, match="--no-such-option"):
        parse_argv(["train", "sft", "--no-such-option", "1"])
    with pytest.raises(UsageError, match="integer"):
        parse_argv(["eval", "--episodes", "many", "--policy", "random"])
    with pytest.raises(AssertionError, match="unknown command"):
        parse_argv(["data", "exprt-q", "frozenlake"])
