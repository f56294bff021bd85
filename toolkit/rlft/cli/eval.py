"""``rlft eval``: run a policy in its real environment over K vector envs; ``rlft eval compare`` reports.

    rlft eval --policy llm:RUN --episodes 100 --num-envs 8 --seed 0 --out reports/sft.json
    rlft eval --env FrozenLake-v1 --policy q-greedy --codec datasets/frozenlake-q --episodes 1000
    rlft eval --env CartPole-v1 --policy random --episodes 100 --out reports/random.json
    rlft eval compare reports/random.json reports/sft.json
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from rlft.cli.common import command, given_on_command_line, handle_errors
from rlft.cli.options import with_field_options
from rlft.core.console import console
from rlft.core.errors import InvalidInputError
from rlft.evaluate.config import EvalConfig
from rlft.evaluate.verdict import verdicts
from rlft.train.configs import merge_config

app = typer.Typer(invoke_without_command=True, no_args_is_help=False)


def _evaluate(ctx: typer.Context, **values: Any) -> None:
    """Evaluate a policy (LLM or baseline) in its real environment; subcommand: compare."""
    if ctx.invoked_subcommand is not None:  # its options given before a subcommand did nothing (pass 21, F6)
        given = [p.opts[0] for p in given_on_command_line(ctx)]
        if given:
            raise InvalidInputError(f"{', '.join(given)}: option(s) of rlft eval, which evaluates a policy; rlft eval "
                                    f"{ctx.invoked_subcommand} does not read them",
                                    hint=f"see rlft eval {ctx.invoked_subcommand} --help")
        return
    if values.get("policy") is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(0 if len(ctx.args) == 0 else 2)
    from rlft.evaluate.runner import run_evaluation

    config, _ = merge_config(EvalConfig, None, values, source="the command line")
    run_evaluation(config)


# The options are the fields of EvalConfig (rlft.evaluate.config): one declaration each.
app.callback(invoke_without_command=True)(handle_errors(with_field_options(_evaluate, EvalConfig)))


@command(app, "compare")
def compare(
    reports: list[Path] = typer.Argument(..., help="REPORT.json files."),
    png: Path | None = typer.Option(None, "--png", help="Also draw the reports' headline metric with error bars."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing --png (a PNG image only)."),
) -> None:
    """Print evaluation reports side by side; for FrozenLake LLM reports, say whether the LLM matched the
    optimal policy (agreement 1.0 and success within noise of the exact optimal rate)."""
    from rlft.evaluate.compare import compare_table
    from rlft.evaluate.report_shape import load_report

    if png is not None and png.suffix.lower() != ".png":  # before any output: the error is the only line
        raise InvalidInputError(f"--png must name a .png file, got {png}")
    if png is not None:
        from rlft.core.output_file import check_output_file, is_png

        check_output_file(png, overwrite, "--png", inputs=[("a report", str(p)) for p in reports], ours=is_png)
    loaded = [load_report(p) for p in reports]
    table, notes = compare_table(reports, loaded)
    console.print(table)
    for note in notes:
        console.print(f"[yellow]note:[/] {note}")
    for verdict in verdicts([(p.stem, r) for p, r in zip(reports, loaded, strict=True)]):
        console.print(verdict.line())
    if png is not None:
        from rlft.evaluate.compare import plot_compare

        console.print(f"comparison plot -> {plot_compare([p.stem for p in reports], loaded, png)}")
