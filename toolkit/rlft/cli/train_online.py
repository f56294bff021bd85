"""``rlft train online``: PPO / TRPO with a language model as the policy network (registered on ``rlft train``).

Its options are the fields of :class:`rlft.train.online_config.OnlineConfig`."""

from __future__ import annotations

import dataclasses

import typer

from rlft.cli.options import config_command
from rlft.train.online_config import OnlineConfig

# Its own group, whose commands ``rlft train`` takes in (rlft.cli.train): imports run one way.
app = typer.Typer()


def _run_online(config: OnlineConfig, ctx: typer.Context) -> None:
    from rlft.train.online import train_online

    train_online(dataclasses.replace(config, algo=config.algo.lower()))


config_command(app, "online", OnlineConfig, _run_online, doc="""Online RL (PPO or TRPO) whose policy network is a
    language model reading codec text; --backbone mlp is the plain baseline with everything else identical.""")
