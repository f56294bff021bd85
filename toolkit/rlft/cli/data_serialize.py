"""``rlft data serialize`` and ``rlft data push``: prompt/completion Hub datasets from Minari sources."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from rlft.cli.common import command, finite_within
from rlft.cli.options import config_command
from rlft.core.console import console
from rlft.core.options import MAX_WAIT_SECONDS
from rlft.datasets.serialize_config import SerializeConfig

# Its own group, whose commands ``rlft data`` takes in (rlft.cli.data): imports run one way.
app = typer.Typer()


def _run_serialize(config, ctx) -> None:
    from rlft.datasets.serialize import serialize

    serialize(config)


config_command(app, "serialize", SerializeConfig, _run_serialize, doc=SerializeConfig.__doc__)


@command(app, "push")
def push(
    folder: Path = typer.Argument(..., help="Dataset folder written by rlft."),
    repo_id: str = typer.Option(..., "--repo-id", help="USER/NAME of the Hub dataset repo."),
    private: bool = typer.Option(False, help="Create the repo as private."),
    revision: str | None = typer.Option(None, help="Branch to push to (created if missing)."),
    token: str | None = typer.Option(None, help="Hub token (default: HF_TOKEN or the saved login)."),
    timeout: float = typer.Option(900.0, "--timeout", callback=finite_within(0.001, MAX_WAIT_SECONDS),
                                  help="Seconds the whole push may take (each request waits at most 60 s)."),
) -> None:
    """Upload a dataset folder (Parquet, card, codec, plots) to the Hugging Face Hub."""
    from rlft.datasets.push import push_dataset

    url = push_dataset(folder, repo_id, private=private, revision=revision, token=token, timeout=timeout)
    console.print(f"[green]Pushed[/] {escape(str(folder))} -> {escape(url)}")
