"""``rlft data collect`` and ``rlft data info``: Minari datasets in and out."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from rlft.cli.common import command, finite_within
from rlft.cli.options import config_command
from rlft.core.console import console, kv_table, progress
from rlft.envs.registry import reference_scores
from rlft.sources.collect_config import CollectConfig

# Its own group, whose commands ``rlft data`` takes in (rlft.cli.data): imports run one way.
app = typer.Typer()


def _run_collect(config, ctx) -> None:
    from rlft.core.seeding import limit_threads
    from rlft.sources.collect import check_collect, collect_to_minari
    from rlft.sources.minari_source import minari_root

    limit_threads()
    config.label_actions, config.data_format = config.label_actions.lower(), config.data_format.lower()
    with minari_root(config.data_path):
        check_collect(config)  # before the bar: a refusal is its one line, not a bar's blank line and then it
        with progress() as bar:
            task = bar.add_task(f"collect {config.dataset_id}", total=config.episodes)
            result = collect_to_minari(config, on_episode=lambda _: bar.advance(task))
    _print_collected(config, result)


def _print_collected(config, result) -> None:
    import numpy as np

    returns = np.array([s.episode_return for s in result.stats])
    ref = reference_scores(config.env_id)
    rows = {
        "dataset id": result.dataset_id, "env": config.env_id, "policy": config.policy,
        "episodes": len(result.stats), "steps": result.steps, "mean return": float(returns.mean()),
        "std return": float(returns.std()), "min return": float(returns.min()), "max return": float(returns.max()),
        "terminated / truncated": f"{sum(s.terminated for s in result.stats)} / "
        f"{sum(not s.terminated for s in result.stats)}",
        "normalized score (x100)": 100 * ref.normalize(float(returns.mean())) if ref else "n/a",
        "seeds": f"{config.seed} .. {config.seed + config.episodes - 1}",
        "num envs": min(config.num_envs, config.episodes),
        "seconds": round(result.seconds, 2), "steps/s": round(result.steps_per_second, 1),
        "path": str(result.path),
    }
    console.print(kv_table(f"Collected {result.dataset_id}", rows))


config_command(app, "collect", CollectConfig, _run_collect, doc=CollectConfig.__doc__)


@command(app, "combine")
def combine(
    sources: list[str] = typer.Argument(..., help="Two or more Minari datasets (local ids or folders) of one env."),
    dataset_id: str = typer.Option(..., "--dataset-id", help="Minari id of the combination, NAMESPACE/NAME-vK."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing id (only after success)."),
    data_path: Path | None = typer.Option(None, "--data-path", help="Minari datasets folder (default: "
                                          "$MINARI_DATASETS_PATH, else ~/.minari/datasets)."),
) -> None:
    """Combine datasets of one env into one Minari dataset (D4RL's medium-expert is medium and expert together)."""
    from rlft.sources.combine import combine as combine_datasets
    from rlft.sources.minari_source import dataset_summary, load_minari, minari_root

    with minari_root(data_path):
        final = combine_datasets(list(sources), dataset_id, overwrite)
        summary = dataset_summary(load_minari(str(final)))
    console.print(kv_table(f"Combined {dataset_id}", {k: summary[k] for k in (
        "env_id", "episodes", "steps", "return_mean", "return_min", "return_max", "normalized_score_x100", "path")}))


@command(app, "info")
def info(
    dataset: str = typer.Argument(..., help="A local Minari id (namespace/name-vN) or a dataset folder."),
    download: bool = typer.Option(False, "--download", help="Fetch a missing id from the Minari remote."),
    download_timeout: float = typer.Option(
        3600.0, "--download-timeout", callback=finite_within(1.0, 7 * 24 * 3600.0),
        help="--download: seconds the download may take in all (a stalled or dripping server is given up)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Summarise a Minari dataset: episodes, steps, spaces, returns, normalized score, storage format."""
    from rlft.sources.minari_source import dataset_summary, load_minari

    summary = dataset_summary(load_minari(dataset, download=download, timeout=download_timeout))
    if as_json:
        typer.echo(json.dumps(summary, indent=2, default=str))
    else:
        console.print(kv_table(f"Minari dataset {summary['dataset_id']}", summary))
