"""``rlft``: collect, serialize, publish, train and evaluate. ``rlft --help`` imports nothing heavy."""

from __future__ import annotations

import atexit
import gc
import os
import sys

import typer

from rlft import __version__
from rlft.cli import data, expert, model, pipeline, results, train
from rlft.cli import eval as eval_cli
from rlft.cli.common import print_usage_error
from rlft.core.net import abandoned_requests
from rlft.core.secrets import redact_argv


def _fold_option_names() -> None:
    """Option names in ``--help`` wrap instead of ending in "…" on a narrow terminal: typer builds each name cell
    with its module's ``highlighter``; a Text's own overflow wins over the table column's ellipsis."""
    from typer import rich_utils

    def folding(highlight):
        def fold(text):
            rendered = highlight(text)
            rendered.overflow = "fold"
            return rendered

        fold.rlft_folds = True
        return fold

    for name in ("highlighter", "negative_highlighter"):
        highlight = getattr(rich_utils, name, None)
        if highlight is not None and not getattr(highlight, "rlft_folds", False):
            setattr(rich_utils, name, folding(highlight))


_fold_option_names()


def _one_line_usage_errors() -> None:
    """typer prints a click usage error through ``rich_utils.rich_format_error`` (usage, hint and a box); rlft's
    errors are one line (docs/cli.md), so usage errors are too."""
    from typer import rich_utils

    rich_utils.rich_format_error = print_usage_error


_one_line_usage_errors()

app = typer.Typer(
    name="rlft",
    help="RL experience in, LLM policies out: datasets, codecs, SFT/GRPO training and evaluation.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    rich_markup_mode="rich",
)
app.add_typer(data.app, name="data", help="Collect, export, serialize, inspect and publish datasets.")
app.add_typer(expert.app, name="expert", help="Train and evaluate Stable-Baselines3 experts.")
app.add_typer(model.app, name="model", help="Create, fetch and merge language models without the Hub.")
app.add_typer(train.app, name="train", help="Fine-tune language models on rlft datasets (SFT, GRPO).")
app.add_typer(eval_cli.app, name="eval", help="Run policies in real environments and compare reports.")
app.add_typer(pipeline.app, name="pipeline", help="Run the YAML pipelines under pipelines/.")
app.add_typer(results.app, name="results", help="Record experiments, summarize seeds, render README tables.")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"rlft {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    """rlft: reinforcement-learning experience as language-model data, and language models as policies."""
    # click has read the command line already; what a tracker records of it later (W&B keeps sys.argv in its run
    # files, uploaded by `wandb sync`) holds no secret typed on it
    sys.argv[:] = redact_argv(sys.argv)


def run() -> None:
    """The ``rlft`` command (``[project.scripts]``): the Typer app, with a quick interpreter exit.

    At exit Python clears every module and runs garbage collections over everything still alive, freeing
    memory the operating system is about to take back; it takes far longer once torch is loaded (the ``model
    init`` row of ``benchmarks/exit.py``). ``gc.freeze()`` as the last exit handler (the first registered runs
    last) leaves what is alive then out of those collections; everything else runs as before: the other exit
    handlers, ``finally`` blocks, files closed by their ``with``. What it skips is only what Python never
    promises at exit (``__del__`` of objects in reference cycles), and rlft writes each output file whole and
    renames it into place before exiting, so no output depends on it. Only the command does this: ``app`` run
    in-process (tests, notebooks) does not.
    """
    atexit.register(gc.freeze)
    try:
        app()
    except SystemExit as exc:
        if not abandoned_requests():
            raise
        # a request left past its deadline still runs (an upload's native threads): the exit handlers run, then
        # the process ends without the finalization that measured 1 crash (SIGSEGV) in 40 timed-out pushes
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(exc.code if isinstance(exc.code, int) else 1)


if __name__ == "__main__":  # pragma: no cover  (python -m rlft.cli.main, as accelerate launch runs it)
    run()
