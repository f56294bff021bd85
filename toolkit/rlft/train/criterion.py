"""Train to a criterion, not a budget: decode every decision state greedily while training, stop when right.

A fixed step budget ends wherever training happens to be; on FrozenLake one wrong state costs most of the
success rate. :class:`DecisionCheck` holds the dataset's decision states (its prompts, built by the codec, and
the actions that count as correct: every tied optimal action of a Q dataset's ``optimal_actions``, else the
recorded ``action``). Every ``check_steps`` optimizer steps :class:`CriterionCallback` decodes all of them
greedily through :mod:`rlft.policy` (the backend, constrained decoding and parser ``rlft eval`` uses), logs
``decision_accuracy`` and, with a target, stops training once it is reached; ``max_steps`` stays the cap.

A continuous action counts as correct when every dimension is within ``tolerance`` of the action space's
range of the recorded action. That share hides failures: a Pendulum policy was 94% "accurate" while it answered
swing-up states 0.74 off on average and played at random level. So continuous checks also log the **action error**
(:func:`action_errors`: the mean absolute error per dimension as a fraction of its range, unparsable answers
counted as a whole range off) and its mean over the worst tenth of states, grade states of the held-out split when
the dataset has one, and stop on ``stop_at_action_error`` rather than on accuracy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlft.codecs.base import ActionParseError, Codec
from rlft.core.console import console
from rlft.core.errors import InvalidInputError
from rlft.policy.action_metrics import action_errors, action_scale, error_summary
from rlft.policy.action_scores import MAX_CHOICES, ActionChoices, action_distribution, policy_signals
from rlft.policy.decoding import LocalDecoding
from rlft.policy.generation import generating


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

    split: str = "train"  # the split the states come from (continuous checks prefer a held-out one)

    def scale(self) -> np.ndarray:
        """Per action dimension, the width errors are measured against (:func:`action_scale`)."""
        return action_scale(self.codec.action_space, np.stack(self.correct))

    def decode(self, texts: list[str]) -> tuple[list[Any], int]:
        """(the action of each text, None where it does not parse; how many did not)."""
        actions: list[Any] = []
        for text in texts:
            try:
                actions.append(self.codec.decode_action(text))
            except ActionParseError:
                actions.append(None)
        return actions, sum(a is None for a in actions)

    def grade(self, texts: list[str]) -> tuple[np.ndarray, int]:
        """(correct per state, unparsable outputs) for the model's completion texts."""
        actions, invalid = self.decode(texts)
        return self.right(actions), invalid

    def right(self, actions: list[Any]) -> np.ndarray:
        """Per state, whether its decoded action (None: unparsable) counts as correct."""
        if self.discrete:
            return np.array([a is not None and int(a) in want for a, want in zip(actions, self.correct, strict=True)],
                            dtype=bool)
        return np.all(self.errors(actions) <= self.tolerance, axis=1)

    def errors(self, actions: list[Any]) -> np.ndarray:
        """(states, dims) absolute error of each decoded action against the recorded one, as a fraction of each
        dimension's :meth:`scale` (1.0 for an unparsable answer)."""
        return action_errors(actions, np.stack(self.correct), self.scale())


def decision_check(dataset, codec: Codec, max_states: int, seed: int, tolerance: float = 0.05,
                   split: str = "train") -> DecisionCheck:
    """The decision states of ``dataset`` (a ``datasets.Dataset`` with a ``prompt`` column; ``split`` names it):
    all rows up to ``max_states``, else a seeded sample of that many."""
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
    return DecisionCheck(list(subset["prompt"]), correct, codec, tolerance, discrete, list(labels), split)



class DecisionDecoder:
    """Greedy decoding of a :class:`DecisionCheck`'s prompts with a (training) model, batched."""

    def __init__(self, check: DecisionCheck, tokenizer, model, constrained: bool = True, batch_size: int = 64):
        self.check = check
        self.tokenizer = tokenizer
        # what `rlft eval` plays by default: a binned codec's bins read per dimension where the tokenizer allows
        self.decoding = LocalDecoding.choose(check.codec, tokenizer, model, constrained=constrained,
                                             bin_decoding="auto" if constrained else "off")
        self.batch_size = batch_size

    def describe(self) -> str:
        return self.decoding.describe()

    def backend(self, model):
        """A fresh generation backend over ``model`` as it is now (the model changes between checks)."""
        return self.decoding.backend(model)

    def texts(self, model) -> list[str]:
        with generating(model, self.tokenizer):
            backend = self.backend(model)
            prompts = self.check.prompts
            return [t for i in range(0, len(prompts), self.batch_size)
                    for t in backend.generate(prompts[i : i + self.batch_size])]

    def measure(self, model) -> tuple[float, np.ndarray, dict[str, Any]]:
        """(accuracy, correct per state, the action-error figures of a continuous check, else {}) of one
        decoding pass."""
        actions, _ = self.check.decode(self.texts(model))
        ok = self.check.right(actions)
        return float(ok.mean()), ok, ({} if self.check.discrete else error_summary(self.check.errors(actions)))


def _callback_base():
    from transformers import TrainerCallback

    return TrainerCallback


class CriterionCallback(_callback_base()):
    """Every ``every`` steps (and before the first), decode every decision state; stop at ``target`` accuracy
    (discrete actions) or once the action error is at most ``error_target`` (continuous actions)."""

    def __init__(self, check: DecisionCheck, every: int, target: float | None = None, constrained: bool = True,
                 error_target: float | None = None, episodes: Any = None, keep_best: bool = False):
        if every < 1:
            raise InvalidInputError(f"--check-steps must be at least 1, got {every}")
        if target is not None and not 0.0 < target <= 1.0:
            raise InvalidInputError(f"--stop-at-accuracy must be in (0, 1], got {target}")
        if target is not None and not check.discrete:
            raise InvalidInputError(
                "--stop-at-accuracy is for discrete actions: on a continuous space the share of states within "
                "--check-tolerance hides large errors on the rest (a Pendulum policy was 94% 'accurate' at random "
                "level)", hint="stop on the held-out action error instead: --stop-at-action-error 0.02")
        if error_target is not None and check.discrete:
            raise InvalidInputError("--stop-at-action-error is for continuous actions: use --stop-at-accuracy")
        if error_target is not None and not 0.0 < error_target < 1.0:
            raise InvalidInputError(f"--stop-at-action-error must be in (0, 1), got {error_target}")
        self.check = check
        self.every = every
        self.target = target
        self.error_target = error_target
        self.constrained = constrained
        self.decoder: DecisionDecoder | None = None
        self.history: list[tuple[int, float]] = []
        self.errors: list[tuple[int, dict[str, Any]]] = []  # continuous checks: (step, error_summary)
        self.reached_at: int | None = None
        self.wrong_states: list[Any] = []
        self._pending: dict[str, float] | None = None
        self.choices: Any = None  # discrete actions: every valid answer, scored for the policy's exact distribution
        self.signals: list[tuple[int, dict[str, float]]] = []
        self.episodes = episodes  # a closed-loop ReturnCheck (rlft.train.closed_loop), or None
        self.returns: list[tuple[int, dict[str, Any]]] = []
        self.fell_at: int | None = None  # the first check whose return fell below the start's by more than noise
        self.keep_best = keep_best
        # with keep_best: (step, check return, the weights then, each check episode's return)
        self.best: tuple[int, float, dict, Any] | None = None

    def _measure(self, state, model, tokenizer, control, log: bool = True) -> None:
        if self.decoder is None:
            self.decoder = DecisionDecoder(self.check, tokenizer, model, self.constrained)
        accuracy, ok, errors = self.decoder.measure(model)
        step = int(state.global_step)
        self.history.append((step, accuracy))
        if errors:
            self.errors.append((step, errors))
        self.wrong_states = [label for label, good in zip(self.check.labels, ok, strict=True) if not good]
        signals = self._policy_signals(model, tokenizer)
        if signals:
            self.signals.append((step, signals))
        played = self._play(model, tokenizer)
        if played:
            self.returns.append((step, played))
            self._warn_if_fell(step, played)
            self._keep_if_best(step, played, model)
        if log:  # the trainer logs at the current step: a check made at step N is logged at step N
            self._pending = {"decision_accuracy": accuracy, **signals, **played,
                             **{k: v for k, v in errors.items() if not isinstance(v, list)}}
            control.should_log = True
        reached = self._reached(accuracy, errors) or (bool(played) and self.episodes.reached(played))
        if reached and self.reached_at is None:
            self.reached_at = step
            control.should_training_stop = True

    def _policy_signals(self, model, tokenizer) -> dict[str, float]:
        """Discrete actions: the policy's exact distribution over the valid answers of every checked state, reduced
        to its mean entropy and the probability of the correct actions (mean, worst state): a stalled run shows
        whether it is still exploring and which states it is sure of wrongly."""

        space = self.check.codec.action_space
        if not self.check.discrete or int(space.get("n", MAX_CHOICES + 1)) > MAX_CHOICES:
            return {}
        if self.choices is None:
            self.choices = ActionChoices(self.check.codec, tokenizer, model)
        with generating(model, tokenizer):
            probs = action_distribution(self.choices.log_likelihoods(model, self.check.prompts, decisive=True))
        return policy_signals(probs, self.check.correct, self.choices.actions)

    def _play(self, model, tokenizer) -> dict[str, Any]:
        """The closed-loop check's figures (:mod:`rlft.train.closed_loop`), {} when it is off."""
        if self.episodes is None:
            return {}
        with generating(model, tokenizer):
            return self.episodes.play(model, self.decoder.backend(model))

    def _keep_if_best(self, step: int, played: dict[str, Any], model) -> None:
        """--keep-best-check: a copy of the trainable weights (all of a small model's, a LoRA adapter's) of the best
        check so far, on the CPU: a later check replaces it only when it beats it on the same episodes beyond noise
        (:meth:`ReturnCheck.beats`)."""
        returns = self.episodes.last_returns
        if not self.keep_best or (self.best is not None and not self.episodes.beats(self.best[3], returns)):
            return
        weights = {k: v.detach().to("cpu", copy=True) for k, v in model.named_parameters() if v.requires_grad}
        self.best = (step, played["check_return"], weights, returns)

    def on_train_end(self, args, state, control, model=None, **kwargs):
        """--keep-best-check: the best check's weights go back into the model before it is saved."""
        if self.keep_best and self.best is not None and model is not None and self.best[0] != state.global_step:
            import torch

            params = dict(model.named_parameters())
            with torch.no_grad():
                for name, value in self.best[2].items():
                    params[name].copy_(value.to(params[name].device))
            console.print(f"[bold]kept the check of step {self.best[0]}[/] (return {self.best[1]:.4g}, the best of "
                          f"{len(self.returns)} checks beyond their noise), not the last", highlight=False)
        return control

    def _warn_if_fell(self, step: int, played: dict[str, Any]) -> None:
        """Said once, the first time the closed-loop return falls below the start's (the check before training)
        by more than its noise: the training is making the policy worse, whatever its reward or loss says."""
        first_step, start = self.returns[0]
        if self.fell_at is not None or first_step != 0 or step == 0:
            return
        band = self.episodes.fell(start, played)
        if band is not None:
            self.fell_at = step
            console.print(f"[yellow]Warning: at step {step} the closed-loop return ({played['check_return']:.4g}) "
                          f"fell below the start's ({start['check_return']:.4g}) by more than its noise "
                          f"({band:.3g}): training is making the policy worse[/] (lower the learning rate, raise "
                          "--beta, or stop at the best check)", highlight=False, soft_wrap=True)

    def _reached(self, accuracy: float, errors: dict[str, Any]) -> bool:
        if self.target is not None:
            return accuracy >= self.target - 1e-12
        return self.error_target is not None and errors["action_error"] <= self.error_target

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
            logs.update(self._pending)
            if state.log_history:
                state.log_history[-1].update(self._pending)
            self._pending = None
        return control

    def summary(self) -> dict[str, Any]:
        """What the run records: the target, the step it was reached at (or None), every check."""
        record = {
            "target": self.target,
            "reached": self.reached_at is not None,
            "reached_at_step": self.reached_at,
            "check_steps": self.every,
            "states": len(self.check),
            "split": self.check.split,
            "decoding": self.decoder.describe() if self.decoder is not None else (
                "greedy, constrained" if self.constrained else "greedy"),
            "final_accuracy": self.history[-1][1] if self.history else None,
            "wrong_states": [int(s) if isinstance(s, int | np.integer) else s for s in self.wrong_states],
            "history": [[step, round(acc, 6)] for step, acc in self.history],
        }
        if self.signals:  # [step, mean entropy, mean and worst-state probability of the correct actions]
            record["signal_history"] = [[step, round(v["policy_entropy"], 5), round(v["policy_correct_prob"], 5),
                                         round(v["policy_correct_prob_min"], 5)] for step, v in self.signals]
        if self.episodes is not None:  # [step, mean return, min return, normalized score or None]
            record["episodes"] = {**self.episodes.describe(), "history": [
                [step, round(r["check_return"], 4), round(r["check_return_min"], 4),
                 None if "check_normalized_score" not in r else round(r["check_normalized_score"], 3)]
                for step, r in self.returns]}
            record["episodes"]["fell_below_start_at_step"] = self.fell_at
            if self.returns:  # the rollout speed of the policy being trained, at the checks' envs
                record["episodes"]["env_steps_per_second"] = round(float(np.mean(
                    [r["check_env_steps_per_second"] for _, r in self.returns])), 1)
                record["episodes"]["envs"] = self.returns[-1][1]["check_envs"]
            if self.keep_best:
                record["episodes"]["kept_step"] = self.best[0] if self.best is not None else None
                record["episodes"]["kept_return"] = self.best[1] if self.best is not None else None
            if self.returns:
                record["final_return"] = self.returns[-1][1]["check_return"]
        if not self.check.discrete:  # the action error, scaled to each dimension's range, beside the accuracy
            record.update(error_target=self.error_target, tolerance=self.check.tolerance,
                          **(self.errors[-1][1] if self.errors else {}),
                          error_history=[[step, round(e["action_error"], 6), round(e["action_error_worst10"], 6)]
                                         for step, e in self.errors])
            if self.error_target is not None:
                record["target"] = None
        return record
