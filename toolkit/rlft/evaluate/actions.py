"""Held-out action error: how far a policy's actions are from the recorded ones on a dataset's held-out rows.

Return says whether a policy works; the action error says where it fails and compares any two policies on the same
states, open loop: an LLM, the behaviour-cloning MLP and the expert answer the same observations of the held-out
split (validation, else test), and each answer is compared with the recorded action. Errors are absolute, per
dimension, and as a fraction of the dimension's range (:func:`rlft.policy.action_metrics.action_scale`), the unit
SFT logs; an unparsable LLM answer is measured as the fallback action the policy plays (and counted). ``rlft eval
--action-error DATASET`` adds these figures to the report.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlft.core.errors import InvalidInputError
from rlft.datasets.dataset import RlftDataset
from rlft.datasets.layout import HELD_OUT_SPLITS
from rlft.datasets.loading import column_array
from rlft.policy.action_metrics import action_errors, action_scale, error_summary
from rlft.policy.policies import Policy

MAX_ROWS = 2000
BATCH = 256


def held_out_rows(data: RlftDataset, seed: int, max_rows: int = MAX_ROWS) -> tuple[np.ndarray, np.ndarray, str]:
    """(observations, recorded actions, split) of up to ``max_rows`` rows of the dataset's held-out split, a
    seeded sample when it has more."""

    dataset, codec = data.given, data.codec
    if codec.action_space["type"] != "box":
        raise InvalidInputError(f"--action-error measures continuous actions; {dataset} has discrete ones",
                                hint="discrete policies are judged by agreement (--expert) and return")
    split = next((s for s in HELD_OUT_SPLITS if data.has_split(s)), None)
    if split is None:
        raise InvalidInputError(f"{dataset} has no held-out split ({' or '.join(HELD_OUT_SPLITS)})",
                                hint="serialize with --splits 0.8,0.1,0.1")
    table = data.table(["observation", "action"], split)
    rows = np.arange(table.num_rows)
    if len(rows) > max_rows:
        rows = np.sort(np.random.default_rng(seed).choice(len(rows), size=max_rows, replace=False))
    table = table.take(rows)
    return column_array(table, "observation"), column_array(table, "action"), split


def policy_action_error(policy: Policy, observations: np.ndarray, recorded: np.ndarray,
                        action_space: dict[str, Any]) -> dict[str, Any]:
    """The policy's answers to ``observations`` (a batch of slots at a time, each a fresh episode) against
    ``recorded``: :func:`error_summary` figures, the mean absolute error per dimension in action units, and the
    share of answers that did not parse."""
    template = getattr(getattr(policy, "codec", None), "template", None)
    if template is not None and (template.history or template.return_to_go or template.turns):
        raise InvalidInputError("--action-error needs prompts of one observation: this codec's prompts carry "
                                "history, return-to-go or turns, which held-out rows do not give")
    answers, invalid = [], policy.invalid
    for start in range(0, len(observations), BATCH):
        obs = observations[start : start + BATCH]
        slots = list(range(len(obs)))
        for slot, o in zip(slots, obs, strict=True):
            policy.begin_episode(slot, 0, 0, o)
        answers.append(np.asarray(policy.act(obs, slots), dtype=float).reshape(len(obs), -1))
    actions = np.concatenate(answers)
    invalid = policy.invalid - invalid
    recorded = recorded.reshape(len(recorded), -1)
    errors = action_errors(list(actions), recorded, action_scale(action_space, recorded))
    return {**error_summary(errors), "action_error_rows": len(recorded), "action_error_invalid": int(invalid),
            "action_mae_units_per_dim": [round(float(e), 5) for e in np.abs(actions - recorded).mean(axis=0)],
            **magnitude_ratio(actions, recorded)}


def magnitude_ratio(actions: np.ndarray, recorded: np.ndarray) -> dict[str, Any]:
    """How hard the policy pushes compared with the data on the same states: mean ``|action|`` over mean
    ``|recorded|`` (all dimensions, and per dimension; None where the data never moves). Two policies with the same
    error can differ here, and the return can hinge on it (HalfCheetah, results row 5f: the expert's own actions
    scaled by 0.98 or 1.02 move its score by about a third of a point down or up); below 1, the policy acts more
    timidly than its data."""
    mine, theirs = np.abs(actions).mean(axis=0), np.abs(recorded).mean(axis=0)
    per_dim = np.divide(mine, theirs, out=np.full_like(mine, np.nan), where=theirs > 0)
    total = float(mine.sum() / theirs.sum()) if theirs.sum() > 0 else None
    return {"action_magnitude_ratio": total,
            "action_magnitude_ratio_per_dim": [round(float(r), 5) if np.isfinite(r) else None for r in per_dim]}
