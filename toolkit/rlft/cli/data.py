"""``rlft data``: export exact FrozenLake Q-values, collect and serialize datasets, inspect and publish."""

from __future__ import annotations

import typer

from rlft.cli import data_minari, data_serialize
from rlft.cli.options import config_command
from rlft.datasets.frozenlake_q.config import ExportQConfig
from rlft.datasets.import_config import ImportConfig
from rlft.datasets.improve_config import ImproveConfig

app = typer.Typer(no_args_is_help=True)


def _run_export_q(config, ctx) -> None:
    from rlft.datasets.frozenlake_q.export import export_frozenlake_q

    export_frozenlake_q(config)


config_command(app, "export-q", ExportQConfig, _run_export_q, doc=ExportQConfig.__doc__)


# Commands defined in their own modules (each its own Typer group) join this one, in the order of --help.
for _group in (data_minari.app, data_serialize.app):
    app.registered_commands += _group.registered_commands


def _run_import(config, ctx) -> None:
    from rlft.datasets.import_rlft4rl import import_rlft4rl

    import_rlft4rl(config)


config_command(app, "import", ImportConfig, _run_import, doc=ImportConfig.__doc__)


def _run_improve(config, ctx) -> None:
    from rlft.core.console import console, kv_table
    from rlft.datasets.improve import improve_dataset

    summary = improve_dataset(config)
    console.print(kv_table(f"Improved labels -> {config.out}", summary))


config_command(app, "improve", ImproveConfig, _run_improve, doc=ImproveConfig.__doc__)
