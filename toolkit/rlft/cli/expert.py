"""``rlft expert train`` and ``rlft expert eval``: Stable-Baselines3 experts with tuned hyperparameters."""

from __future__ import annotations

import contextlib
from pathlib import Path

import typer

from rlft.cli.common import command, finite
from rlft.core.console import console, kv_table
from rlft.envs.registry import normalized_score

app = typer.Typer(no_args_is_help=True)


@command(app, "train")
def train(
    env: str = typer.Option(..., "--env", help="Gymnasium env id, e.g. CartPole-v1, HalfCheetah-v5."),
    algo: str = typer.Option("ppo", "--algo", help="ppo, sac, tqc (sb3-contrib), dqn, or auto: ppo (discrete "
                             "actions) or sac (Box), else the algorithm with tuned settings for the env."),
    out: Path = typer.Option(..., "--out", help="Checkpoint FILE.zip; metadata goes to FILE.json."),
    timesteps: int | None = typer.Option(None, "--timesteps", help="Env steps (default: n_timesteps of the file)."),
    seed: int = typer.Option(0, "--seed", min=0, help="Seed of training envs, networks and evaluation."),
    num_envs: int | None = typer.Option(None, "--num-envs", help="Vectorised training envs (default: file)."),
    stop_at_return: float | None = typer.Option(
        None, "--stop-at-return", callback=finite, help="Stop once the periodic evaluation's mean return reaches this."
    ),
    eval_episodes: int = typer.Option(10, "--eval-episodes", help="Episodes of the final evaluation."),
    eval_freq: int = typer.Option(10_000, "--eval-freq", help="Env steps between periodic evaluations (0: none)."),
    eval_freq_episodes: int = typer.Option(5, "--eval-freq-episodes", help="Episodes per periodic evaluation."),
    hyperparams: Path | None = typer.Option(
        None, "--hyperparams", help="YAML keyed by env id (default: the shipped rlft/sources/zoo/<algo>.yaml)."
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing checkpoint (and replay dataset)."),
    record_replay: str | None = typer.Option(
        None, "--record-replay", help="Also write the run's whole replay buffer as this Minari dataset id "
        "(namespace/name-vN): every transition seen while training, D4RL's medium-replay kind (sac, tqc, dqn)."),
    data_path: Path | None = typer.Option(None, "--data-path", help="Minari datasets folder --record-replay writes "
                                          "into (default: $MINARI_DATASETS_PATH, else ~/.minari/datasets)."),
    report_to: str = typer.Option("none", "--report-to", help="none or tensorboard (FILE_tb/ beside the "
                                                              "checkpoint: SB3's training curves)."),
) -> None:
    """Train an SB3 expert, evaluate it, and save FILE.zip + FILE.json."""
    from rlft.sources.experts import ExpertConfig, train_expert
    from rlft.sources.minari_source import minari_root

    config = ExpertConfig(
        env_id=env, out=out, algo=algo.lower(), timesteps=timesteps, seed=seed, num_envs=num_envs,
        stop_at_return=stop_at_return, eval_episodes=eval_episodes, eval_freq=eval_freq,
        eval_freq_episodes=eval_freq_episodes, hyperparams=hyperparams, overwrite=overwrite,
        record_replay=record_replay, report_to=report_to,
    )
    with minari_root(data_path) if data_path is not None else contextlib.nullcontext():
        meta = train_expert(config).metadata
    rows = {
        "env": meta["env_id"], "algo": meta["algo"], "timesteps": meta["timesteps"],
        "stopped early": meta["stopped_early"], "eval mean return": meta["eval"]["mean_return"],
        "eval std return": meta["eval"]["std_return"], "eval episodes": meta["eval"]["episodes"],
        "normalized score (x100)": meta["normalized_score"] if meta["normalized_score"] is not None else "n/a",
        "train seconds": meta["train_seconds"], "steps/s": meta["steps_per_second"], "checkpoint": str(out),
    }
    if meta["replay_dataset"]:
        rows["replay dataset"] = meta["replay_dataset"]
    console.print(kv_table(f"Expert {meta['algo']} on {meta['env_id']}", rows))


@command(app, "eval")
def evaluate(
    checkpoint: Path = typer.Argument(..., help="FILE.zip written by `rlft expert train` (needs FILE.json)."),
    episodes: int = typer.Option(10, "--episodes", help="Deterministic evaluation episodes."),
    seed: int | None = typer.Option(None, "--seed", min=0,
                                    help="Seed of the first episode (default: the training one)."),
    num_envs: int = typer.Option(8, "--num-envs", help="Envs stepped together with batched inference."),
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
