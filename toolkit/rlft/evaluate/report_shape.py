"""An eval report read back (``eval compare``, ``results record``): every field its readers use checked against
what ``rlft eval`` writes, so an edited or damaged report is one line naming the field, never a traceback in the
table, the verdict or the paired difference that uses it (hostile passes 12, 15 and 16)."""

from __future__ import annotations

import os
from typing import Any

from rlft.core.errors import InvalidInputError
from rlft.core.reading import is_number, read_json_mapping

REPORT_VERSION = 1  # what rlft eval writes; a reader refuses a later one (pass 18, U3: 99 was read as 1)
INF = float("inf")
# the largest return a reader takes: its square, the spread of a paired difference and a plot's axis stay finite
# (returns of 1e308 were recorded, then a traceback in results summarize's plot: hostile pass 18, B8)
LIMIT = 1e150
# the numbers a report's readers (compare, results record) show, and the values an evaluation can give them
REPORT_RANGES = [("return_mean", -LIMIT, LIMIT), ("return_std", 0.0, LIMIT), ("return_stderr", 0.0, LIMIT),
                 ("normalized_score", -LIMIT, LIMIT), ("success_rate", 0.0, 1.0), ("optimal_success_exact", 0.0, 1.0),
                 ("expert_agreement", 0.0, 1.0), ("invalid_action_rate", 0.0, 1.0), ("episodes", 1, INF),
                 ("seed", 0, INF)]
WHOLE = ("episodes", "seed")  # counts: 2.5 episodes is no evaluation's
EDITED_HINT = "evaluate again (rlft eval) instead of editing the report"


def load_report(path: str | os.PathLike) -> dict[str, Any]:
    data = read_json_mapping(path, "report")
    if "rlft_report_version" not in data:
        raise InvalidInputError(f"{path} is not an rlft eval report (no rlft_report_version)")
    version = data["rlft_report_version"]
    if not (isinstance(version, int) and not isinstance(version, bool) and 1 <= version <= REPORT_VERSION):
        raise InvalidInputError(f"{path}: rlft_report_version {version!r} is not one this rlft reads (1 to "
                                f"{REPORT_VERSION})", hint="a newer rlft wrote it: upgrade rlft, or evaluate again")
    if "episodes" not in data:  # every evaluation writes it; the verdict and the tables divide by it
        raise InvalidInputError(f"{path}: no episodes, which every rlft evaluation writes", hint=EDITED_HINT)
    for key, low, high in REPORT_RANGES:
        value = data.get(key)  # what no rlft evaluation writes (a NaN score, a rate of 7, -5 episodes): edited
        if value is None:
            continue
        if (not is_number(value, finite=True) or not low <= value <= high
                or (key in WHOLE and not isinstance(value, int))):
            raise InvalidInputError(f"{path}: {key} is {value!r}, which no rlft evaluation writes", hint=EDITED_HINT)
    _check_report_lists(data, path)
    _check_reference_scores(data, path)
    if data.get("optimal_success_exact") is not None and data.get("success_rate") is None:
        raise InvalidInputError(f"{path}: optimal_success_exact without success_rate, which no rlft evaluation "
                                "writes (a FrozenLake evaluation writes both)", hint=EDITED_HINT)
    return data


def _check_report_lists(data: dict[str, Any], path) -> None:
    """Names as text, returns and seeds one finite number per episode (pass 15, B7/B8: tracebacks in compare)."""
    bad = [k for k in ("env_id", "policy", "policy_kind") if data.get(k) is not None and not isinstance(data[k], str)]
    bad += [k for k in ("returns", "seeds") if data.get(k) is not None and not (
        isinstance(data[k], list) and len(data[k]) == data["episodes"] and all(
            is_number(v, finite=True) and abs(v) <= LIMIT for v in data[k]))]
    if bad:
        raise InvalidInputError(f"{path}: {', '.join(bad)} not as rlft eval writes it", hint=EDITED_HINT)


def _check_reference_scores(data: dict[str, Any], path) -> None:
    """None, or the env's random and expert returns (two different finite numbers): normalized points divide by
    their difference."""
    ref = data.get("reference_scores")
    if ref is None:
        return
    if not (isinstance(ref, dict) and is_number(ref.get("random"), finite=True)
            and is_number(ref.get("expert"), finite=True) and ref["expert"] != ref["random"]
            and max(abs(ref["random"]), abs(ref["expert"])) <= LIMIT):
        raise InvalidInputError(f"{path}: reference_scores is {ref!r}, not as rlft eval writes it (random and "
                                "expert returns, two different numbers)", hint=EDITED_HINT)
