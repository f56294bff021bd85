"""What ``rlft data improve`` takes: :class:`ImproveConfig`, whose fields are the command's argument and options
(``rlft.cli.options`` generates them: a setting is declared once, here), and its checks. A light module: the CLI
imports it without loading the environments or SB3."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from rlft.core.errors import InvalidInputError
from rlft.core.options import MAX_EPISODE_STEPS, Declared, option

WEIGHTINGS = ("soft", "best")
MAX_IMPROVE_ROWS = 100_000_000  # rows relabelled (D4RL's datasets hold 1-2 million)
MAX_CANDIDATES = 4096  # candidate actions per row
# env steps of a whole run, (rows + consistency rows) x candidates x horizon: 300 times the default's 3.2 million
# (each bound alone let 5 rows x 4,096 candidates x 10^7 steps through: hostile pass 20, F6)
MAX_IMPROVE_ENV_STEPS = 1_000_000_000


@dataclass(kw_only=True)
class ImproveConfig(Declared):
    """Q-improved labels: each recorded action moved toward the best of its perturbations under the expert's k-step
    Q, played in the real environment (one step of policy improvement for an imitator to learn)."""

    dataset: Path = field(metadata={"help": "rlft dataset folder with continuous (Box) actions.", "argument": True,
                                    "required": True})
    expert: Path = field(metadata={"help": "SB3 checkpoint (.zip) of the data's expert: it continues after each "
                                           "candidate action (its k-step Q).", "required": True})
    out: Path = field(metadata={"help": "Dataset folder to write (the source's layout and codec).",
                                "required": True})
    # bounds: each row plays candidates x horizon env steps, so a typo in any of the three runs for years
    rows: int = option(20_000, "First rows of --split to relabel (and keep).", min=1, max=MAX_IMPROVE_ROWS)
    split: str = option("train", "Split to relabel; the others are copied unchanged.")
    horizon: int = option(20, "Steps each candidate is scored over (the first is its own).", min=1,
                          max=MAX_EPISODE_STEPS)
    candidates: int = option(8, "Candidates per row: the recorded action and perturbations.", min=2,
                             max=MAX_CANDIDATES)
    noise: float = option(0.1, "Perturbation std, as a fraction of each dimension's half-range.")
    gamma: float = option(0.99, "Discount over the horizon.")
    weighting: str = option("soft", "soft (candidates weighted by softmax of standardized Q) or best.",
                            choices=WEIGHTINGS)
    mirrored: bool = option(False, "Draw perturbations in opposite pairs (odd --candidates): the soft label moves only "
                                 "by what the values say.")
    step: float = option(1.0, "Move each label this many times the way from the recorded to the improved action "
                            "(> 1 extrapolates).")
    consistency_rows: int = option(200, "Rows relabelled a second time, independently, to measure the learnable "
                                      "share of the label change (0: skip).", min=0, max=MAX_IMPROVE_ROWS)
    seed: int = option(0, "Seeds the perturbations.", min=0)
    overwrite: bool = option(False, "Replace a non-empty --out (atomically).")

    def check(self) -> None:
        if not (math.isfinite(self.noise) and self.noise > 0 and 0 < self.gamma <= 1):
            raise InvalidInputError(f"need noise > 0 and gamma in (0, 1]; got {self.noise}, {self.gamma}")
        if self.mirrored and self.candidates % 2 == 0:
            raise InvalidInputError(f"--mirrored draws perturbations in opposite pairs beside the recorded action: "
                                    f"--candidates must be odd, got {self.candidates}", hint="e.g. --candidates 9")
        if not (math.isfinite(self.step) and self.step > 0):
            raise InvalidInputError(f"--step must be a positive number, got {self.step}")
        steps = (self.rows + self.consistency_rows) * self.candidates * self.horizon
        if steps > MAX_IMPROVE_ENV_STEPS:
            raise InvalidInputError(f"(--rows + --consistency-rows) x --candidates x --horizon is {steps:,} env steps, "
                                    f"over the {MAX_IMPROVE_ENV_STEPS:,} one run may play",
                                    hint="lower one of them: the defaults play 3.2 million")
