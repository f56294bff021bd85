"""``rlft data collect`` and ``rlft data info``: Minari datasets in and out."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import typer

from rlft.cli.common import command, finite
from rlft.core.console import console, kv_table, progress
from rlft.envs.registry import reference_scores

# Its own group, whose commands ``rlft data`` takes in (rlft.cli.data): imports run one way.
app = typer.Typer()


@command(app, "collect")
def collect(
    env: str = typer.Option(..., "--env", help="Gymnasium env id, e.g. CartPole-v1, HalfCheetah-v5."),
    policy: str = typer.Option("random", "--policy", help="An SB3 checkpoint FILE.zip, or 'random'."),
    episodes: int = typer.Option(..., "--episodes", help="Episodes to record."),
    dataset_id: str = typer.Option(..., "--dataset-id", help="Minari id NAMESPACE/NAME-vK (the version is required)."),
    num_envs: int = typer.Option(1, "--num-envs", help="Envs stepped together with batched policy inference."),
    seed: int = typer.Option(0, "--seed", min=0, help="Episode i is reset with seed + i (stored in the dataset)."),
    noise: float = typer.Option(
        0.0, "--noise", callback=finite,
        help="Box actions: Gaussian std in half action ranges, clipped. Discrete: epsilon-random.",
    ),
    stochastic: bool = typer.Option(
        False, "--stochastic/--no-stochastic", help="Record the policy's own sampled actions (SB3 predict with "
        "deterministic=False: "
        "SAC's squashed Gaussian, PPO's distribution), as D4RL recorded its datasets, instead of its mean action."
    ),
    label_actions: str = typer.Option(
        "executed", "--label-actions", help="With --noise: record the action the env was stepped with (executed), "
        "or the policy's own action before the noise (clean: DART-style data, off-path states with expert labels)."
    ),
    data_format: str = typer.Option("hdf5", "--data-format", help="Minari storage: hdf5 (default) or arrow."),
    max_episode_steps: int | None = typer.Option(None, "--max-episode-steps", help="Override the env's limit."),
    author: str = typer.Option("rlft", "--author", help="Author recorded in the dataset metadata."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing id (only after success)."),
    data_path: Path | None = typer.Option(None, "--data-path", help="Minari datasets folder to write into "
                                          "(default: $MINARI_DATASETS_PATH, else ~/.minari/datasets); read it back "
                                          "with the dataset's folder, PATH/ID."),
) -> None:
    """Record policy rollouts as a Minari dataset (DataCollector), with seeds and reference scores."""
    from rlft.core.seeding import limit_threads
    from rlft.sources.collect import CollectConfig, collect_to_minari
    from rlft.sources.minari_source import minari_root

    limit_threads()
    config = CollectConfig(
        env_id=env, dataset_id=dataset_id, episodes=episodes, policy=policy, num_envs=num_envs, seed=seed,
        noise=noise, stochastic=stochastic, label_actions=label_actions.lower(), data_format=data_format.lower(),
        overwrite=overwrite,
        max_episode_steps=max_episode_steps,
        author=author,
    )
    with progress() as bar, (minari_root(data_path) if data_path is not None else contextlib.nullcontext()):
        task = bar.add_task(f"collect {dataset_id}", total=episodes)
        result = collect_to_minari(config, on_episode=lambda _: bar.advance(task))

    import numpy as np


    returns = np.array([s.episode_return for s in result.stats])
    ref = reference_scores(env)
    rows = {
        "dataset id": result.dataset_id, "env": env, "policy": policy, "episodes": len(result.stats),
        "steps": result.steps, "mean return": float(returns.mean()), "std return": float(returns.std()),
        "min return": float(returns.min()), "max return": float(returns.max()),
        "terminated / truncated": f"{sum(s.terminated for s in result.stats)} / "
        f"{sum(not s.terminated for s in result.stats)}",
        "normalized score (x100)": 100 * ref.normalize(float(returns.mean())) if ref else "n/a",
        "seeds": f"{seed} .. {seed + episodes - 1}", "num envs": min(num_envs, episodes),
        "seconds": round(result.seconds, 2), "steps/s": round(result.steps_per_second, 1),
        "path": str(result.path),
    }
    console.print(kv_table(f"Collected {result.dataset_id}", rows))


@command(app, "combine")
def combine(
    sources: list[str] = typer.Argument(..., help="Two or more Minari datasets (local ids or folders) of one env."),
    dataset_id: str = typer.Option(..., "--dataset-id", help="Minari id of the combination, NAMESPACE/NAME-vK."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing id (only after success)."),
    data_path: Path | None = typer.Option(None, "--data-path", help="Minari datasets folder (default: "
                                          "$MINARI_DATASETS_PATH, else ~/.minari/datasets)."),
) -> None:
    """Combine datasets of one env into one Minari dataset (D4RL's medium-expert is medium and expert together)."""
    from rlft.sources.minari_source import combine as combine_datasets
    from rlft.sources.minari_source import dataset_summary, load_minari, minari_root

    with minari_root(data_path) if data_path is not None else contextlib.nullcontext():
        final = combine_datasets(list(sources), dataset_id, overwrite)
        summary = dataset_summary(load_minari(str(final)))
    console.print(kv_table(f"Combined {dataset_id}", {k: summary[k] for k in (
        "env_id", "episodes", "steps", "return_mean", "return_min", "return_max", "normalized_score_x100", "path")}))


@command(app, "info")
def info(
    dataset: str = typer.Argument(..., help="A local Minari id (namespace/name-vN) or a dataset folder."),
    download: bool = typer.Option(False, "--download", help="Fetch a missing id from the Minari remote."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Summarise a Minari dataset: episodes, steps, spaces, returns, normalized score, storage format."""
    from rlft.sources.minari_source import dataset_summary, load_minari

    summary = dataset_summary(load_minari(dataset, download=download))
    if as_json:
        typer.echo(json.dumps(summary, indent=2, default=str))
    else:
        console.print(kv_table(f"Minari dataset {summary['dataset_id']}", summary))
