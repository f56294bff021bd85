"""Train to a criterion, not a budget: decode every decision state greedily while training, stop when right.

A fixed step budget ends wherever training happens to be; on FrozenLake one wrong state costs most of the
success rate. :class:`DecisionCheck` holds the dataset's decision states (its prompts, built by the codec, and
the actions that count as correct: every tied optimal action of a Q dataset's ``optimal_actions``, else the
recorded ``action``). Every ``check_steps`` optimizer steps :class:`CriterionCallback` decodes all of them
greedily through :mod:`rlft.policy` (the backend, constrained decoding and parser ``rlft eval`` uses), logs
``decision_accuracy`` and, with a target, stops training once it is reached; ``max_steps`` stays the cap.

A continuous action counts as correct when every dimension is within ``tolerance`` of the action space's
range of the recorded action.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlft.codecs.base import ActionParseError, Codec
from rlft.core.errors import InvalidInputError


@dataclass
class DecisionCheck:
    """The decision states a policy is graded on, and how."""

    prompts: list[Any]  # as the codec builds them: strings or chat messages
    correct: list[Any]  # discrete: sets of correct actions; continuous: the recorded action (array)
    codec: Codec
    tolerance: float = 0.05
    discrete: bool = True
    labels: list[Any] = field(default_factory=list)  # per state: the Q dataset's state index, else the row

    def __len__(self) -> int:
        return len(self.prompts)

    def grade(self, texts: list[str]) -> tuple[np.ndarray, int]:
        """(correct per state, unparsable outputs) for the model's completion texts."""
        ok = np.zeros(len(texts), dtype=bool)
        invalid = 0
        space = self.codec.action_space
        width = None if self.discrete else np.asarray(space["high"], float) - np.asarray(space["low"], float)
        for i, (text, want) in enumerate(zip(texts, self.correct, strict=True)):
            try:
                action = self.codec.decode_action(text)
            except ActionParseError:
                invalid += 1
                continue
            if self.discrete:
                ok[i] = int(action) in want
            else:
                err = np.abs(np.asarray(action, float).ravel() - want) / np.where(width > 0, width, 1.0)
                ok[i] = bool(np.all(err <= self.tolerance))
        return ok, invalid


def decision_check(dataset, codec: Codec, max_states: int, seed: int, tolerance: float = 0.05) -> DecisionCheck:
    """The decision states of ``dataset`` (a ``datasets.Dataset`` with a ``prompt`` column): all rows up to
    ``max_states``, else a seeded sample of that many."""
    columns = dataset.column_names
    if "prompt" not in columns:
        raise InvalidInputError("checking decisions needs a 'prompt' column")
    discrete = codec.action_space["type"] == "discrete"
    target = "optimal_actions" if discrete and "optimal_actions" in columns else "action"
    if target not in columns:
        raise InvalidInputError(f"checking decisions needs an '{target}' column (the actions that count as right)",
                                hint=f"the dataset's columns: {', '.join(columns)}")
    if max_states < 1:
        raise InvalidInputError(f"--check-states must be at least 1, got {max_states}")
    rows = np.arange(len(dataset))
    if len(rows) > max_states:
        rows = np.sort(np.random.default_rng(seed).choice(len(rows), size=max_states, replace=False))
    subset = dataset.select(rows.tolist())
    wanted = subset[target]
    if discrete:
        correct = [set(map(int, w)) if isinstance(w, list) else {int(w)} for w in wanted]
    else:
        correct = [np.asarray(w, dtype=float).ravel() for w in wanted]
    labels = subset["state"] if "state" in columns else rows.tolist()
    return DecisionCheck(list(subset["prompt"]), correct, codec, tolerance, discrete, list(labels))


class DecisionDecoder:
    """Greedy decoding of a :class:`DecisionCheck`'s prompts with a (training) model, batched."""

    def __init__(self, check: DecisionCheck, tokenizer, model, constrained: bool = True, batch_size: int = 64):
        from rlft.policy.constrained import build_token_table
        from rlft.policy.generation import default_max_new_tokens

        self.check = check
        self.tokenizer = tokenizer
        self.table = build_token_table(check.codec, tokenizer, model) if constrained else None
        self.max_new_tokens = default_max_new_tokens(check.codec, self.table)
        self.batch_size = batch_size

    def texts(self, model) -> list[str]:
        from rlft.policy.generation import TransformersBackend

        side = self.tokenizer.padding_side  # generation pads left; the trainer's collator keeps its own side
        was_training = model.training
        model.eval()
        try:
            backend = TransformersBackend(model, self.tokenizer, self.max_new_tokens, token_table=self.table)
            prompts = self.check.prompts
            return [t for i in range(0, len(prompts), self.batch_size)
                    for t in backend.generate(prompts[i : i + self.batch_size])]
        finally:
            self.tokenizer.padding_side = side
            if was_training:
                model.train()

    def accuracy(self, model) -> tuple[float, np.ndarray, int]:
        ok, invalid = self.check.grade(self.texts(model))
        return float(ok.mean()), ok, invalid


def _callback_base():
    from transformers import TrainerCallback

    return TrainerCallback


class CriterionCallback(_callback_base()):
    """Every ``every`` steps (and before the first), decode every decision state; stop at ``target``."""

    def __init__(self, check: DecisionCheck, every: int, target: float | None = None, constrained: bool = True):
        if every < 1:
            raise InvalidInputError(f"--check-steps must be at least 1, got {every}")
        if target is not None and not 0.0 < target <= 1.0:
            raise InvalidInputError(f"--stop-at-accuracy must be in (0, 1], got {target}")
        self.check = check
        self.every = every
        self.target = target
        self.constrained = constrained
        self.decoder: DecisionDecoder | None = None
        self.history: list[tuple[int, float]] = []
        self.reached_at: int | None = None
        self.wrong_states: list[Any] = []
        self._pending: float | None = None

    def _measure(self, state, model, tokenizer, control, log: bool = True) -> None:
        if self.decoder is None:
            self.decoder = DecisionDecoder(self.check, tokenizer, model, self.constrained)
        accuracy, ok, _ = self.decoder.accuracy(model)
        self.history.append((int(state.global_step), accuracy))
        self.wrong_states = [label for label, good in zip(self.check.labels, ok, strict=True) if not good]
        if log:  # the trainer logs at the current step: a check made at step N is logged at step N
            self._pending = accuracy
            control.should_log = True
        if self.target is not None and accuracy >= self.target - 1e-12 and self.reached_at is None:
            self.reached_at = int(state.global_step)
            control.should_training_stop = True

    def on_train_begin(self, args, state, control, model=None, processing_class=None, **kwargs):
        if state.global_step == 0:  # kept in the summary; the trainer's first log is at step 1
            self._measure(state, model, processing_class, control, log=False)
        return control

    def on_step_end(self, args, state, control, model=None, processing_class=None, **kwargs):
        if state.global_step % self.every == 0:
            self._measure(state, model, processing_class, control)
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        # Placed before the TensorBoard callback, so the value reaches TensorBoard and the log history.
        if self._pending is not None and logs is not None:
            logs["decision_accuracy"] = self._pending
            if state.log_history:
                state.log_history[-1]["decision_accuracy"] = self._pending
            self._pending = None
        return control

    def summary(self) -> dict[str, Any]:
        """What the run records: the target, the step it was reached at (or None), every check."""
        return {
            "target": self.target,
            "reached": self.reached_at is not None,
            "reached_at_step": self.reached_at,
            "check_steps": self.every,
            "states": len(self.check),
            "decoding": "greedy, constrained" if self.constrained else "greedy",
            "final_accuracy": self.history[-1][1] if self.history else None,
            "wrong_states": [int(s) if isinstance(s, int | np.integer) else s for s in self.wrong_states],
            "history": [[step, round(acc, 6)] for step, acc in self.history],
        }
