"""``rlft expert train`` and ``rlft expert eval``: Stable-Baselines3 experts with tuned hyperparameters."""

from __future__ import annotations

from pathlib import Path

import typer

from rlft.cli.common import command
from rlft.cli.options import config_command
from rlft.core.console import console, kv_table
from rlft.core.options import MAX_ENVS, MAX_EPISODES
from rlft.core.seeding import MAX_SEED
from rlft.envs.registry import normalized_score
from rlft.sources.expert_config import ExpertConfig

app = typer.Typer(no_args_is_help=True)


def _run_train(config, ctx) -> None:
    from rlft.sources.experts import train_expert
    from rlft.sources.minari_source import minari_root

    config.algo = config.algo.lower()
    with minari_root(config.data_path):
        meta = train_expert(config).metadata
    rows = {
        "env": meta["env_id"], "algo": meta["algo"], "timesteps": meta["timesteps"],
        "stopped early": meta["stopped_early"], "eval mean return": meta["eval"]["mean_return"],
        "eval std return": meta["eval"]["std_return"], "eval episodes": meta["eval"]["episodes"],
        "normalized score (x100)": meta["normalized_score"] if meta["normalized_score"] is not None else "n/a",
        "train seconds": meta["train_seconds"], "steps/s": meta["steps_per_second"], "checkpoint": str(config.out),
    }
    if meta["replay_dataset"]:
        rows["replay dataset"] = meta["replay_dataset"]
    console.print(kv_table(f"Expert {meta['algo']} on {meta['env_id']}", rows))


config_command(app, "train", ExpertConfig, _run_train, doc=ExpertConfig.__doc__)


@command(app, "eval")
def evaluate(
    checkpoint: Path = typer.Argument(..., help="FILE.zip written by `rlft expert train` (needs FILE.json)."),
    episodes: int = typer.Option(10, "--episodes", min=1, max=MAX_EPISODES, help="Deterministic evaluation episodes."),
    seed: int | None = typer.Option(None, "--seed", min=0, max=MAX_SEED,
                                    help="Seed of the first episode (default: the training one)."),
    num_envs: int = typer.Option(8, "--num-envs", min=1, max=MAX_ENVS, help="Envs stepped together with batched "
                                                                          "inference."),
) -> None:
    """Evaluate a saved expert: mean/std return and normalized score."""
    from rlft.core.seeding import limit_threads
    from rlft.sources.experts import evaluate_expert

    limit_threads()
    ev, meta = evaluate_expert(checkpoint, episodes, seed, num_envs)
    score = normalized_score(meta["env_id"], ev.mean)
    rows = {
        "env": meta["env_id"], "algo": meta.get("algo"), "episodes": ev.episodes, "first seed": ev.seed,
        "mean return": ev.mean, "std return": ev.std, "min return": min(ev.returns), "max return": max(ev.returns),
        "mean length": float(sum(ev.lengths) / len(ev.lengths)),
        "normalized score (x100)": score if score is not None else "n/a",
    }
    console.print(kv_table(f"Evaluation of {checkpoint}", rows))
