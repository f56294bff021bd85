"""What ``rlft data serialize`` takes: :class:`SerializeConfig`, whose fields are the command's argument and options
(``rlft.cli.options`` generates them: a setting is declared once, here). A light module: the CLI imports it to
build its options; the checks (:func:`rlft.datasets.serialize_options.validate_config`) load numpy and the codecs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rlft.codecs.choices import EDGE_SOURCES, FORMATS, PROMPT_STYLES, SEPARATORS
from rlft.core.options import option


@dataclass
class SerializeConfig:
    """Serialize a Minari dataset into prompt/completion records with a reversible codec."""

    source: str = field(metadata={"help": "Minari dataset id (NAMESPACE/NAME-vK) or a dataset folder.",
                                  "argument": True, "required": True})
    out: Path = field(metadata={"help": "Dataset folder to write (Hub layout).", "required": True})
    format: str = option("raw", "raw | discretized | tokenized | binned (one token per value: quantile bins of both "
                              "spaces, decoded to their data means; made for continuous control).", choices=FORMATS)
    # precision, bins, edges and tokens given under another --format are named in a note, not refused: a recipe
    # passes them whatever its {format}
    precision: int = option(3, "raw: decimals per value.", needs="raw")
    bins: int = option(32, "discretized, binned: bins per dimension.", needs="bins")
    edges_from: str = option("data", "discretized, binned: bin edges from 'data' quantiles or space 'bounds'.",
                             choices=EDGE_SOURCES, needs="bins")
    tokens: int = option(1000, "tokenized: integer tokens per value (0..N-1).", needs="tokenized")
    prompt_style: str = option("plain", "plain (<observation> tags) or chat (system + user messages).",
                               choices=PROMPT_STYLES)
    history: int = option(0, "Previous (observation, action) pairs in each prompt.")
    turns: int = option(0, "K > 1: each prompt is the episode so far as a conversation of its last K turns "
                         "(observation, recorded answer), the format episodic GRPO (train grpo --rollout episode "
                         "--max-turns K) and evaluation play in.")
    return_to_go: bool = option(False, "Condition on return-to-go.")
    splits: tuple[float, float, float] = option((0.8, 0.1, 0.1), "Fractions of episodes: train,validation,test.")
    seed: int = option(0, "Seed of the episode split.", min=0)
    drop_nonfinite: bool = option(False, "Drop episodes holding NaN/inf instead of refusing.")
    max_episodes: int | None = option(None, "Use only the first N episodes.")
    chunk_steps: int = option(100_000, "Steps per Parquet chunk.", cli=False)
    in_memory_steps: int = option(2_000_000, "Sources of up to this many steps are read in one pass.", cli=False)
    download: bool = option(False, "Download a remote Minari dataset if it is not local.")
    download_timeout: float = option(3600.0, "--download: seconds the download may take in all (a stalled or "
                                             "dripping server is given up).", min=1.0, max=7 * 24 * 3600.0,
                                    needs="download")
    card_extra: Path | None = option(None, "Markdown file of dataset-specific prose for the card.")
    # plots/returns.png: opt-in, matplotlib's import is most of a small dataset's run time
    plot: bool = option(False, "Draw plots/returns.png (return histogram and per episode) for the card; importing "
                             "matplotlib adds about half a second.")
    allow_large_observations: bool = option(False, "Serialize observations of more than 1,024 values (images) as "
                                                 "text anyway.")
    overwrite: bool = option(False, "Replace a non-empty --out (atomically).")
    system: str | None = option(None, "System text of the prompt (chat style and the rlft4rl profile).")
    separator: str = option(" ", "Between the values of an observation or action: ' ' or ','.", choices=SEPARATORS)
    prefill: bool = option(False, "End plain prompts with the answer's opening tag (completions: v1 v2</action>).")
    profile: str | None = option(None, "rlft4rl: RLFT4RL's format (',' between values, 5 decimals, its prompt layout "
                                     "with <action> prefilled, int() tokens).")
    extra_info: dict = field(default_factory=dict, metadata={"help": "More keys for the summary (code only).",
                                                             "cli": False})
