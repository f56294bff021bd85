"""``rlft train offline``: TD3+BC and IQL with TorchRL (registered on ``rlft train``); its options are the fields
of :class:`rlft.train.offline_config.OfflineConfig`."""

from __future__ import annotations

import typer

from rlft.cli.options import config_command
from rlft.train.offline_config import OfflineConfig

# Its own group, whose commands ``rlft train`` takes in (rlft.cli.train): imports run one way.
app = typer.Typer()


def _run_offline(config: OfflineConfig, ctx: typer.Context) -> None:
    from rlft.train.offline import train_offline

    train_offline(config)


config_command(app, "offline", OfflineConfig, _run_offline, doc="""Offline RL on a dataset's transitions (TD3+BC or
    IQL, TorchRL's losses): the actor (rlft eval --policy offline:RUN) and its critic (Q and V), saved in a RUN
    folder.""")
