"""The range a new seed of an experiment is expected in, and the check that a fresh run landed there.

A row's min-max over three seeds is not a range to reproduce into: the next seed falls outside the range of n
seeds with probability 2/(n+1) (half the time for n = 3) even when nothing changed. The range a row states for a
reproduction is the 95% prediction interval for one more seed, mean +- t(0.975, n-1) * std * sqrt(1 + 1/n) over
the committed seeds (Student's t; seeds assumed independent draws of one normal score), of the metric the row is
judged by (``HEADLINES``: success, else the reference-normalized score, else ...). ``rlft results check NAME
--record seed-S.json`` compares a new seed's record with the committed seeds of NAME (its own seed left out).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlft.core.errors import InvalidInputError
from rlft.core.reading import is_number, read_json_mapping

LEVEL = 0.95
MIN_SEEDS = 3  # with two seeds the interval is wider than any score range: nothing to check against
BOUNDS = {"success_rate": (0.0, 1.0)}
HEADLINES = (("success_rate", "success", ".3f"), ("normalized_score", "normalized score", ".1f"),
             ("expert_normalized_score", "score (random 0, expert 100)", ".1f"), ("return_mean", "return", ".1f"))


def prediction_interval(values: list[float], level: float = LEVEL) -> tuple[float, float] | None:
    """The ``level`` prediction interval for one more draw of ``values`` (None under MIN_SEEDS values)."""
    import numpy as np  # here, not at the top: rlft results render is imported with the CLI, which stays light
    from scipy.stats import t as student_t

    arr = np.asarray([v for v in values if v is not None], dtype=float)
    if len(arr) < MIN_SEEDS:
        return None
    half = student_t.ppf(0.5 + level / 2, len(arr) - 1) * arr.std(ddof=1) * np.sqrt(1 + 1 / len(arr))
    return float(arr.mean() - half), float(arr.mean() + half)


def expected_range(values: list[float], key: str) -> tuple[float, float] | None:
    """The prediction interval of ``values`` of metric ``key``, cut to the metric's bounds (a rate stays in 0-1)."""
    interval = prediction_interval(values)
    if interval is None or key not in BOUNDS:
        return interval
    low, high = BOUNDS[key]
    return max(interval[0], low), min(interval[1], high)


def headline_key(report_keys) -> tuple[str, str] | None:
    """(key, format) of the metric a row is judged by among ``report_keys``."""
    keys = set(report_keys)
    return next(((key, fmt) for key, _, fmt in HEADLINES if key in keys), None)


def check_record(name: str, record_path: Path, results_dir: Path) -> dict[str, Any]:
    """Each policy of the new seed record against the prediction interval of the committed seeds of ``name``."""
    from rlft.results.summary import check_record_shape, load_seed_records

    record = read_json_mapping(record_path, "seed record")
    if not isinstance(record.get("reports"), dict) or not record["reports"]:
        raise InvalidInputError(f"{record_path} holds no reports: not a seed record of rlft results record")
    check_record_shape(record, record_path)
    if record.get("experiment") != name:  # another experiment's seed "reproduced" this one (hostile pass 20, F3)
        raise InvalidInputError(f"{record_path} is a seed record of experiment {record.get('experiment')!r}, not "
                                f"{name!r}", hint=f"rlft results check {record.get('experiment')} --record ...")
    committed = [r for r in load_seed_records(Path(results_dir) / name) if r.get("seed") != record.get("seed")]
    if len(committed) < MIN_SEEDS:
        raise InvalidInputError(f"{results_dir}/{name} holds {len(committed)} seed(s) besides seed "
                                f"{record.get('seed')}: a range to reproduce into needs at least {MIN_SEEDS}",
                                hint="record more seeds of the experiment first")
    _check_same_envs(record, committed, record_path, name)
    metric = headline_key(k for rep in record["reports"].values() for k, v in rep.items() if v is not None)
    if metric is None:
        raise InvalidInputError(f"{record_path}'s reports carry no score ({', '.join(k for k, _, _ in HEADLINES)})")
    key, fmt = metric
    rows = []
    for label, report in record["reports"].items():
        values = [r["reports"][label].get(key) for r in committed if label in r.get("reports", {})]
        interval = expected_range(values, key)
        value = report.get(key)
        inside = None if interval is None or value is None else interval[0] <= value <= interval[1]
        rows.append({"label": label, "value": value, "interval": interval, "inside": inside,
                     "seeds": len([v for v in values if v is not None])})
    # a policy every committed seed played and this one did not is a miss, not a pass (a seed without the LLM
    # "reproduced": hostile pass 21, F8)
    for label in sorted(set.intersection(*(set(r.get("reports", {})) for r in committed)) - set(record["reports"])):
        values = [r["reports"][label].get(key) for r in committed]
        rows.append({"label": label, "value": None, "interval": expected_range(values, key), "inside": False,
                     "seeds": len([v for v in values if v is not None]), "missing": True})
    return {"name": name, "seed": record.get("seed"), "key": key, "format": fmt, "rows": rows,
            "committed_seeds": [r.get("seed") for r in committed],
            "other_data": other_data(record, committed),
            "reproduced": all(row["inside"] is not False for row in rows) and any(row["inside"] for row in rows)}


def _check_same_envs(record: dict, committed: list[dict], record_path: Path, name: str) -> None:
    """Each policy of the new record played the env its committed seeds played."""
    for label, report in record["reports"].items():
        envs = {r["reports"][label].get("env_id") for r in committed if label in r.get("reports", {})}
        if envs and report.get("env_id") not in envs:
            raise InvalidInputError(f"{record_path}: {label} played {report.get('env_id')}, the seeds of {name} "
                                    f"played {', '.join(sorted(map(str, envs)))}")


def data_build(record: dict) -> dict[str, tuple]:
    """Each dataset a seed record trained on, as (episodes, steps, return mean to 0.01): two builds of one recipe
    that differ here hold different data (an expert trained on another CPU stops at another step)."""
    datasets = record.get("datasets") if isinstance(record.get("datasets"), dict) else {}
    return {name: (d.get("episodes"), d.get("steps"), round(float(d["return_mean"]), 2)
                   if is_number(d.get("return_mean")) else None)
            for name, d in datasets.items() if isinstance(d, dict)}


def other_data(record: dict, committed: list[dict]) -> list[dict[str, Any]]:
    """The datasets on which the new seed differs from every committed seed: a miss there may be the data's, not
    the method's (results then compare builds, not seeds)."""
    new, seen = data_build(record), [data_build(r) for r in committed]
    return [{"dataset": name, "new": build, "committed": sorted({s[name] for s in seen if name in s}, key=str)}
            for name, build in new.items()
            if any(name in s for s in seen) and all(s.get(name) != build for s in seen)]
