"""The reference scores a Minari dataset's metadata.json gives (``ref_min_score`` / ``ref_max_score``), checked where
rlft reads them: a normalized score is ``(x - min) / (max - min)``."""

from __future__ import annotations

import math
from pathlib import Path

from rlft.core.errors import InvalidInputError


def check_reference_scores(meta, file: Path | str, source: str) -> None:
    """metadata.json's ``ref_min_score`` / ``ref_max_score``, when given, must be finite numbers with min < max.

    Refused, not dropped with a warning: serialize copies them into the dataset it writes (its card and every later
    normalized score read them), so a bad value ignored here would come back elsewhere; and "NaN" (a string), a
    NaN or min == max (a score of -inf) is a damaged file, like a damaged episode count."""
    if not isinstance(meta, dict):
        return
    values = {key: meta.get(key) for key in ("ref_min_score", "ref_max_score")}
    for key, value in values.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                                  or not math.isfinite(value)):
            _refuse(source, f"{file}: {key} must be a finite number, got {value!r}")
    low, high = values["ref_min_score"], values["ref_max_score"]
    if low is not None and high is not None and not low < high:
        _refuse(source, f"{file}: ref_min_score {low!r} must be below ref_max_score {high!r} (a normalized score "
                        "divides by their difference)")


def _refuse(source: str, why: str) -> None:
    raise InvalidInputError(f"cannot read Minari dataset {source}: its files are damaged ({why})",
                            hint="fix the reference scores in its metadata.json, re-create it (rlft data collect "
                                 "--overwrite) or download it again")
