"""Hostile pass 14's findings, each the case that found it: what a user's text, files and flags did to rlft."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console
from rich.errors import MarkupError

from rlft.core.console import console


def _random_report(cli, path: Path, seed: int = 0) -> None:
    result = cli("eval", "--policy", "random", "--env", "CartPole-v1", "--episodes", "1", "--seed", str(seed),
                 "--out", path, "--quiet")
    assert result.exit_code == 0, result.output


def test_text_that_reads_as_a_broken_markup_tag_prints_as_written(cli, tmp_path, capsys):
    """B4: a --title, a pipeline name or an --out path holding "[/]" was a MarkupError traceback after the work."""
    out = tmp_path / "a[/]b"
    _random_report(cli, out / "r.json")
    assert cli("results", "record", "exp", "--seed", "0", "--report", f"a={out / 'r.json'}", "--results-dir",
               tmp_path / "res", "--reproduce", "make x").exit_code == 0
    result = cli("results", "summarize", "exp", "--results-dir", tmp_path / "res", "--reproduce", "make x",
                 "--title", "rows [/] and [/bold] tags")
    assert result.exit_code == 0 and "rows [/] and [/bold] tags" in result.output, result.output
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text("name: 'mine [/x]'\nsteps:\n  - command: eval\n    args: {policy: random, env: CartPole-v1, "
                        "episodes: 1, quiet: true, out: '{out}/[/]r.json'}\n")
    result = cli("pipeline", "run", pipeline, "--out", tmp_path / "p[/]out")
    assert result.exit_code == 0 and "mine [/x]" in result.output, result.output
    assert (tmp_path / "p[/]out" / "[" / "]r.json").exists()


def test_the_console_never_raises_on_markup_it_cannot_parse(capsys):
    """The net under sites that interpolate without escaping: the line prints as written."""
    with pytest.raises(MarkupError):
        Console().print("[bold]x[/] [/]")  # what rich does on its own
    console.print("[bold]x[/] [/]")
    assert "[bold]x[/] [/]" in capsys.readouterr().out
