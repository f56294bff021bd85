"""``rlft train sft|grpo``: fine-tune a model on an rlft dataset into a RUN folder.

Settings come from the stage dataclass defaults, overridden by ``--config FILE`` (YAML), overridden by the
flags typed on the command line (every flag defaults to "not given"). The same commands run on several GPUs::

    accelerate launch --config_file pipelines/accelerate/zero3.yaml -m rlft.cli.main \\
        train grpo --dataset DIR --model MODEL --out RUN --reward format,q-advantage
"""

from __future__ import annotations

import typer

from rlft.cli import train_bc, train_offline, train_online
from rlft.cli.options import config_command
from rlft.core.errors import InvalidInputError
from rlft.train.grpo.config import GRPOStageConfig
from rlft.train.sft_config import SFTStageConfig
from rlft.train.trl_config import parse_trl_flags

app = typer.Typer(no_args_is_help=True)


def _run_sft(config, ctx: typer.Context) -> None:
    from rlft.train.sft import run_sft

    run_sft(config)


def _run_grpo(config, ctx: typer.Context) -> None:
    from rlft.train.grpo.run import run_grpo

    run_grpo(config)


# The options are the fields of the stage configs (rlft.train.sft_config / grpo_config): one declaration each.
config_command(app, "sft", SFTStageConfig, _run_sft, section="sft", trl_flags=True, doc="""Supervised fine-tuning
    (TRL SFTTrainer) on the prompt/completion columns, loss on the completion.

    Any other field of trl.SFTConfig is a flag too (TRL's name: --weight-decay 0.01, --optim adamw_torch).""")
config_command(app, "grpo", GRPOStageConfig, _run_grpo, section="grpo", trl_flags=True, doc="""GRPO (TRL
    GRPOTrainer) with codec-driven control rewards.

    Any other field of trl.GRPOConfig is a flag too (TRL's name: --max-grad-norm 0.5, --top-k 50).""")


def check_trl_flags(command: str, args: list[str]) -> None:
    """What ``rlft pipeline run`` checks before any step runs: the flags of ``train sft|grpo`` that rlft does not
    declare are fields of TRL's config class (InvalidInputError naming the first that is not)."""

    stages = {"sft": SFTStageConfig, "grpo": GRPOStageConfig}
    if command not in stages:
        raise InvalidInputError(f"unknown option {args[0]}")
    parse_trl_flags(stages[command], args)


# Commands defined in their own modules (each its own Typer group) join this one.
for _group in (train_bc.app, train_offline.app, train_online.app):
    app.registered_commands += _group.registered_commands
