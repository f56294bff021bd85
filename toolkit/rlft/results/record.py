"""One seed of an experiment as a file: ``results/NAME/seed-S.json``.

It keeps what the README and the summary need from each evaluation report (success, agreement, returns,
invalid actions, the verdict) and each training run (steps, time, the criterion's record), not the weights or
the per-episode arrays, plus where it was measured and the command that reproduces it.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from rlft.core.errors import InvalidInputError, OutputExistsError
from rlft.core.io import REPLACE_FOREIGN_ENV, atomic_write_text
from rlft.core.manifest import RUN_FILE
from rlft.core.output_file import check_output_file, is_png
from rlft.core.reading import require_file
from rlft.core.secrets import redact, redact_command
from rlft.evaluate.compare import expert_scores
from rlft.evaluate.report_shape import load_report
from rlft.evaluate.verdict import verdicts
from rlft.results.environment import environment

RECORD_VERSION = 1
REPORT_FIELDS = ("env_id", "policy", "policy_kind", "episodes", "seed", "num_envs", "success_rate",
                 "optimal_success_exact", "expert_agreement", "invalid_action_rate", "return_mean", "return_std",
                 "return_min", "return_max", "normalized_score", "length_mean", "env_steps_per_second",
                 "wall_seconds", "generate_calls", "action_error", "action_error_worst10", "action_error_per_dim",
                 "action_magnitude_ratio")
# rlft_info.json facts of a dataset: the FrozenLake Q export's exact values, an offline dataset's returns
DATASET_FIELDS = ("n_rows", "v_start", "exact_success", "success_rate", "episodes", "residual", "steps",
                  "return_mean", "return_std", "normalized_score_mean")
IMPROVED_FIELDS = ("rows", "horizon", "candidates", "noise", "weighting", "mirrored", "step", "mean_best_gain",
                   "mean_label_change", "label_consistency", "consistency_rows")
RUN_FIELDS = ("stage", "lora", "train_rows", "global_step", "train_runtime_s", "train_steps_per_second",
              "eval_loss_start", "eval_loss_end", "trainable_parameters", "total_parameters", "prompt_tokens_mean",
              "base_model", "episodes_per_second", "rollout_share", "device", "gpu_name", "gpu_peak_memory_gb")
# GRPO's signals (rlft.train.grpo.signals): why a run learned or stalled, kept beside its steps and time
SIGNAL_FIELDS = ("frac_reward_zero_std_first", "frac_reward_zero_std_last", "policy_entropy_first",
                 "policy_entropy_last", "kl_first", "kl_last", "stall_steps_longest", "stall_warned_at_step")


def parse_labelled(items: list[str], what: str) -> dict[str, Path]:
    """``["llm=path/a.json", ...]`` -> ``{"llm": Path("path/a.json")}`` (labels unique, files present)."""
    out: dict[str, Path] = {}
    for item in items:
        label, sep, path = item.partition("=")
        if not sep or not label or not path:
            raise InvalidInputError(f"--{what} {item!r} is not LABEL=PATH")
        if not label.isprintable() or "|" in label:  # a label is a row of the README's tables (pass 15, B17)
            raise InvalidInputError(f"--{what} label {label!r} holds a control character or '|'",
                                    hint="a label is one line of plain text, e.g. llm-sft")
        if label in out:
            raise InvalidInputError(f"--{what} label {label!r} is given twice")
        out[label] = Path(path)
    return out


def report_records(reports: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The fields of each evaluation report that results keep, with its verdict when it has one (judged with
    every report of the seed, so an LLM is held against q-greedy on the same episodes)."""

    found = {v.name: v.to_dict() for v in verdicts(list(reports.items()))}
    out = {}
    for label, report in reports.items():
        record = {key: report.get(key) for key in REPORT_FIELDS}
        seeds = report.get("seeds") or []
        record["episode_seeds"] = [min(seeds), max(seeds)] if seeds else None
        record["verdict"] = found.get(label)
        out[label] = record
    scores = expert_scores(list(reports.values()))  # 0 = random, 100 = the expert, on the same episodes
    if scores is not None:
        for record, score in zip(out.values(), scores, strict=True):
            record["expert_normalized_score"] = score
    return out


def run_record(summary: dict[str, Any]) -> dict[str, Any]:
    """The fields of a RUN folder's ``summary.json`` that results keep, with seconds per step."""
    record = {key: summary.get(key) for key in RUN_FIELDS}
    record.update({key: summary[key] for key in SIGNAL_FIELDS if key in summary})
    steps, seconds = summary.get("global_step"), summary.get("train_runtime_s")
    record["seconds_per_step"] = seconds / steps if steps and seconds else None
    criterion = summary.get("criterion")
    if criterion:
        record["criterion"] = {k: criterion.get(k) for k in ("target", "reached", "reached_at_step",
                                                             "final_accuracy", "states", "decoding", "history")}
        episodes = criterion.get("episodes")
        if episodes:  # the closed-loop checks: their curve, a fall below the start, the check kept, the speed
            record["closed_loop"] = {k: episodes.get(k) for k in (
                "history", "fell_below_start_at_step", "kept_step", "kept_return", "env_steps_per_second", "envs")
                if episodes.get(k) is not None or k in ("kept_step", "fell_below_start_at_step")}
    return record


def online_run_record(info: dict[str, Any]) -> dict[str, Any]:
    """The fields of an online RUN folder's ``rlft_online.json`` (``rlft train online``), under the names the
    other runs use (steps = environment steps), with its learning curve (environment step, episode return)."""
    steps, seconds = info.get("timesteps"), info.get("train_seconds")
    backbone = info.get("backbone")
    return {
        "stage": f"online {info.get('algo')}",
        "base_model": backbone if backbone == "mlp" else Path(str(backbone)).name,
        "global_step": steps,
        "train_runtime_s": seconds,
        "train_steps_per_second": info.get("steps_per_second"),
        "trainable_parameters": info.get("trainable_parameters"),
        "seconds_per_step": seconds / steps if steps and seconds else None,
        "final_eval_return": (info.get("eval") or {}).get("mean"),
        "curve": info.get("curve"),
        "curve_axes": ["environment step", "training episode return (running mean)"],
        **update_signal_means(info.get("update_signals") or []),
        **checks_record(info.get("checks")),
    }


def checks_record(checks: dict[str, Any] | None) -> dict[str, Any]:
    """``--check-freq``: which checked policy the run kept and what the last check saw (a run that kept an
    earlier policy says how far its last one had fallen)."""
    if not checks or not checks.get("history"):
        return {}
    return {"kept_step": checks.get("best_step"), "kept_check_return": checks.get("best_return"),
            "last_check_return": checks["history"][-1][1], "check_history": checks["history"]}


def update_signal_means(signals: list[dict[str, float]]) -> dict[str, float]:
    """``<signal>_mean`` over an online run's updates (SB3's approx_kl, clip_fraction, explained_variance...): how
    far each update moved the policy and how well the value head fit, comparable between backbones."""
    keys = sorted({k for row in signals for k in row if k not in ("step", "learning_rate")})
    return {f"{k}_mean": float(np.mean([row[k] for row in signals if k in row])) for k in keys}


def episode_curve(run: Path) -> tuple[list[list[float]], str] | None:
    """An episodic GRPO run's learning curve from the trainer's own log (``trainer_state.json`` of its last
    checkpoint): (optimizer step, success rate of the training episodes, or their mean return), with its name."""
    from transformers.trainer_utils import get_last_checkpoint

    from rlft.models.run import CHECKPOINTS_DIR

    folder = run / CHECKPOINTS_DIR
    last = get_last_checkpoint(str(folder)) if folder.is_dir() else None  # the one --resume continues from
    if last is None or not (Path(last) / "trainer_state.json").is_file():
        return None
    history = _load_json(Path(last) / "trainer_state.json", "trainer state").get("log_history") or []
    for key, name in (("episode/success_rate", "success rate"), ("episode/return", "return")):
        points = [[float(h["step"]), float(h[key])] for h in history if key in h and "step" in h]
        if points:
            return points, name
    return None


def offline_run_record(info: dict[str, Any]) -> dict[str, Any]:
    """The fields of an offline RUN folder's ``rlft_offline.json`` (``rlft train offline``) or of a BC policy file's
    info (``rlft train bc``), under the names the other runs use, with the closed-loop checks as the curve."""
    config = info.get("config") or {}
    stage = f"offline {info['algo']}" if info.get("algo") else "bc"
    steps = config.get("steps") if info.get("algo") else None
    seconds = info.get("train_seconds")
    checks = info.get("checks") or []
    record = {"stage": stage, "global_step": steps, "train_rows": info.get("train_rows", info.get("rows")),
              "train_runtime_s": seconds, "train_steps_per_second": info.get("steps_per_second"),
              "seconds_per_step": seconds / steps if steps and seconds else None,
              "base_model": "mlp " + "x".join(str(h) for h in config.get("hidden") or [])}
    if checks:
        key = "normalized_score" if checks[-1].get("normalized_score") is not None else "mean_return"
        record["curve"] = [[c["step"], c[key]] for c in checks]
        record["curve_axes"] = ["gradient step", "check episodes' " + key.replace("_", " ")]
    return record


def read_run_record(path: Path) -> dict[str, Any]:
    """What results keep of a RUN folder: a training run's summary.json (with an episodic run's curve), an online
    run's rlft_online.json, an offline run's rlft_offline.json, or a BC policy file's info."""
    if path.is_file() and path.suffix == ".pt":
        from rlft.models.bc import load_bc

        return offline_run_record(load_bc(path).info)
    if (path / "rlft_offline.json").is_file():
        return offline_run_record(_load_json(path / "rlft_offline.json", "offline run info"))
    if (path / "summary.json").is_file() or not (path / "rlft_online.json").is_file():
        summary = _load_json(path / "summary.json", "run summary")
        record = run_record(summary)
        if summary.get("episodes_played") and not record.get("criterion"):  # episodic GRPO
            found = episode_curve(path)
            if found:
                record["curve"], name = found
                record["curve_axes"] = ["optimizer step", f"training episodes' {name}"]
        return record
    return online_run_record(_load_json(path / "rlft_online.json", "online run info"))


LATE_RECORD_S = 3600.0  # a record written this long after its last run finished says so


def recorded_after(runs, now: float) -> dict[str, Any]:
    """When the runs finished (the latest ``finished`` of their ``rlft_run.json``) and, when the record is written
    more than an hour later (results re-recorded with newer code, evaluations added), ``recorded_later``: the
    record's code and environment are then the recording's, not necessarily the training's."""
    finished = []
    for run in runs:
        info = Path(run) / RUN_FILE
        try:
            data = json.loads(info.read_text(encoding="utf-8")) if info.is_file() else None
            stamp = data.get("finished") if isinstance(data, dict) else None
            # a run record edited by hand ("finished": 5) dates nothing: it is skipped, not a traceback
            finished.append(time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S")) if isinstance(stamp, str) else None)
        except (OSError, ValueError, OverflowError, json.JSONDecodeError):
            continue
    latest = max((f for f in finished if f is not None), default=None)
    if latest is None:
        return {}
    out: dict[str, Any] = {"runs_finished": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(latest))}
    if now - latest > LATE_RECORD_S:
        out["recorded_later"] = True
    return out


def dataset_record(info: dict[str, Any]) -> dict[str, Any]:
    """The facts of a dataset's ``rlft_info.json`` that results keep (with ``rlft data improve``'s measures of its
    labels, where it relabelled the dataset)."""
    record = {key: info[key] for key in ("kind", "env_id", *DATASET_FIELDS) if info.get(key) is not None}
    improved = info.get("improved")
    if isinstance(improved, dict):
        record["improved"] = {key: improved[key] for key in IMPROVED_FIELDS if improved.get(key) is not None}
    return record


def _load_json(path: Path, what: str) -> dict[str, Any]:
    require_file(path, what, hint="did the experiment's earlier steps run?")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"{what} {path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise InvalidInputError(f"{what} {path} does not hold a JSON object")
    return data


def paired_difference(a: dict[str, Any], b: dict[str, Any], labels: tuple[str, str]) -> dict[str, Any]:
    """Report ``a`` minus report ``b`` episode by episode (an RL stage judged against the start it improves, on the
    same episodes): the mean difference of returns, its standard error, the share of episodes ``a`` won, and the
    difference in normalized points where the reports carry reference scores. Reports of other episodes are
    refused."""
    seeds_a, seeds_b = a.get("seeds") or [], b.get("seeds") or []
    if not seeds_a or seeds_a != seeds_b or a.get("env_id") != b.get("env_id"):
        raise InvalidInputError(f"--paired {labels[0]},{labels[1]}: the two reports were not played on the same "
                                "episodes (env and episode seeds must match)")
    missing = [label for label, report in zip(labels, (a, b), strict=True) if report.get("returns") is None]
    if missing:  # load_report checked those there: one finite return per episode
        raise InvalidInputError(f"--paired {labels[0]},{labels[1]}: report {missing[0]} holds no returns per "
                                "episode, which every rlft evaluation writes",
                                hint="evaluate again (rlft eval) instead of editing the report")
    diff = np.asarray(a["returns"], dtype=float) - np.asarray(b["returns"], dtype=float)
    stderr = float(diff.std(ddof=1) / np.sqrt(len(diff))) if len(diff) > 1 else 0.0
    out = {"episodes": len(diff), "return_diff": float(diff.mean()), "return_diff_stderr": stderr,
           "wins": float((diff > 0).mean())}
    ref = a.get("reference_scores")
    if ref and ref.get("expert") is not None and ref.get("random") is not None:
        scale = 100.0 / (float(ref["expert"]) - float(ref["random"]))
        out.update(normalized_diff=float(diff.mean()) * scale, normalized_diff_stderr=stderr * scale)
    return out


def write_seed_record(name: str, seed: int, reports: dict[str, Path], runs: dict[str, Path], results_dir: Path,
                      command: str, datasets: dict[str, Path] | None = None,
                      paired: list[tuple[str, str]] | None = None) -> Path:
    """Read the reports (REPORT.json), runs (RUN folders) and datasets (dataset folders), write
    ``results_dir/NAME/seed-SEED.json``."""
    from rlft.datasets.layout import INFO_FILENAME

    if not name or "/" in name or name.startswith("."):
        raise InvalidInputError(f"experiment name {name!r} must be a plain folder name")
    if not reports and not runs:
        raise InvalidInputError("nothing to record: give --report LABEL=REPORT.json and/or --run LABEL=RUN")
    loaded = {label: load_report(path) for label, path in reports.items()}
    for pair in paired or []:
        missing = [lab for lab in pair if lab not in loaded]
        if missing:
            raise InvalidInputError(f"--paired {pair[0]},{pair[1]}: no --report labelled {', '.join(missing)}")
        if pair[0] == pair[1]:  # a report minus itself recorded a zero difference (hostile pass 21, U2)
            raise InvalidInputError(f"--paired {pair[0]},{pair[1]} pairs a report with itself",
                                    hint="pair two policies played on the same episodes: --paired llm,bc-mlp")
    record = {
        "rlft_results_version": RECORD_VERSION,
        "kind": "seed",
        "experiment": name,
        "seed": int(seed),
        "command": redact_command(command),  # committed and published: no secret typed in --reproduce
        "recorded": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        **environment(),
        "reports": report_records(loaded),
        "paired": {f"{a} - {b}": paired_difference(loaded[a], loaded[b], (a, b)) for a, b in paired or []},
        "runs": {label: read_run_record(Path(path)) for label, path in runs.items()},
        "datasets": {label: dataset_record(_load_json(Path(path) / INFO_FILENAME, "dataset info"))
                     for label, path in (datasets or {}).items()},
    }
    record.update(recorded_after(runs.values(), time.time()))
    # what the reports and runs hold is copied into a file meant to be committed: a policy's URL with a password or
    # a signature in it was copied as it was (hostile pass 18, B7)
    record = redact(record)
    out = Path(results_dir) / name / f"seed-{int(seed)}.json"
    check_results_file(out, "seed")
    write_results_json(out, record)
    return out


DIGEST_KEY = "rlft_digest"  # what rlft wrote, so that a record a user edited since is kept, not replaced


def _digest(data: dict[str, Any]) -> str:
    body = {k: v for k, v in data.items() if k != DIGEST_KEY}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode("utf-8")).hexdigest()[:16]


def write_results_json(path: Path, data: dict[str, Any]) -> None:
    """A seed record or a summary, with the digest of its content."""
    atomic_write_text(path, json.dumps({**data, DIGEST_KEY: _digest(data)}, indent=2) + "\n")


def check_results_file(path: Path, kind: str | None) -> None:
    """A file rlft replaces in a results folder must be one it wrote: a JSON record of ``kind`` (``seed``,
    ``experiment``) whose digest still matches (:data:`DIGEST_KEY`; a record from before digests has none) or, for
    ``kind`` None, a PNG. A user's file of that name, or one a user edited, is kept and the command refused."""

    def ours(file: Path) -> bool:
        if kind is None:
            return is_png(file)
        data = json.loads(file.read_text(encoding="utf-8"))
        return isinstance(data, dict) and data.get("kind") == kind

    if kind is not None and os.environ.get(REPLACE_FOREIGN_ENV) != "1":
        _refuse_edited(path)
    check_output_file(path, overwrite=True, option="results file", ours=ours)


def _refuse_edited(path: Path) -> None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return  # not there, or not rlft's: check_output_file says which
    if isinstance(data, dict) and DIGEST_KEY in data and data[DIGEST_KEY] != _digest(data):
        raise OutputExistsError(f"results file {path} was edited since rlft wrote it: it is kept",
                                hint=f"move it away to record again (or set {REPLACE_FOREIGN_ENV}=1 to replace it)")
