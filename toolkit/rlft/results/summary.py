"""The seeds of an experiment aggregated: ``results/NAME/summary.json`` (mean, spread, every value) and a PNG.

The summary holds tables in the one form the README renderer reads (shared with benchmarks): columns with a
label and a number format, rows whose cells are a value or an aggregate ``{mean, std, min, max, n, values}``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.markup import escape

from rlft.core.console import err_console
from rlft.core.errors import InvalidInputError
from rlft.core.plotting import figure, save_figure
from rlft.core.secrets import redact_command
from rlft.results.record import check_results_file, write_results_json

SUMMARY_FILENAME = "summary.json"
PLOT_FILENAME = "summary.png"
# (key, header, format) of the policy table; a column is shown when some row has a value.
REPORT_COLUMNS = [
    ("success_rate", "success rate", ".3f"),
    ("optimal_success_exact", "optimal success (exact)", ".3f"),
    ("expert_agreement", "agreement", ".3f"),
    ("invalid_action_rate", "invalid actions", ".3f"),
    ("return_mean", "return", ".4g"),
    ("normalized_score", "normalized score", ".1f"),
    ("expert_normalized_score", "score (random 0, expert 100)", ".1f"),
    ("action_error", "held-out action error", ".4f"),
    ("action_magnitude_ratio", "mean |action| / data's", ".3f"),
    ("episodes", "episodes / seed", ".0f"),
    ("wall_seconds", "eval s", ".1f"),
    ("env_steps_per_second", "eval steps/s", ".0f"),
]
DATASET_COLUMNS = [
    ("n_rows", "decision states", "d"),
    ("v_start", "V*(start)", ".6f"),
    ("exact_success", "optimal success, exact", ".4f"),
    ("success_rate", "optimal success, measured", ".4f"),
    ("episodes", "episodes measured", ",.0f"),
    ("residual", "Bellman residual", ".1e"),
    ("steps", "steps", ",.0f"),
    ("return_mean", "return mean", ".1f"),
    ("normalized_score_mean", "normalized score", ".1f"),
]
# paired comparisons (results record --paired A,B): A minus B on the same episodes, per seed then aggregated
PAIRED_COLUMNS = [
    ("normalized_diff", "difference, normalized points", "+.2f"),
    ("normalized_diff_stderr", "its standard error (episodes)", ".2f"),
    ("return_diff", "difference, return", "+.1f"),
    ("wins", "episodes won", ".2f"),
]
RUN_COLUMNS = [
    ("reached", "criterion reached", "count"),
    ("reached_at_step", "steps to criterion", ".0f"),
    ("global_step", "steps", ".0f"),
    ("train_runtime_s", "train s", ".1f"),
    ("seconds_per_step", "s/step", ".3f"),
    ("eval_loss_end", "final eval loss", ".4f"),
    ("episodes_per_second", "episodes/s", ".2f"),  # episodic GRPO: played while training
    ("rollout_share", "share of time playing", ".2f"),  # episodic GRPO: generation + env vs optimisation
    ("trainable_parameters", "trainable parameters", ",.0f"),
    ("prompt_tokens_mean", "prompt tokens", ".0f"),
    ("gpu_peak_memory_gb", "GPU peak memory, GiB", ".1f"),  # runs on a GPU (device in the record)
]


def aggregate(values: list) -> dict[str, Any] | None:
    """Mean, sample std, min, max, n and the values (None when no seed has a value); booleans are counted."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    if all(isinstance(v, bool) for v in present):
        return {"count": sum(present), "n": len(present), "values": present}
    arr = np.asarray(present, dtype=float)
    return {"mean": float(arr.mean()), "std": float(arr.std(ddof=1)) if len(arr) > 1 else 0.0,
            "min": float(arr.min()), "max": float(arr.max()), "n": len(arr), "values": arr.tolist()}


SECTIONS = (("reports", REPORT_COLUMNS), ("runs", RUN_COLUMNS), ("datasets", DATASET_COLUMNS),
            ("paired", PAIRED_COLUMNS))


def check_record_shape(record: Any, path: Path) -> dict[str, Any]:
    """``record`` if it has a seed record's shape: its seed a number, its machine and versions objects, each section
    an object of objects whose tabled values are numbers (or true/false/null). A record edited by hand or written by
    another tool is named with the entry that is wrong, instead of failing on it deep in the tables (hostile passes
    14 and 15)."""
    _check_record_header(record, path)
    for section, columns in SECTIONS:
        entries = record.get(section, {})
        if not isinstance(entries, dict):
            raise InvalidInputError(f"'{section}' of {path} is a {type(entries).__name__}, not a JSON object")
        for label, entry in entries.items():
            if not isinstance(entry, dict):
                raise InvalidInputError(f"{section} {label!r} of {path} is a {type(entry).__name__}, not a JSON object")
            if section == "runs" and not isinstance(entry.get("criterion") or {}, dict):
                raise InvalidInputError(f"the criterion of run {label!r} in {path} is not a JSON object")
            for key, _, _ in columns:
                value = entry.get(key)
                if value is not None and not isinstance(value, int | float):
                    raise InvalidInputError(f"{key} of {section} {label!r} in {path} is {value!r}, not a number")
    return record


def _check_record_header(record: Any, path: Path) -> None:
    if not isinstance(record, dict):
        raise InvalidInputError(f"{path} holds a JSON {type(record).__name__}, not a seed record of rlft results "
                                "record")
    seed = record.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise InvalidInputError(f"the seed of {path} is {seed!r}, not a seed number")
    for key, kind in (("machine", dict), ("versions", dict), ("commit", str), ("command", str)):
        if record.get(key) is not None and not isinstance(record[key], kind):  # pass 15, B9: a render traceback
            raise InvalidInputError(f"'{key}' of {path} is {record[key]!r}, not what rlft results record writes")


def load_seed_records(folder: Path) -> list[dict[str, Any]]:
    # seed-N.json only: a user's seed-0-backup.json beside them is not a record (hostile pass 14, B3: a traceback)
    found = sorted(folder.glob("seed-*.json"))
    files = sorted((p for p in found if p.stem[5:].isdigit()), key=lambda p: int(p.stem[5:]))
    for other in (p for p in found if not p.stem[5:].isdigit()):
        err_console.print(f"[yellow]Note:[/] {escape(str(other))} is not a seed record's name (seed-N.json): left out",
                          highlight=False, soft_wrap=True)
    if not files:
        for place in (folder.parent, folder):  # --results-dir /dev/zero: not "no records" but no folder
            if place.exists() and not place.is_dir():
                raise InvalidInputError(f"{place} is not a folder", hint="--results-dir is a folder of experiments")
        raise InvalidInputError(f"{folder} holds no seed-*.json records", hint="run the experiment first")
    records = []
    for path in files:
        try:
            records.append(check_record_shape(json.loads(path.read_text(encoding="utf-8")), path))
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"{path} is not valid JSON: {exc}") from exc
    for path, record in zip(files, records, strict=True):
        if record["seed"] != int(path.stem[5:]):  # pass 15, B10: a copied seed-0.json counted seed 0 twice
            raise InvalidInputError(f"{path} records seed {record['seed']}, not the seed its name says",
                                    hint="a seed's record is seed-N.json of seed N: rename or remove the copy")
    return records


def _run_values(run: dict[str, Any]) -> dict[str, Any]:
    criterion = run.get("criterion") or {}
    return {**run, "reached": criterion.get("reached") if criterion.get("target") is not None else None,
            "reached_at_step": criterion.get("reached_at_step")}


def _table(kind: str, header: str, columns, labels: list[str], per_label: dict[str, list[dict]]) -> dict | None:
    rows, used = [], []
    for key, label, fmt in columns:
        if any(aggregate([v.get(key) for v in per_label[lab]]) is not None for lab in labels):
            used.append({"key": key, "label": label, "format": fmt})
    if kind == "reports" and any(c["key"] == "success_rate" for c in used):
        used = [c for c in used if c["key"] != "return_mean"]  # FrozenLake: the return is the success
    if not labels or not used:
        return None
    for lab in labels:
        rows.append({"label": lab, "cells": {c["key"]: aggregate([v.get(c["key"]) for v in per_label[lab]])
                                             for c in used}})
    return {"kind": kind, "label_header": header, "columns": used, "rows": rows}


def _distinct(records: list[dict], key: str) -> list:
    out = []
    for record in records:
        value = record.get(key)
        if value not in out:
            out.append(value)
    return out


def summarize(name: str, results_dir: Path, title: str | None = None, description: str | None = None,
              command: str | None = None) -> dict[str, Any]:
    """Aggregate ``results_dir/NAME/seed-*.json`` into ``summary.json`` and ``summary.png``; return the summary."""
    folder = Path(results_dir) / name
    records = load_seed_records(folder)
    report_labels = list(dict.fromkeys(lab for r in records for lab in r.get("reports", {})))
    run_labels = list(dict.fromkeys(lab for r in records for lab in r.get("runs", {})))
    reports = {lab: [r["reports"][lab] for r in records if lab in r.get("reports", {})] for lab in report_labels}
    runs = {lab: [_run_values(r["runs"][lab]) for r in records if lab in r.get("runs", {})] for lab in run_labels}
    data_labels = list(dict.fromkeys(lab for r in records for lab in r.get("datasets", {})))
    data = {lab: [r["datasets"][lab] for r in records if lab in r.get("datasets", {})] for lab in data_labels}
    pair_labels = list(dict.fromkeys(lab for r in records for lab in r.get("paired", {})))
    pairs = {lab: [r["paired"][lab] for r in records if lab in r.get("paired", {})] for lab in pair_labels}
    tables = [t for t in (_table("reports", "policy", REPORT_COLUMNS, report_labels, reports),
                          _table("paired", "paired on the same episodes", PAIRED_COLUMNS, pair_labels, pairs),
                          _table("runs", "training run", RUN_COLUMNS, run_labels, runs),
                          _table("datasets", "dataset", DATASET_COLUMNS, data_labels, data)) if t is not None]
    notes = []
    for lab in report_labels:
        found = [rep["verdict"] for rep in reports[lab] if rep.get("verdict")]
        if found:
            matched = sum(v["matched"] for v in found)
            paired = all(v.get("q_greedy_same_episodes") is not None for v in found)
            against = "q-greedy's on the same episodes" if paired else "the exact optimal rate"
            notes.append(f"{lab} matched the optimal policy on {matched} of {len(found)} seeds: agreement 1.0 and "
                         f"success within two standard errors of {against}")
    summary = {
        "kind": "experiment",
        "name": name,
        "title": redact_command(title or name),  # "--hub-token V" in a title is masked as on a command line
        "description": redact_command(description or ""),
        "seeds": [r["seed"] for r in records],
        "command": redact_command(command or _distinct(records, "command")[0]),
        "machines": _distinct(records, "machine"),
        "versions": _distinct(records, "versions"),
        "commits": _distinct(records, "commit"),
        "tables": tables,
        "notes": notes,
        "summarized": time.strftime("%Y-%m-%d"),
    }
    plot = folder / PLOT_FILENAME
    check_results_file(folder / SUMMARY_FILENAME, "experiment")
    check_results_file(plot, None)
    if plot_summary(summary, records, plot):
        summary["plot"] = PLOT_FILENAME
    write_results_json(folder / SUMMARY_FILENAME, summary)
    return summary


def plot_summary(summary: dict[str, Any], records: list[dict[str, Any]], path: Path) -> bool:
    """Left: the main score of each policy per seed (with the exact optimal rate); right: decision accuracy
    against training step for each seed's runs. False when there is nothing to draw."""

    histories = [(r["seed"], lab, run["criterion"]["history"]) for r in records
                 for lab, run in r.get("runs", {}).items() if (run.get("criterion") or {}).get("history")]
    # online runs (rlft train online): episode return against environment steps, instead of decision accuracy
    curves = [(r["seed"], lab, run["curve"]) for r in records for lab, run in r.get("runs", {}).items()
              if run.get("curve")]
    if curves:  # a learning curve (online RL, episodic GRPO) says more than the SFT start's decision accuracy
        histories = []
    labels = list(dict.fromkeys(lab for r in records for lab in r.get("reports", {})))
    if not labels and not histories and not curves:
        return False
    both = bool(labels and (histories or curves))
    fig, axes = figure(1, 2 if both else 1, figsize=(11 if both else 6, 3.8))
    axes = np.atleast_1d(axes)
    if labels:
        _plot_scores(axes[0], records, labels)
    if histories:
        _plot_histories(axes[-1], histories)
    if curves:
        _plot_curves(axes[-1], records, curves)
    fig.suptitle(summary["title"])
    fig.tight_layout()
    save_figure(fig, path, dpi=100)
    return True


def _plot_scores(ax, records: list[dict[str, Any]], labels: list[str]) -> None:
    """Each policy's main score (success rate, else mean return), one dot per seed, with the exact optimum."""
    key = "success_rate" if any(r["reports"][lab].get("success_rate") is not None for r in records
                                for lab in labels if lab in r["reports"]) else "return_mean"
    for i, lab in enumerate(labels):
        values = [(r["seed"], r["reports"][lab].get(key)) for r in records if lab in r["reports"]]
        xs = [i + 0.06 * (j - (len(values) - 1) / 2) for j in range(len(values))]
        ax.plot(xs, [v for _, v in values], "o", label=lab)
    optimal = [r["reports"][lab].get("optimal_success_exact") for r in records for lab in labels
               if lab in r["reports"]]
    optimal = next((o for o in optimal if o is not None), None)
    if key == "success_rate" and optimal is not None:
        ax.axhline(optimal, color="k", ls="--", lw=1, label=f"exact optimal {optimal:.3f}")
    ax.set_xticks(range(len(labels)), labels)
    if sum(len(lab) for lab in labels) > 48:  # long policy names would run into each other
        ax.tick_params(axis="x", labelrotation=15, labelsize=8)
    ax.set(title=f"{key.replace('_', ' ')} per seed ({len(records)} seeds)", ylabel=key.replace("_", " "))
    ax.legend(fontsize=8, loc="best")


def _plot_histories(ax, histories: list) -> None:
    """Decision accuracy against optimizer step, a line per (run, seed)."""
    for seed, lab, history in histories:
        steps, acc = zip(*history, strict=True)
        ax.plot(steps, acc, marker=".", label=f"{lab} seed {seed}")
    ax.set(title="decision accuracy while training (greedy)", xlabel="optimizer step", ylabel="accuracy",
           ylim=(-0.02, 1.02))
    ax.legend(fontsize=7, loc="lower right")


def _plot_curves(ax, records: list[dict[str, Any]], curves: list) -> None:
    """Learning curves (online RL, episodic GRPO), one colour per run, every seed."""
    colors = {lab: f"C{i}" for i, lab in enumerate(dict.fromkeys(lab for _, lab, _ in curves))}
    axes_names = next((run.get("curve_axes") for r in records for run in r.get("runs", {}).values()
                       if run.get("curve_axes")), None) or ["environment step", "training episode return"]
    per_episode = axes_names[0] == "environment step"  # online runs: one point per episode, smoothed
    for seed, lab, curve in curves:
        steps, values = (np.asarray(v, dtype=float) for v in zip(*curve, strict=True))
        # a running mean over the last 20 episodes, shorter for a short run so that it still draws a line
        window = min(20, max(1, len(values) // 4)) if per_episode else 1
        smooth = np.convolve(values, np.ones(window) / window, mode="valid")
        ax.plot(steps[window - 1:], smooth, color=colors[lab], lw=1.2, alpha=0.85,
                marker="." if len(smooth) < 50 else None,
                label=lab if seed == min(s for s, la, _ in curves if la == lab) else None)
    ax.set(title=f"{axes_names[1]}, every seed", xlabel=axes_names[0], ylabel=axes_names[1].split(" (")[0])
    ax.legend(fontsize=7, loc="best")
