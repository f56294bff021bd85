"""``rlft eval compare``: several evaluation reports side by side, as a table (one column per report) and a plot of
each report's headline metric with its standard error; the expert-relative score when a random and an expert
report share their episodes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
from rich.markup import escape

from rlft.core.errors import InvalidInputError
from rlft.core.plotting import figure, save_figure
from rlft.core.reading import is_number
from rlft.evaluate.report import SUMMARY_ROWS, _fmt
from rlft.evaluate.report_shape import load_report


def headline(report: dict[str, Any]) -> tuple[str, float, float]:
    """(label, value, standard error) of what a report is judged by: the success rate (binomial error), else the
    D4RL-normalized score, else the mean return (the standard error of the mean)."""
    n = max(int(report.get("episodes") or 1), 1)
    if report.get("success_rate") is not None:
        p = float(report["success_rate"])
        return "success rate", p, float(np.sqrt(p * (1 - p) / n))
    stderr = float(report.get("return_stderr") or 0.0)
    ref = report.get("reference_scores")
    if report.get("normalized_score") is not None and ref:
        scale = 100.0 / (ref["expert"] - ref["random"])
        return "normalized score (x100)", float(report["normalized_score"]), stderr * scale
    return "mean return", float(report["return_mean"]), stderr


def plot_compare(names: list[str], reports: list[dict[str, Any]], path: Path) -> Path:
    """One PNG: each report's headline metric as a bar with its standard error (and the exact optimal rate of a
    FrozenLake evaluation as a line)."""
    values = [headline(r) for r in reports]
    labels = {label for label, _, _ in values}
    fig, ax = figure(figsize=(max(4.0, 1.3 * len(reports) + 1.5), 3.6))
    xs = np.arange(len(reports))
    ax.bar(xs, [v for _, v, _ in values], yerr=[e for _, _, e in values], capsize=4, color="#5b8fb9")
    top = max([abs(v) + e for _, v, e in values] + [1e-9])
    for x, (_, v, e) in zip(xs, values, strict=True):  # above the error bar, clear of the optimal line
        ax.text(x, v + e + 0.02 * top, f"{v:.3g}", ha="center", va="bottom", fontsize=8)
    optimal = next((r.get("optimal_success_exact") for r in reports if r.get("optimal_success_exact")), None)
    if optimal is not None and labels == {"success rate"}:
        ax.axhline(optimal, color="k", ls="--", lw=1, label=f"exact optimal {optimal:.3f}")
        ax.legend(fontsize=8)
    ax.set_xticks(xs, names, rotation=15 if len(reports) > 4 else 0, fontsize=8)
    ax.set_ylabel(" / ".join(sorted(labels)))
    envs = sorted({str(r.get("env_id")) for r in reports})
    episodes = sorted({int(r.get("episodes") or 0) for r in reports})
    ax.set_title(f"{', '.join(envs)}: {'/'.join(map(str, episodes))} episodes each (error bars: one standard error)",
                 fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path)


def expert_scores(reports: list[dict[str, Any]]) -> list[float | None] | None:
    """Each report's return as a score with 0 = the random policy, 100 = the expert, both on the same episodes:
    a normalized score for any environment, reference scores or not. None unless the reports hold one random and
    one expert report on the same env, seed and episodes, with different returns."""
    expert = next((r for r in reports if r.get("policy_kind") == "expert"), None)
    random_ = next((r for r in reports if r.get("policy_kind") == "random"), None)
    if expert is None or random_ is None:
        return None

    def episodes(report):
        return report.get("env_id"), report.get("seed"), report.get("episodes")

    low, high = float(random_["return_mean"]), float(expert["return_mean"])
    if episodes(random_) != episodes(expert) or high == low:
        return None
    return [100.0 * (float(r["return_mean"]) - low) / (high - low) if episodes(r) == episodes(expert) else None
            for r in reports]


def compare_table(paths: list[str | os.PathLike], reports: list[dict[str, Any]] | None = None):
    """A rich table: one column per report, one row per metric."""
    from rich.table import Table

    if len(paths) < 1:
        raise InvalidInputError("rlft eval compare needs at least one report")
    reports = reports if reports is not None else [load_report(p) for p in paths]
    table = Table(title="Evaluation reports", title_justify="left")
    table.add_column("metric", style="bold")
    for path in paths:
        table.add_column(escape(Path(path).stem))
    best_keys = {"return_mean", "success_rate", "normalized_score", "expert_agreement"}
    for key, label in SUMMARY_ROWS:
        values = [r.get(key) for r in reports]
        if all(v is None for v in values):
            continue
        cells = [escape(_fmt(v)) for v in values]  # a report's text is shown as written, not as markup (pass 18)
        numeric = [v for v in values if is_number(v)]
        if key in best_keys and len(reports) > 1 and numeric:
            best = max(numeric)
            cells = [f"[green]{c}[/]" if v == best else c for c, v in zip(cells, values, strict=True)]
        table.add_row(label, *cells)
    scores = expert_scores(reports)
    if scores is not None:
        table.add_row("score (random 0, expert 100)", *[_fmt(v) for v in scores])
    envs = {r.get("env_id") for r in reports}
    seeds = {(r.get("seed"), r.get("episodes")) for r in reports}
    notes = []
    if len(envs) > 1:
        notes.append(f"reports are on different environments: {escape(', '.join(sorted(map(str, envs))))}")
    if len(seeds) > 1:
        notes.append("reports use different seeds or episode counts: returns are not paired episode by episode")
    return table, notes
