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


def _three_seeds(cli, tmp_path: Path) -> Path:
    for seed in range(3):
        _random_report(cli, tmp_path / f"r{seed}.json", seed)
        assert cli("results", "record", "exp", "--seed", str(seed), "--report", f"a={tmp_path / f'r{seed}.json'}",
                   "--results-dir", tmp_path / "res", "--reproduce", "make x").exit_code == 0
    return tmp_path / "res"


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: d["reports"].update(a=[1]), "reports 'a' of"),
    (lambda d: d["reports"]["a"].update(return_mean="x"), "return_mean of reports 'a' in"),
    (lambda d: d.update(runs=[1]), "'runs' of"),
])
def test_a_record_of_the_wrong_shape_is_named_not_a_traceback(cli, tmp_path, edit, message):
    """B5: results check on a record whose report is a list, and summarize on a committed seed with a text score,
    ended in AttributeError / ValueError tracebacks."""
    import json

    res = _three_seeds(cli, tmp_path)
    record = json.loads((res / "exp" / "seed-0.json").read_text())
    edit(record)
    (tmp_path / "new.json").write_text(json.dumps({**record, "seed": 7}))
    result = cli("results", "check", "exp", "--results-dir", res, "--record", tmp_path / "new.json")
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output, result.output
    (res / "exp" / "seed-1.json").write_text(json.dumps(record | {"seed": 1}))
    result = cli("results", "summarize", "exp", "--results-dir", res, "--reproduce", "make x")
    assert result.exit_code == 2 and message in result.output and "seed-1.json" in result.output, result.output


def test_a_run_record_finished_at_a_number_dates_nothing(tmp_path):
    """B5: results record --run of a folder whose rlft_run.json says "finished": 5 (or holds a list) was a TypeError
    traceback; it dates nothing, and a good run beside it still dates the record."""
    import json

    from rlft.core.manifest import RUN_FILE
    from rlft.results.record import recorded_after

    for name, content in [("a", {"finished": 5}), ("b", [1]), ("c", {"finished": "2026-11-01T10:00:00"})]:
        (tmp_path / name).mkdir()
        (tmp_path / name / RUN_FILE).write_text(json.dumps(content))
    assert recorded_after([tmp_path / "a", tmp_path / "b"], now=0.0) == {}
    assert recorded_after([tmp_path / n for n in "abc"], now=0.0) == {"runs_finished": "2026-11-01T10:00:00"}


def _results_page(tmp_path: Path) -> tuple[Path, Path]:
    import json

    results = tmp_path / "results"
    results.mkdir()
    (results / "b.json").write_text(json.dumps({"title": "B", "tables": [
        {"label_header": "k", "columns": [{"key": "v", "label": "v", "format": "x"}],
         "rows": [{"label": "one", "cells": {"v": 2.0}}]}]}))
    return results, tmp_path / "page.md"


@pytest.mark.parametrize("name", ["../outside", "/etc/hostname", "sub/../../outside"])
def test_a_block_naming_a_file_outside_the_results_is_refused(cli, tmp_path, name):
    """B6: <!-- results:../other --> rendered (and so published) a JSON file outside the results folder."""
    import json

    results, page = _results_page(tmp_path)
    (tmp_path / "outside.json").write_text(json.dumps({"title": "private", "tables": []}))
    page.write_text(f"<!-- results:{name} -->\nold\n<!-- /results:{name} -->\n")
    result = cli("results", "render", "--readme", page, "--results-dir", results)
    assert result.exit_code == 2 and "names a file outside" in result.output, result.output
    assert "old" in page.read_text()


def test_render_updates_a_linked_page_where_it_lives_and_keeps_its_permissions(cli, tmp_path):
    """B8: results render replaced a page that is a symlink with a plain file, and a private (0600) page with a
    world-readable one."""
    results, page = _results_page(tmp_path)
    target = tmp_path / "docs-elsewhere.md"
    target.write_text("<!-- results:b -->\nold\n<!-- /results:b -->\n")
    target.chmod(0o600)
    page.symlink_to(target)
    result = cli("results", "render", "--readme", page, "--results-dir", results)
    assert result.exit_code == 0, result.output
    assert page.is_symlink() and "| one | 2.0x |" in target.read_text()
    assert target.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(("step", "message"), [
    ("    args: [1, 2]\n", "'args' is [1, 2], which is not a mapping"),
    ("    skip_if_exists: [a, b]\n", "'skip_if_exists' is ['a', 'b'], which is not a path"),
    ("    enabled: [1]\n", "'enabled' is [1], which is not true or false"),
])
def test_a_step_key_of_the_wrong_kind_is_named_before_any_step_runs(cli, tmp_path, step, message):
    """B9: args or skip_if_exists given as a list were tracebacks; enabled: [1] ran the step (a list is truthy)."""
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text("name: t\nsteps:\n  - command: data export-q frozenlake\n" + step)
    result = cli("pipeline", "run", pipeline, "--out", tmp_path / "out")
    assert result.exit_code == 2 and message in result.output, result.output
    assert not (tmp_path / "out").exists()


def test_final_steps_run_after_the_steps_of_a_pipeline_without_seeds(cli, tmp_path):
    """B10: a pipeline's final: steps never ran unless it had seeds:, and nothing said so."""
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text("name: t\nsteps:\n  - command: data export-q frozenlake\n    args: {out: '{out}/q'}\n"
                        "final:\n  - command: eval\n    args: {policy: random, env: FrozenLake-v1, episodes: 1, "
                        "quiet: true, out: '{out}/final.json'}\n")
    result = cli("pipeline", "run", pipeline, "--out", tmp_path / "out")
    assert result.exit_code == 0 and "final, step 2/2" in " ".join(result.output.split()), result.output
    assert (tmp_path / "out" / "q" / "rlft_codec.json").is_file() and (tmp_path / "out" / "final.json").is_file()


def test_a_lock_being_made_is_not_taken_for_stale(cli, tmp_path):
    """B13: a writer read another's lock in the instant between its creation and its pid being written (empty),
    took it for stale and removed it: both wrote the output. An empty lock is now a lock being made, unless old."""
    import os
    import time

    lock = tmp_path / ".q.rlft-lock"
    lock.write_text("")
    result = cli("data", "export-q", "frozenlake", "--episodes", "1", "--out", tmp_path / "q")
    assert result.exit_code != 0 and "being written by another rlft process" in result.output, result.output
    assert not (tmp_path / "q").exists() and lock.read_text() == ""
    old = time.time() - 60  # a writer killed before it wrote its pid (an older rlft): stale after a while
    os.utime(lock, (old, old))
    result = cli("data", "export-q", "frozenlake", "--episodes", "1", "--out", tmp_path / "q")
    assert result.exit_code == 0 and (tmp_path / "q" / "rlft_codec.json").is_file(), result.output


def test_a_live_lock_removed_by_mistake_is_put_back(tmp_path):
    """B13: two writers that both found a lock stale: the second removed the first one's new, live lock. Taking a
    lock over now renames it away and checks it there; a live writer's goes back in place."""
    import subprocess
    import sys

    from rlft.core.claims import _take_over_stale

    program = tmp_path / "rlft"  # a live process of a program named rlft, other than this one
    program.write_text("import sys\nprint('ready', flush=True)\nsys.stdin.read()\n")
    holder = subprocess.Popen([sys.executable, str(program)], stdin=subprocess.PIPE,  # noqa: S603
                              stdout=subprocess.PIPE)
    assert holder.stdout.readline() == b"ready\n"  # running as rlft (until then /proc shows no command line)
    try:
        lock = tmp_path / ".out.rlft-lock"
        lock.write_text(f"{holder.pid}\n")
        _take_over_stale(lock)
        assert lock.read_text() == f"{holder.pid}\n" and sorted(p.name for p in tmp_path.iterdir()) == [
            ".out.rlft-lock", "rlft"]
    finally:
        holder.communicate(b"")
    _take_over_stale(lock)  # its process is gone: removed
    assert not lock.exists()


def test_a_replaced_report_keeps_its_permissions(cli, tmp_path):
    """B8's neighbour: an eval report the user made private stays private when --overwrite replaces it."""
    report = tmp_path / "r.json"
    _random_report(cli, report)
    report.chmod(0o600)
    result = cli("eval", "--policy", "random", "--env", "CartPole-v1", "--episodes", "1", "--out", report,
                 "--overwrite", "--quiet")
    assert result.exit_code == 0 and report.stat().st_mode & 0o777 == 0o600, result.output
