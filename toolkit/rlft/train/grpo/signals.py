"""A GRPO run that cannot learn says so, and names the fix.

GRPO learns only from groups whose completions score differently: the advantage is each reward minus its group's
mean. When every group of a step scores the same (TRL logs ``frac_reward_zero_std`` = 1) the loss is zero and the
policy does not move; a user who ran ``rlft train grpo --dataset D --model M --out R`` with a model that never
writes a parsable answer saw reward 0, grad_norm 0 and frac_reward_zero_std 1 on every step, and exit 0.
:class:`StallWatch` reads the trainer's logs and warns once, after ``stall_steps`` steps in a row without signal,
with the reason the logs point to and the flags that fix it.
"""

from __future__ import annotations

from typing import Any

from rlft.core.console import console

ZERO_STD = "frac_reward_zero_std"


def _callback_base():
    from transformers import TrainerCallback

    return TrainerCallback


def stall_advice(logs: dict[str, Any], rewards: list[str], group: str, constrained: bool) -> str:
    """Why no group had differing rewards, and what to pass instead, from the last logs."""
    parse_rate = logs.get("parse_rate")
    if parse_rate is not None and parse_rate < 0.05 and group != "actions":
        fixes = ["--group actions (every valid answer of a discrete action space in each group)"]
        if not constrained:
            fixes.append("--constrained (sample within the codec's answer grammar)")
        fixes.append("or SFT on the answer format first (rlft train sft, e.g. on data export-q --completions all)")
        return f"the model writes no parsable answer (parse rate {parse_rate:.2f}): " + ", ".join(fixes)
    if rewards == ["format"]:
        return ("every answer is valid and the format is all that is rewarded: add a task reward, --reward "
                "format,q-advantage (data with Q-values), format,bc (recorded actions) or format,env")
    if group == "actions":
        return "every action of each state scores the same under these rewards: check --reward and the data's columns"
    return ("every completion of a group scores the same: --group actions (discrete actions), a higher "
            "--temperature, more --num-generations, or --scale-rewards batch")


class StallWatch(_callback_base()):
    """Warns once when ``steps`` optimizer steps in a row had no group with differing rewards."""

    def __init__(self, steps: int, rewards: list[str], group: str, constrained: bool):
        self.steps = steps
        self.rewards, self.group, self.constrained = rewards, group, constrained
        self.since: int | None = None  # first step of the current stretch without signal
        self.last_step = 0
        self.warned_at: int | None = None
        self.longest = 0

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or ZERO_STD not in logs:
            return control
        step = int(state.global_step)
        if float(logs[ZERO_STD]) >= 1.0 - 1e-9:  # the mean over the logged steps: every one of them was flat
            if self.since is None:
                self.since = self.last_step + 1
            stalled = step - self.since + 1
            self.longest = max(self.longest, stalled)
            if self.warned_at is None and stalled >= self.steps:
                self.warned_at = step
                console.print(f"[bold yellow]warning:[/] no learning signal for {stalled} steps (every group of "
                              f"completions got equal rewards, so GRPO's advantages are 0): "
                              f"{stall_advice(logs, self.rewards, self.group, self.constrained)}")
        else:
            self.since = None
        self.last_step = step
        return control

    def summary(self) -> dict[str, Any]:
        """What the run records: the longest stretch without signal and the step the warning was given at."""
        return {"stall_steps_longest": self.longest, "stall_warned_at_step": self.warned_at}


def stall_watch(steps: int, rewards: list[str], group: str, constrained: bool) -> list:
    """``[StallWatch]``, or ``[]`` when ``steps`` is 0."""
    return [StallWatch(steps, rewards, group, constrained)] if steps > 0 else []
