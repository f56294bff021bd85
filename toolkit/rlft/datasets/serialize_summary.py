"""What a serialized dataset reports about itself: its summary (``info.json``, with the source's own metadata and
normalized score), the returns plot, the dataset card and the tables printed at the end."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rlft.codecs.base import Codec
from rlft.core.console import console, kv_table, records_table
from rlft.core.plotting import figure, save_figure
from rlft.core.secrets import redact
from rlft.datasets.card import CardSpec, message_text, read_extra_markdown
from rlft.datasets.minari_episodes import _chunk, _iter_source, _Scan, check_spaces
from rlft.datasets.offline import GLOSSARY, build_records
from rlft.datasets.serialize_options import SerializeConfig
from rlft.envs.spaces import describe_space


def source_metadata(dataset) -> dict:
    """What the source's own metadata says (no episode is read: pass 1 already measured the returns)."""
    meta = getattr(dataset.storage, "metadata", {}) or {}
    keys = ("dataset_id", "algorithm_name", "author", "minari_version", "data_format", "ref_min_score",
            "ref_max_score", "total_episodes", "total_steps")
    info = {k: meta.get(k) for k in keys if meta.get(k) is not None}
    if isinstance(info.get("author"), set | list | tuple):
        info["author"] = sorted(info["author"])
    if isinstance(meta.get("rlft"), dict):
        info["rlft"] = meta["rlft"]
    return redact(info)  # copied into info.json, which push uploads: a token another tool wrote there is masked


def _summary(config, dataset, scan: _Scan, splits, codec: Codec) -> dict:
    returns = np.array([scan.returns[i] for i in sorted(scan.returns)])
    source = source_metadata(dataset)
    per_split = {
        name: {
            "episodes": int(len(ids)),
            "steps": int(sum(scan.lengths[int(i)] for i in ids)),
            "return_mean": float(np.mean([scan.returns[int(i)] for i in ids])),
        }
        for name, ids in splits.items()
    }
    summary = {
        "kind": "offline-rl",
        "source": config.source,
        "env_id": codec.env_id,
        "source_info": source,
        "codec": codec.describe(),
        "format": config.format,
        "prompt_style": config.prompt_style,
        "history": config.history,
        "turns": config.turns,
        "return_to_go": config.return_to_go,
        "seed": config.seed,
        "episodes": int(len(returns)),
        "steps": scan.steps,
        "return_mean": float(returns.mean()),
        "return_std": float(returns.std()),
        "return_min": float(returns.min()),
        "return_max": float(returns.max()),
        "dropped_episodes": scan.dropped,
        "splits": per_split,
        **config.extra_info,
    }
    score = _normalized(dataset, returns)
    if score is not None:
        summary["normalized_score_mean"] = score
    return summary


def _normalized(dataset, returns: np.ndarray) -> float | None:
    """D4RL-style normalized score x100 of the mean return (Minari's own ``get_normalized_score``), when the
    source has reference scores."""
    from minari import get_normalized_score

    meta = getattr(dataset.storage, "metadata", {}) or {}
    lo, hi = meta.get("ref_min_score"), meta.get("ref_max_score")
    if lo is None or hi is None or hi == lo:
        return None
    return float(100.0 * get_normalized_score(dataset, np.asarray([returns.mean()]))[0])


def _plot_returns(path: Path, scan: _Scan, splits, summary: dict) -> None:
    fig, (ax1, ax2) = figure(1, 2, figsize=(10, 3.6))
    for name, ids in splits.items():
        values = [scan.returns[int(i)] for i in ids]
        ax1.hist(values, bins=min(30, max(5, len(values) // 3)), alpha=0.6, label=f"{name} ({len(values)})")
    ax1.set(title="Episode return distribution", xlabel="return", ylabel="episodes")
    ax1.legend()
    ordered = sorted(scan.returns)
    ax2.plot(ordered, [scan.returns[i] for i in ordered], ".", ms=3)
    ax2.set(title="Return per episode", xlabel="episode id", ylabel="return")
    fig.suptitle(f"{summary['source']}  mean {summary['return_mean']:.1f} +- {summary['return_std']:.1f}")
    fig.tight_layout()
    save_figure(fig, path)


def _card(config: SerializeConfig, summary: dict, codec: Codec, splits, scan: _Scan, dataset) -> CardSpec:
    first = next(iter(_iter_source(dataset, splits["train"][:1], check_spaces(dataset)))) if not scan.keep else \
        scan.episodes[int(splits["train"][0])]
    row = build_records(_chunk([first]), codec).slice(0, 1).to_pylist()[0]
    example_prompt, example_completion = message_text(row["prompt"]), message_text(row["completion"])
    env = (codec.env_id or "unknown").split("-")[0].lower()
    return CardSpec(
        pretty_name=f"{codec.env_id} {config.source} ({config.format})",
        template="offline_rl.md",
        splits={name: 0 for name in splits},
        tags=[env, "offline-rl", "minari", config.format, "decision-making"],
        context={
            "summary": summary,
            "source": config.source,
            "env_id": codec.env_id,
            "observation_space": describe_space(codec.observation_space),
            "action_space": describe_space(codec.action_space),
            "codec": codec.describe(),
            "glossary": {k: v for k, v in GLOSSARY.items() if k in row},  # the columns this dataset has
            "example_prompt": example_prompt,
            "example_completion": example_completion,
            "split_stats": summary["splits"],
            "returns_plot": config.plot,
        },
        extra_markdown=read_extra_markdown(config.card_extra),
    )


def _print_summary(summary: dict) -> None:
    keys = ["source", "env_id", "codec", "episodes", "steps", "return_mean", "return_std", "return_min",
            "return_max", "normalized_score_mean"]
    console.print(kv_table("Serialized dataset", [(k, summary[k]) for k in keys if k in summary]))
    rows = [{"split": name, **stats} for name, stats in summary["splits"].items()]
    console.print(records_table("Splits (by episode)", rows, ["split", "episodes", "steps", "return_mean"]))
    if summary["dropped_episodes"]:
        console.print(f"[yellow]dropped {len(summary['dropped_episodes'])} episodes with NaN/inf[/]")
