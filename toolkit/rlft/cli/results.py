"""``rlft results``: record an experiment's seed, summarize its seeds, render the README from ``results/``."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from rlft.cli.common import command
from rlft.core.console import console
from rlft.core.errors import InvalidInputError
from rlft.core.seeding import MAX_SEED
from rlft.results.render import pages as default_pages
from rlft.results.render import render_readme, table_markdown

app = typer.Typer(no_args_is_help=True)
_RESULTS_DIR = typer.Option(Path("results"), "--results-dir", help="Folder of committed results.")


def _check_reproduce(command: str | None) -> None:
    """A committed command must be one a reader can run: a recipe's {variable} left in it is a mistake (one such
    summary read `NAME={experiment}`)."""
    import re

    from rlft.core.errors import InvalidInputError

    left = re.findall(r"\{[A-Za-z_][A-Za-z0-9_]*\}", command or "")
    if left:
        raise InvalidInputError(f"--reproduce {command!r} holds the unfilled variable {left[0]}",
                                hint="give the command as a reader would type it")


@command(app, "record")
def record(
    name: str = typer.Argument(..., help="Experiment name: results go to RESULTS_DIR/NAME/."),
    seed: int = typer.Option(..., "--seed", min=0, max=MAX_SEED, help="The seed this run used."),
    report: list[str] = typer.Option([], "--report", help="LABEL=REPORT.json of an rlft eval (repeatable)."),
    run: list[str] = typer.Option([], "--run", help="LABEL=RUN folder of an rlft train (repeatable)."),
    dataset: list[str] = typer.Option([], "--dataset", help="LABEL=DATASET folder whose rlft_info.json facts to "
                                                            "keep (repeatable)."),
    reproduce: str = typer.Option(..., "--reproduce", help="The command that reproduces this seed."),
    paired: list[str] = typer.Option([], "--paired", help="A,B: report A minus report B episode by episode, on the "
                                                          "same episodes (repeatable)."),
    results_dir: Path = _RESULTS_DIR,
) -> None:
    """Write RESULTS_DIR/NAME/seed-SEED.json from the seed's reports, runs and datasets (no weights)."""
    from rlft.core.errors import InvalidInputError
    from rlft.results.record import parse_labelled, write_seed_record

    _check_reproduce(reproduce)
    pairs = [tuple(p.split(",")) for p in paired]
    if any(len(p) != 2 or not all(p) for p in pairs):
        raise InvalidInputError(f"--paired takes A,B (two report labels), got {paired}")
    path = write_seed_record(name, seed, parse_labelled(report, "report"), parse_labelled(run, "run"), results_dir,
                             reproduce, parse_labelled(dataset, "dataset"), pairs)
    console.print(f"recorded seed {seed} of {escape(name)} -> {escape(str(path))}")


@command(app, "summarize")
def summarize(
    name: str = typer.Argument(..., help="Experiment name (RESULTS_DIR/NAME/seed-*.json)."),
    title: str | None = typer.Option(None, help="Title of the README block."),
    description: str | None = typer.Option(None, help="One sentence under the title."),
    reproduce: str | None = typer.Option(None, "--reproduce", help="The command that reproduces every seed."),
    results_dir: Path = _RESULTS_DIR,
) -> None:
    """Aggregate every recorded seed into RESULTS_DIR/NAME/summary.json and summary.png."""
    from rlft.results.summary import summarize as run_summary

    _check_reproduce(reproduce)
    summary = run_summary(name, results_dir, title, description, reproduce)
    console.print(f"[bold]{escape(summary['title'])}[/]: {len(summary['seeds'])} seeds {summary['seeds']}")
    for table in summary["tables"]:
        console.print("\n".join(table_markdown(table)), markup=False, highlight=False)
    for note in summary["notes"]:
        console.print(f"- {escape(note)}")


@command(app, "render")
def render(
    pages: list[Path] | None = typer.Argument(None, help="Pages whose results blocks are rendered (default: "
                                              "README.md and docs/*.md)."),
    readme: Path | None = typer.Option(None, "--readme", help="One page to render (the same as giving it as PAGES)."),
    results_dir: Path = _RESULTS_DIR,
    check: bool = typer.Option(False, "--check", help="Only report blocks that differ from results/ (exit 1)."),
) -> None:
    """Re-render every <!-- results:NAME --> block of the README and the docs pages from RESULTS_DIR."""

    if not results_dir.is_dir():
        raise InvalidInputError(f"--results-dir {results_dir} is not a folder of results",
                                hint="run from the repository root, or give the results/ folder")
    targets = [*(pages or []), *([readme] if readme else [])] or default_pages(Path("."))
    if not targets:
        raise InvalidInputError("no README.md or docs/*.md here to render", hint="run from the repository root, or "
                                "name the pages: rlft results render PAGE.md")
    stale = []
    for page in targets:
        changed = render_readme(page, results_dir, check)
        stale += [f"{page}: {name}" for name in changed]
        console.print(f"{page}: {len(changed)} block(s) " + ("would change" if check else "updated")
                      + (f": {', '.join(changed)}" if changed else ""))
    if check and stale:
        console.print(f"[red]pages differ from {results_dir}/ in: {', '.join(stale)}[/] (run: rlft results render)")
        raise typer.Exit(1)


@command(app, "check")
def check(
    name: str = typer.Argument(..., help="Experiment name (RESULTS_DIR/NAME/seed-*.json: the committed seeds)."),
    record_path: Path = typer.Option(..., "--record", help="The new seed's record (rlft results record's "
                                                           "seed-S.json, e.g. from a fresh clone)."),
    results_dir: Path = _RESULTS_DIR,
) -> None:
    """Does a new seed reproduce NAME? Each policy's headline metric against the 95% prediction interval of the
    committed seeds (the new seed's own record left out); exit 1 when one falls outside."""
    from rlft.results.render import format_value
    from rlft.results.reproduce import LEVEL, check_record

    found = check_record(name, record_path, results_dir)
    fmt = found["format"]
    table = Table(title=f"{name}: seed {found['seed']} against seeds {found['committed_seeds']} ({found['key']}, "
                        f"{LEVEL:.0%} prediction interval)")
    for column in ("policy", "new seed", "expected range", "inside"):
        table.add_column(column)
    for row in found["rows"]:
        low, high = row["interval"] or (None, None)
        expected = f"{format_value(low, fmt)} to {format_value(high, fmt)}" if row["interval"] else "-"
        inside = {True: "[green]yes[/]", False: "[red]no[/]", None: "-"}[row["inside"]]
        value = "not played" if row.get("missing") else format_value(row["value"], fmt)
        table.add_row(row["label"], value, expected, inside)
    console.print(table)
    for data in found["other_data"]:  # why a seed can miss with nothing wrong in the method
        builds = "; ".join(_build_text(b) for b in data["committed"])
        console.print(f"[yellow]seed {found['seed']} trained on another build of {escape(data['dataset'])}[/] "
                      f"({_build_text(data['new'])}; the committed seeds': {builds}): the range is the committed "
                      "build's, so a miss may be the data's, not the method's")
    if not found["reproduced"]:
        outside = [row["label"] for row in found["rows"] if row["inside"] is False and not row.get("missing")]
        missing = [row["label"] for row in found["rows"] if row.get("missing")]
        reasons = ([f"outside the expected range: {', '.join(outside)}"] if outside else []) + \
            ([f"not played (every committed seed has it): {', '.join(missing)}"] if missing else [])
        console.print(f"[red]seed {found['seed']} does not reproduce {escape(name)}[/]: "
                      + escape("; ".join(reasons) or "no policy to check"))
        raise typer.Exit(1)
    console.print(f"seed {found['seed']} reproduces {escape(name)}: every policy inside its expected range")


def _build_text(build) -> str:
    episodes, steps, return_mean = build
    return f"{episodes} episodes, {steps} steps, return mean {return_mean}"
