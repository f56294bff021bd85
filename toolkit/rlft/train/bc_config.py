"""``rlft train bc`` settings (TRL style: one dataclass, each field documented by its ``help``; the CLI is
generated from it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class BCConfig:
    """Behaviour cloning: an MLP on the dataset's raw observations and actions (the non-LLM baseline)."""

    dataset: str = field(metadata={"help": "rlft dataset folder (observation/action columns)."})
    out: Path = field(metadata={"help": "Policy file to write, e.g. bc.pt."})
    hidden: list[int] = field(default_factory=lambda: [64, 64], metadata={"help": "Hidden layer sizes."})
    # a billion epochs trained until killed (hostile pass 19, B3): 100,000 passes is far past any fit
    epochs: int = field(default=30, metadata={"help": "Passes over the training rows.", "min": 1, "max": 100_000})
    batch_size: int = field(default=256, metadata={"help": "Rows per gradient step.", "min": 1})
    learning_rate: float = field(default=1e-3, metadata={"help": "Adam's learning rate."})
    weight_decay: float = field(default=0.0, metadata={"help": "Adam's weight decay.", "min": 0.0})
    val_fraction: float = field(default=0.1, metadata={"help": "Rows held out to report accuracy/error."})
    split: str = field(default="train", metadata={"help": "Dataset split to train on."})
    max_train_samples: int | None = field(default=None, metadata={
        "help": "Train on the split's first N rows only (as train sft's --max-train-samples: the same rows).",
        "min": 1})
    best_episodes: float | None = field(default=None, metadata={
        "help": "Train on the rows of this fraction of the episodes with the highest return only (0.1: D4RL's 10% "
                "BC, filtered behaviour cloning)."})
    report_to: str = field(default="none", metadata={"help": "Trackers, comma-separated: none, tensorboard "
                                                             "(FILE_tb/ beside --out), wandb, trackio."})
    seed: int = field(default=0, metadata={"help": "Seeds the split, the weights and the batches.", "min": 0})
    overwrite: bool = field(default=False, metadata={"help": "Replace an existing --out."})
