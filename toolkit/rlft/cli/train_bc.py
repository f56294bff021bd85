"""``rlft train bc``: the behaviour-cloning MLP baseline (registered on ``rlft train``); its options are the
fields of :class:`rlft.train.bc_config.BCConfig`."""

from __future__ import annotations

import typer

from rlft.cli.options import config_command
from rlft.train.bc_config import BCConfig

# Its own group, whose commands ``rlft train`` takes in (rlft.cli.train): imports run one way.
app = typer.Typer()


def _run_bc(config: BCConfig, ctx: typer.Context) -> None:
    from rlft.train.bc import train_bc

    train_bc(config)


config_command(app, "bc", BCConfig, _run_bc, doc="""Behaviour cloning: an MLP on the dataset's raw observations
    and actions (the non-LLM baseline).""")
