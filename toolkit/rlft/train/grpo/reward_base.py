"""The base of the GRPO control rewards: a bounded reward on codec-decoded actions, called the way TRL calls reward
functions, that never raises on an answer (an undecodable or unscorable one gets its lowest value), logs
``parse_rate`` and ``optimal_action_rate``, and checks before step 1 that it can score the data at all."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from rlft.codecs.base import Codec
from rlft.core.errors import InvalidInputError

# kwargs TRL passes to reward functions that are not dataset columns
_TRL_KWARGS = ("trainer_state", "log_extra", "log_metric", "environments")
OPTIMAL_ATOL = 1e-9


def parse_names(text: str | Sequence[str], known: Sequence[str], where: str = "") -> list[str]:
    """``"format,q-advantage"`` (or a list of such) -> the names, in order: trimmed, lower case, ``_`` read as
    ``-``; none, an unknown one or a repeat is refused (``where`` starts the message). The one parser of step and
    episode reward names."""
    items = text.split(",") if isinstance(text, str) else [n for part in text for n in str(part).split(",")]
    names = [n.strip().lower().replace("_", "-") for n in items if n.strip()]
    if not names:
        raise InvalidInputError(f"{where}no reward given", hint=f"use one or more of {', '.join(known)}")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise InvalidInputError(f"{where}unknown reward {', '.join(map(repr, unknown))}",
                                hint=f"known: {', '.join(known)}")
    if len(set(names)) != len(names):
        raise InvalidInputError(f"{where}reward listed twice in {','.join(names)}")
    return names


class Reward:
    """A bounded reward on codec-decoded actions. Subclasses define :meth:`score` for one decoded action."""

    name: ClassVar[str]
    columns: ClassVar[tuple[tuple[str, ...], ...]] = ()  # each inner tuple: one of these columns is needed
    low: float = 0.0
    high: float = 1.0

    def __init__(self, codec: Codec):
        self.codec = codec
        self.__name__ = self.name

    # -- what subclasses define -------------------------------------------------------------------------
    scores_actions_offline = False  # score() is a pure function of (row, action): no env, cheap to call again

    def score(self, action, row: dict[str, Any], index: int) -> float:
        """The reward of a decoded ``action`` for the dataset ``row`` of this completion."""
        raise NotImplementedError

    # -- shared behaviour -------------------------------------------------------------------------------
    def decode(self, completion) -> Any | None:
        """The codec's action for ``completion`` (string or chat messages), or None when it does not decode."""
        try:
            return self.codec.decode_action(completion)
        except Exception:  # noqa: BLE001 - any failure to decode is an invalid answer, never a crash
            return None

    def __call__(self, prompts=None, completions=None, completion_ids=None, **kwargs) -> list[float]:
        log_metric = kwargs.get("log_metric")
        columns = {k: v for k, v in kwargs.items() if k not in _TRL_KWARGS}
        completions = list(completions or [])
        actions = [self.decode(c) for c in completions]
        values, failures, scored = [], [], set()
        for i, action in enumerate(actions):
            value = self.low
            if action is not None:
                try:
                    value = float(self.score(action, _row(columns, i), i))
                    scored.add(i)
                except Exception as exc:  # noqa: BLE001 - an answer the reward cannot score gets the lowest value
                    failures.append(exc)
            values.append(self.clip(value))
        parsed = sum(a is not None for a in actions)
        if parsed and len(failures) == parsed:  # not one answer scored: the reward is broken, not the answers
            raise InvalidInputError(f"reward {self.name!r} could not score any of {parsed} valid answers "
                                    f"({type(failures[0]).__name__}: {failures[0]})") from failures[0]
        if log_metric is not None and failures:
            log_metric("unscored_rate", len(failures) / max(1, parsed))
        if log_metric is not None and completions:
            log_metric("parse_rate", sum(a is not None for a in actions) / len(actions))
            if "optimal_actions" in columns and self.codec.is_discrete_action:
                hits = [a is not None and _is_in(a, columns["optimal_actions"][i]) for i, a in enumerate(actions)]
                log_metric("optimal_action_rate", sum(hits) / len(hits))
            if not self.codec.is_discrete_action:
                self._log_played_gap(list(prompts or []), actions, values, scored, columns, log_metric)
        return values

    def _log_played_gap(self, prompts: list, actions: list, values: list[float], scored: set[int], columns: dict,
                        log_metric) -> None:
        """GRPO trains on sampled answers; evaluation plays the bin-mean (expected) action. Per group of answers
        to one prompt, the mean of its sampled actions estimates the played one: ``sampled_vs_played`` is how far
        a sample lies from it (mean absolute difference, a fraction of the action range), and
        ``NAME/played_minus_sampled`` the reward of that mean action minus the group's mean reward (where this
        reward scores actions without an env): above 0, the played policy is better than the samples GRPO learns
        from say. The samples' rewards are the ones just given (``values``); only the mean action is scored anew,
        in groups whose every answer was scored."""
        space = self.codec.action_space
        width = np.asarray(space.get("high"), np.float64) - np.asarray(space.get("low"), np.float64)
        if width.size == 0 or not np.isfinite(width).all() or len(prompts) != len(actions):
            return
        groups: dict[str, list[int]] = {}
        for i, prompt in enumerate(prompts):
            if actions[i] is not None:
                groups.setdefault(str(prompt), []).append(i)
        spreads, gains = [], []
        for members in groups.values():
            if len(members) < 2:
                continue
            acts = np.asarray([np.asarray(actions[i], np.float64).reshape(-1) for i in members])
            played = acts.mean(axis=0)
            spreads.append(float(np.mean(np.abs(acts - played) / np.maximum(width, 1e-12))))
            if self.scores_actions_offline and scored.issuperset(members):
                with contextlib.suppress(Exception):  # a diagnostic: never a reason for the step to fail
                    played_value = self.clip(float(self.score(played, _row(columns, members[0]), members[0])))
                    gains.append(played_value - float(np.mean([values[i] for i in members])))
        if spreads:
            log_metric("sampled_vs_played", float(np.mean(spreads)))
        if gains:
            log_metric(f"{self.name}/played_minus_sampled", float(np.mean(gains)))

    def preflight(self, rows) -> None:
        """Score the first training row's recorded answer once, before step 1, letting any error out: a reward that
        cannot score the data at all (its env cannot be put into a recorded state, a value it needs is missing or
        not finite) is a configuration error, said now, not a floor given to every answer for the whole run."""
        if len(rows) == 0:
            return
        row = dict(rows[0])
        recorded = row.get("completion")
        action = self.decode(recorded) if recorded is not None else None
        if action is None and row.get("action") is not None:
            action = np.asarray(row["action"]) if isinstance(row["action"], list) else row["action"]
        if action is None:
            return
        try:
            value = float(self.score(action, row, 0))
        except InvalidInputError as exc:
            raise InvalidInputError(f"reward {self.name!r} cannot score this data: {exc.message}",
                                    hint=exc.hint) from exc
        except Exception as exc:  # noqa: BLE001 - any failure on the data's own answer is the reward's
            raise InvalidInputError(f"reward {self.name!r} cannot score this data: the first row's recorded answer "
                                    f"raised {type(exc).__name__}: {exc}") from exc
        if not math.isfinite(value):
            raise InvalidInputError(f"reward {self.name!r} scores the first row's recorded answer {value}: it would "
                                    "train on its floor", hint="check the data's observations and rewards")

    def clip(self, value: float) -> float:
        if not math.isfinite(value):
            return self.low
        return float(min(self.high, max(self.low, value)))

    @classmethod
    def missing_columns(cls, available: Sequence[str]) -> list[str]:
        """Columns this reward needs that ``available`` lacks (alternatives written ``a or b``)."""
        return [" or ".join(group) for group in cls.columns if not any(c in available for c in group)]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, bounds=[{self.low:g}, {self.high:g}])"


def _row(columns: dict[str, Any], i: int) -> dict[str, Any]:
    """The dataset columns TRL passed for completion ``i``."""
    return {k: v[i] for k, v in columns.items() if isinstance(v, Sequence | np.ndarray) and len(v) > i}


def _is_in(action, choices) -> bool:
    try:
        return int(action) in {int(c) for c in choices}
    except (TypeError, ValueError):
        return False
