"""``rlft train bc``: the behaviour-cloning MLP baseline (registered on ``rlft train``)."""

from __future__ import annotations

from pathlib import Path

import typer

from rlft.cli.common import command
from rlft.cli.train import app


@command(app, "bc")
def bc(
    dataset: str = typer.Option(..., "--dataset", help="rlft dataset folder (observation/action columns)."),
    out: Path = typer.Option(..., "--out", help="Policy file to write, e.g. bc.pt."),
    hidden: str = typer.Option("64,64", "--hidden", help="Hidden layer sizes."),
    epochs: int = typer.Option(30, "--epochs", help="Passes over the training rows."),
    batch_size: int = typer.Option(256, "--batch-size"),
    learning_rate: float = typer.Option(1e-3, "--learning-rate"),
    val_fraction: float = typer.Option(0.1, "--val-fraction", help="Rows held out to report accuracy/error."),
    split: str = typer.Option("train", "--split", help="Dataset split to train on."),
    seed: int = typer.Option(0, "--seed", min=0),
    overwrite: bool = typer.Option(False, "--overwrite/--no-overwrite", help="Replace an existing --out."),
) -> None:
    """Behaviour cloning: an MLP on the dataset's raw observations and actions (the non-LLM baseline)."""
    from rlft.core.errors import InvalidInputError
    from rlft.train.bc import BCConfig, train_bc

    try:
        sizes = [int(h) for h in hidden.replace(" ", "").split(",") if h]
    except ValueError as exc:
        raise InvalidInputError(f"--hidden must be comma-separated integers, got {hidden!r}") from exc
    train_bc(BCConfig(dataset=dataset, out=out, hidden=sizes, epochs=epochs, batch_size=batch_size,
                      learning_rate=learning_rate, val_fraction=val_fraction, split=split, seed=seed,
                      overwrite=overwrite))
