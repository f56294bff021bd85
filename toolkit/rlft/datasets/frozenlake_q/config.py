"""What ``rlft data export-q`` takes: :class:`ExportQConfig`, whose fields are the command's argument and options
(``rlft.cli.options`` generates them: a setting is declared once, here). A light module: the CLI imports it to
build its options without loading the solver."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rlft.codecs.choices import PROMPT_STYLES, WORDINGS
from rlft.core.options import MAX_EPISODES, Declared, check_needed, option

MAX_MAPS = 100_000  # each is solved and written out: a billion ran until killed (hostile pass 12, B4)

EXPORT_Q_ENVS = ("frozenlake",)
COMPLETIONS = ("optimal", "all")


@dataclass(kw_only=True)
class ExportQConfig(Declared):
    """Exact Q*(s,a) of FrozenLake by value iteration, as a Hub-layout dataset with prompts and a card."""

    env: str = option("frozenlake", "Environment: frozenlake.", argument=True, required=True)
    out: Path = field(metadata={"help": "Dataset folder to write (Hub layout).", "required": True})
    map: str = option("4x4", "4x4, 8x8, a text file with one row of S/F/H/G per line, or randomNxN (a new map every "
                           "episode, drawn into each prompt).")
    maps: int = option(100, "--map randomNxN: rows from the maps of seeds 0..N-1.", min=1, max=MAX_MAPS,
                       needs="random")
    p: float = option(0.8, "--map randomNxN: probability that a cell is ice.", needs="random")
    pool: bool = option(False, "--map randomNxN: the dataset's episodes (training, evaluation with its codec) meet "
                             "only its --maps maps (seed s: map s mod N).", needs="random")
    slippery: bool = option(True, "Slippery ice (gymnasium default).")
    gamma: float = option(0.99, "Discount factor in (0, 1].")
    csv: Path | None = option(None, "Also write the Gemma-experiment CSV here.")
    episodes: int = option(1000, "Episodes of the greedy policy run to measure its success rate.", min=1,
                          max=MAX_EPISODES)
    seed: int = option(0, "Seed of the first measured episode (episode i uses seed + i).", min=0)
    prompt_style: str = option("chat", "chat (system + user messages) or plain (one string).",
                               choices=PROMPT_STYLES)
    wording: str = option("gemma", "gemma (the Gemma GRPO experiment's prompt), compact (about half the tokens: "
                                 "legend in one system line, the grid alone) or position (the map in the system "
                                 "line, the position alone: for episodes).", choices=WORDINGS)
    completions: str = option("optimal", "optimal (one row per state) or all (one row per state and action: "
                                       "format-only SFT, a task-naive start for GRPO).", choices=COMPLETIONS)
    think: bool = option(False, "Completions <think>REASON</think><answer>A</answer>, the reason read from the "
                              "state's Q-values.")
    card_extra: Path | None = option(None, "Markdown file of dataset-specific prose for the card.")
    overwrite: bool = option(False, "Replace a non-empty --out (atomically).")

    def __post_init__(self) -> None:
        super().__post_init__()
        # --maps, --p, --pool on a fixed map changed nothing and exited 0 (hostile pass 15, B16)
        check_needed(self, {"random": (str(self.map).startswith("random"), "with --map randomNxN")})
