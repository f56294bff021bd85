"""``rlft data``: export exact FrozenLake Q-values, collect and serialize datasets, inspect and publish."""

from __future__ import annotations

from pathlib import Path

import typer

from rlft.cli import data_minari, data_serialize
from rlft.cli.common import command, finite
from rlft.cli.options import config_command
from rlft.core.errors import InvalidInputError
from rlft.datasets.frozenlake_q.config import ExportQConfig

app = typer.Typer(no_args_is_help=True)

IMPORT_FORMATS = ("rlft4rl",)


def _run_export_q(config, ctx) -> None:
    from rlft.datasets.frozenlake_q.export import export_frozenlake_q

    export_frozenlake_q(config)


config_command(app, "export-q", ExportQConfig, _run_export_q, doc=ExportQConfig.__doc__)


# Commands defined in their own modules (each its own Typer group) join this one, in the order of --help.
for _group in (data_minari.app, data_serialize.app):
    app.registered_commands += _group.registered_commands


@command(app, "import")
def import_(
    source_format: str = typer.Argument(..., metavar="FORMAT", help="rlft4rl (RLFT4RL's JSON-lines SFT file)."),
    path: Path = typer.Argument(..., help="The file to import."),
    env: str = typer.Option(..., "--env", help="Gymnasium id of the environment the file's steps came from."),
    out: Path = typer.Option(..., "--out", help="Dataset folder to write (Hub layout)."),
    validation: float = typer.Option(0.1, callback=finite, help="Share of rows (drawn at random: the file has no "
                                     "episodes) for the validation split."),
    seed: int = typer.Option(0, min=0, help="Seed of the row split."),
    overwrite: bool = typer.Option(False, help="Replace a non-empty --out (atomically)."),
) -> None:
    """Another tool's dataset file -> an rlft dataset folder (codec inferred and saved, card written)."""

    if source_format not in IMPORT_FORMATS:
        raise InvalidInputError(f"data import reads {', '.join(IMPORT_FORMATS)}, not {source_format!r}")
    from rlft.datasets.import_rlft4rl import ImportConfig, import_rlft4rl

    import_rlft4rl(ImportConfig(path=path, env_id=env, out=out, validation=validation, seed=seed,
                                overwrite=overwrite))


@command(app, "improve")
def improve(
    dataset: Path = typer.Argument(..., help="rlft dataset folder with continuous (Box) actions."),
    expert: Path = typer.Option(..., "--expert", help="SB3 checkpoint (.zip) of the data's expert: it continues "
                                                      "after each candidate action (its k-step Q)."),
    out: Path = typer.Option(..., "--out", help="Dataset folder to write (the source's layout and codec)."),
    rows: int = typer.Option(20_000, min=1, help="First rows of --split to relabel (and keep)."),
    split: str = typer.Option("train", help="Split to relabel; the others are copied unchanged."),
    horizon: int = typer.Option(20, min=1, help="Steps each candidate is scored over (the first is its own)."),
    candidates: int = typer.Option(8, min=2, help="Candidates per row: the recorded action and perturbations."),
    noise: float = typer.Option(0.1, callback=finite, help="Perturbation std, as a fraction of each dimension's "
                                                           "half-range."),
    gamma: float = typer.Option(0.99, callback=finite, help="Discount over the horizon."),
    weighting: str = typer.Option("soft", help="soft (candidates weighted by softmax of standardized Q) or best."),
    mirrored: bool = typer.Option(False, help="Draw perturbations in opposite pairs (odd --candidates): the soft "
                                              "label moves only by what the values say."),
    step: float = typer.Option(1.0, callback=finite, help="Move each label this many times the way from the recorded "
                                                          "to the improved action (> 1 extrapolates)."),
    consistency_rows: int = typer.Option(200, min=0, help="Rows relabelled a second time, independently, to measure "
                                                          "the learnable share of the label change (0: skip)."),
    seed: int = typer.Option(0, min=0, help="Seeds the perturbations."),
    overwrite: bool = typer.Option(False, help="Replace a non-empty --out (atomically)."),
) -> None:
    """Q-improved labels: each recorded action moved toward the best of its perturbations under the expert's k-step
    Q, played in the real environment (one step of policy improvement for an imitator to learn)."""

    from rlft.core.console import console, kv_table
    from rlft.datasets.improve import ImproveConfig, improve_dataset

    summary = improve_dataset(ImproveConfig(dataset=dataset, expert=expert, out=out, rows=rows, split=split,
                                            horizon=horizon, candidates=candidates, noise=noise, gamma=gamma,
                                            weighting=weighting, mirrored=mirrored, step=step,
                                            consistency_rows=consistency_rows, seed=seed, overwrite=overwrite))
    console.print(kv_table(f"Improved labels -> {out}", summary))
