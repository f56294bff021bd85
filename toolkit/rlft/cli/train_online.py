"""``rlft train online``: PPO / TRPO with a language model as the policy network (registered on ``rlft train``)."""

from __future__ import annotations

from pathlib import Path

import typer

from rlft.cli.common import command
from rlft.cli.train import app


@command(app, "online")
def online(
    env: str = typer.Option(..., "--env", help="Gymnasium env id, e.g. CartPole-v1 or HalfCheetah-v5."),
    out: Path = typer.Option(..., "--out", help="RUN folder to write."),
    algo: str = typer.Option("ppo", "--algo", help="ppo or trpo (sb3-contrib)."),
    backbone: str = typer.Option("mlp", "--backbone", help="Model folder (rlft model init / fetch) or mlp."),
    backbone_mode: str = typer.Option("full", "--backbone-mode", help="frozen, lora or full."),
    lora_r: int = typer.Option(8, "--lora-r", min=1, help="LoRA rank with --backbone-mode lora."),
    codec: str | None = typer.Option(None, "--codec", help="Dataset folder whose codec writes observations."),
    format: str = typer.Option("raw", "--format", help="Without --codec: raw (fixed-precision numbers)."),
    precision: int = typer.Option(2, "--precision", min=0, help="Decimals of the raw codec."),
    timesteps: int | None = typer.Option(None, "--timesteps", help="Environment steps [the RL-Zoo file's]."),
    num_envs: int | None = typer.Option(None, "--num-envs", help="Parallel envs [the RL-Zoo file's]."),
    hyperparams: Path | None = typer.Option(None, "--hyperparams", help="RL-Zoo style YAML [shipped]."),
    eval_episodes: int = typer.Option(10, "--eval-episodes", help="Deterministic episodes at the end."),
    seed: int = typer.Option(0, "--seed", min=0),
    overwrite: bool = typer.Option(False, "--overwrite/--no-overwrite", help="Replace an existing RUN folder."),
) -> None:
    """Online RL (PPO or TRPO) whose policy network is a language model reading codec text; --backbone mlp
    is the plain baseline with everything else identical."""
    from rlft.train.online import train_online
    from rlft.train.online_config import OnlineConfig

    train_online(OnlineConfig(env=env, out=out, algo=algo.lower(), backbone=backbone, backbone_mode=backbone_mode,
                              lora_r=lora_r, codec=codec, format=format, precision=precision, timesteps=timesteps,
                              num_envs=num_envs, hyperparams=hyperparams, eval_episodes=eval_episodes, seed=seed,
                              overwrite=overwrite))
