"""The evaluation report: one JSON file (written atomically), a PNG of the returns, TensorBoard scalars,
a rich table (``rlft eval compare`` prints several side by side: :mod:`rlft.evaluate.compare`)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

import rlft
from rlft.core.claims import claim_output
from rlft.core.console import console, kv_table
from rlft.core.errors import InvalidInputError, OutputExistsError
from rlft.core.io import atomic_write_text
from rlft.core.output_file import is_png
from rlft.core.secrets import redact
from rlft.core.trackers import check_log_folder
from rlft.envs.frozenlake import is_frozenlake, map_rows
from rlft.envs.registry import normalized_score, reference_scores
from rlft.evaluate.plots import plot_policy_map, plot_returns
from rlft.evaluate.report_shape import REPORT_VERSION

# Fields that measure the machine, not the policy: they differ between two otherwise identical runs.
TIMING_KEYS = ("created", "wall_seconds", "policy_seconds", "env_seconds", "env_steps_per_second")
# (key, label) rows of the summary and compare tables
SUMMARY_ROWS = [
    ("env_id", "env"),
    ("policy", "policy"),
    ("episodes", "episodes"),
    ("num_envs", "envs (K)"),
    ("seed", "seed"),
    ("return_mean", "return mean"),
    ("return_std", "return std"),
    ("return_min", "return min"),
    ("return_max", "return max"),
    ("length_mean", "episode length mean"),
    ("success_rate", "success rate"),
    ("optimal_success_exact", "optimal success (exact)"),
    ("normalized_score", "normalized score (x100)"),
    ("invalid_action_rate", "invalid-action rate"),
    ("expert_agreement", "agreement with expert"),
    ("expert_mean_abs_diff", "mean |a - expert a|"),
    ("action_error", "held-out action error (of range)"),
    ("action_error_worst10", "  worst tenth of rows"),
    ("action_magnitude_ratio", "  mean |action| / data's"),
    ("env_steps", "env steps"),
    ("env_steps_per_second", "env steps/s"),
    ("generate_calls", "generate calls"),
    ("cache_hits", "prompts answered from cache"),
    ("wall_seconds", "wall seconds"),
]


def _versions() -> dict[str, str]:
    import sys

    import gymnasium

    versions = {"rlft": rlft.__version__, "gymnasium": gymnasium.__version__}
    for name in ("torch", "transformers", "stable_baselines3"):
        module = sys.modules.get(name)  # only what this evaluation used: importing transformers costs seconds
        if module is not None:
            versions[name] = getattr(module, "__version__", "?")
    return versions


def build_report(config, setup, result, num_envs: int) -> dict[str, Any]:
    """The report dict (JSON-able; the schema is tested)."""
    eps = result.episodes
    returns = np.array([e.episode_return for e in eps], dtype=np.float64)
    if not np.isfinite(returns).all():  # a mean, a plot and JSON of NaN say nothing; the environment is at fault
        bad = [i for i, r in enumerate(returns) if not np.isfinite(r)]
        raise InvalidInputError(f"{setup.env_id} returned a non-finite reward ({returns[bad[0]]}) in "
                                f"{len(bad)} of {len(returns)} episodes (the first: episode {bad[0]})",
                                hint="check the environment's reward; nothing was written")
    lengths = np.array([e.length for e in eps], dtype=np.int64)
    policy = setup.policy
    stats = policy.stats()
    ref = reference_scores(setup.env_id)
    frozenlake = is_frozenlake(setup.env_id)
    agreement, agreement_kind = _agreement(config, result)
    report: dict[str, Any] = {
        "rlft_report_version": REPORT_VERSION,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "env_id": setup.env_id,
        "env_kwargs": setup.env_kwargs,
        "max_episode_steps": config.max_episode_steps,
        "action_scale": config.action_scale,
        "policy": config.policy,
        "policy_kind": policy.kind,
        "policy_info": policy.describe(),
        "codec": setup.codec.describe() if setup.codec is not None else None,
        "codec_source": setup.codec_source,
        "episodes": len(eps),
        "num_envs": int(num_envs),
        "num_envs_requested": int(config.num_envs),
        "seed": int(config.seed),
        "seeds": [e.seed for e in eps],
        "returns": returns.tolist(),
        "lengths": lengths.tolist(),
        "terminated": [e.terminated for e in eps],
        **_return_stats(returns, lengths),
        "success_rate": float(np.mean(returns > 0)) if frozenlake else None,
        "optimal_success_exact": (setup.qtable.exact_success_within(config.max_episode_steps)
                                  if frozenlake and setup.qtable is not None else None),
        "normalized_score": normalized_score(setup.env_id, float(returns.mean())),
        "reference_scores": None if ref is None else {"random": ref.random, "expert": ref.expert,
                                                        "source": ref.source},
        "decisions": int(policy.decisions),
        "invalid_actions": int(policy.invalid),
        "invalid_action_rate": _invalid_action_rate(policy),
        "invalid_examples": stats.get("invalid_examples", []),
        "invalid_reasons": stats.get("invalid_reasons", {}),
        "expert_agreement": agreement,
        "expert_agreement_kind": agreement_kind,
        "expert_agreement_steps": result.agreement_total or result.expert_total or 0,
        "expert_mean_abs_diff": (result.expert_abs_diff_sum / result.expert_abs_diff_n
                                 if result.expert_abs_diff_n else None),
        "env_steps": int(result.env_steps),
        "wall_seconds": round(result.seconds, 4),
        "policy_seconds": round(result.policy_seconds, 4),
        "env_seconds": round(result.env_seconds, 4),
        "env_steps_per_second": result.env_steps / result.seconds if result.seconds > 0 else None,
        "generate_calls": int(stats["generate_calls"]) if "generate_calls" in stats else None,
        "new_tokens": int(stats["new_tokens"]) if "new_tokens" in stats else None,
        "cache_hits": int(stats["cache_hits"]) if "cache_hits" in stats else None,
        "constrained": bool(config.constrained) if policy.kind == "llm" else False,
        "constrained_precompute": setup.precompute,
        "notes": list(setup.notes),
        "policy_map": _policy_map(setup, result) if frozenlake else None,
        "videos": list(result.videos),
        "versions": _versions(),
    }
    return report


def _return_stats(returns: np.ndarray, lengths: np.ndarray) -> dict[str, Any]:
    """Mean, spread and range of the episode returns and lengths (the standard error is 0 for one episode)."""
    return {
        "return_mean": float(returns.mean()),
        "return_std": float(returns.std()),
        "return_min": float(returns.min()),
        "return_max": float(returns.max()),
        "return_stderr": float(returns.std(ddof=1) / np.sqrt(len(returns))) if len(returns) > 1 else 0.0,
        "length_mean": float(lengths.mean()),
        "length_min": int(lengths.min()),
        "length_max": int(lengths.max()),
    }


def _agreement(config, result) -> tuple[float | None, str | None]:
    """(share of agreeing steps, what agreeing means): with an SB3 expert when one was given, else with the
    optimal actions of the dataset's Q-values, else (None, None)."""
    if result.expert_total:
        return result.expert_match / result.expert_total, f"same action as the SB3 expert {config.expert}"
    if result.agreement_total:
        return result.agreement_hits / result.agreement_total, "action in the optimal set of the dataset's Q-values"
    return None, None


def _invalid_action_rate(policy) -> float | None:
    """The share of an LLM policy's decisions whose answer did not parse (0.0 before any); None for others."""
    if policy.kind != "llm":
        return None
    return (policy.invalid / policy.decisions) if policy.decisions else 0.0


def _policy_map(setup, result) -> dict[str, Any] | None:
    """What a FrozenLake report draws: the map, the actions taken in each visited state (counts) and each state's
    optimal actions (from the dataset's exact Q-values)."""
    if setup.qtable is None:
        return None

    rows = map_rows(setup.env_kwargs)
    return {
        "rows": list(rows),
        "taken": {str(s): {str(a): n for a, n in sorted(c.items())} for s, c in sorted(result.state_actions.items())},
        "optimal": {str(s): sorted(acts) for s, acts in sorted(setup.qtable.optimal.items())},
    }


def atomic_write_json(path: Path, data: Any) -> Path:
    return atomic_write_text(path, json.dumps(redact(data), indent=2, default=_default) + "\n")


def _default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serializable: {type(value)}")


def side_paths(out: Path) -> dict[str, Path]:
    """Files written next to ``REPORT.json``: ``REPORT.png`` and ``REPORT_tb/``."""
    return {"json": out, "png": out.with_suffix(".png"), "tensorboard": out.with_name(out.stem + "_tb")}


def check_side_files(out: Path, overwrite: bool) -> None:
    """Before an evaluation runs: ``REPORT.png`` and ``REPORT_tb/`` are replaced only with ``--overwrite``, the plot
    only when it is a file, the log folder only when it holds TensorBoard event files alone (what an earlier report
    wrote there); anything else of the user's there is refused by name, with nothing run or written."""
    paths = side_paths(Path(out))
    # locked as the report is: r.json and r.JSON are two reports of one plot and log folder (hostile pass 21, F7)
    for side in ("png", "tensorboard"):
        claim_output(paths[side], f"the {side} beside --out {out}")
    check_log_folder(paths["tensorboard"], overwrite, f"--out {out}")
    path = paths["png"]
    if path.exists() or path.is_symlink():
        if not overwrite:
            raise OutputExistsError(f"{path} (written beside --out {out}) already exists",
                                    hint="pass --overwrite to replace it, or choose another --out")
        if path.is_symlink() or not (path.is_file() and is_png(path)):
            raise OutputExistsError(f"{path} (written beside --out {out}) is not a PNG plot an earlier report wrote",
                                    hint="move it or choose another --out")


def write_report(report: dict[str, Any], out: Path) -> dict[str, str]:
    """JSON (atomic), PNG and TensorBoard next to it; returns their paths (also stored in the JSON)."""
    paths = side_paths(Path(out))
    paths["json"].parent.mkdir(parents=True, exist_ok=True)
    files = {k: str(v) for k, v in paths.items()}
    report["files"] = files
    if report.get("policy_map"):
        plot_policy_map(report, paths["png"])
    else:
        plot_returns(report, paths["png"])
    log_tensorboard(report, paths["tensorboard"])
    atomic_write_json(paths["json"], report)  # last: a report on disk always has its plot and logs
    return files


def log_tensorboard(report: dict[str, Any], folder: Path) -> None:
    """Per-episode returns/lengths (step = episode index) and the summary scalars (step 0)."""
    import shutil

    from torch.utils.tensorboard import SummaryWriter

    if folder.exists():  # one report, one log: a re-run replaces it rather than mixing runs
        shutil.rmtree(folder)
    writer = SummaryWriter(log_dir=str(folder))
    try:
        for i, (ret, length) in enumerate(zip(report["returns"], report["lengths"], strict=True)):
            writer.add_scalar("episode/return", ret, i)
            writer.add_scalar("episode/length", length, i)
        for key in ("return_mean", "return_std", "return_min", "return_max", "length_mean", "success_rate",
                    "normalized_score", "invalid_action_rate", "expert_agreement", "expert_mean_abs_diff",
                    "env_steps_per_second"):
            value = report.get(key)
            if value is not None:
                writer.add_scalar(f"eval/{key}", float(value), 0)
        writer.add_text("eval/policy", f"{report['policy']} on {report['env_id']}", 0)
    finally:
        writer.close()


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def print_report(report: dict[str, Any]) -> None:
    rows = [(label, _fmt(report.get(key))) for key, label in SUMMARY_ROWS if report.get(key) is not None]
    if report.get("codec"):
        rows.insert(2, ("codec", report["codec"]))
    if report.get("action_scale", 1.0) != 1.0:  # a probe, not the policy as trained: said before its numbers
        rows.insert(2, ("actions scaled by", f"{report['action_scale']:g} (clipped to the action space)"))
    if report.get("constrained"):
        pc = report.get("constrained_precompute") or {}
        rows.append(("constrained decoding", f"{pc.get('states')} states, {pc.get('candidate_tokens')} tokens, "
                                             f"{pc.get('precompute_seconds', 0) * 1000:.1f} ms precompute"))
    if report.get("files"):
        rows.append(("report", report["files"]["json"]))
    console.print(kv_table("Evaluation", rows))
    if report.get("invalid_reasons"):
        reasons = ", ".join(f"{k} ({v})" for k, v in report["invalid_reasons"].items())
        console.print(f"[yellow]unparsable outputs:[/] {reasons}")


def without_timings(report: dict[str, Any]) -> dict[str, Any]:
    """The report less what measures the machine (TIMING_KEYS, the grammar's precompute time): what two runs
    with the same seed must reproduce exactly."""
    out = {k: v for k, v in report.items() if k not in TIMING_KEYS}
    if isinstance(out.get("constrained_precompute"), dict):
        out["constrained_precompute"] = {k: v for k, v in out["constrained_precompute"].items()
                                         if k != "precompute_seconds"}
    return out
