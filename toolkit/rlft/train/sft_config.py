"""``rlft train sft`` settings (TRL style: one dataclass, each field documented by its ``help``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from rlft.train.configs import StageConfig


@dataclass
class SFTStageConfig(StageConfig):
    """Supervised fine-tuning on the dataset's prompt/completion columns, loss on the completion only."""

    trl_config_class: ClassVar[str] = "SFTConfig"
    # passed only when evaluating (eval_split not none)
    resolved_trl_fields: ClassVar[tuple[str, ...]] = (*StageConfig.resolved_trl_fields, "eval_steps",
                                                      "per_device_eval_batch_size")

    max_length: int = field(default=1024, metadata={"trl": True,
                                                    "help": "Longest tokenized prompt + completion (truncated)."})
    eval_split: str = field(
        default="auto",
        metadata={"help": "Split evaluated for the validation loss: a name, 'auto' (validation, else test, else "
                          "a held-out val_fraction of train, else none) or 'none'."},
    )
    val_fraction: float = field(
        default=0.0, metadata={"help": "With eval_split auto and no validation/test split: rows held out of train."}
    )
    max_eval_samples: int | None = field(default=512, metadata={"help": "Evaluate on at most N rows."})
    per_device_eval_batch_size: int = field(default=16, metadata={"help": "Evaluation batch size per device."})
    eval_steps: int = field(default=50, metadata={"help": "Evaluate every N steps."})
    eval_at_start: bool = field(default=True, metadata={"help": "Also evaluate before training (loss at step 0)."})
    early_stopping_patience: int | None = field(
        default=None,
        metadata={"help": "Stop after N evaluations without a lower eval loss (keeps the best checkpoint)."},
    )
    completion_only_loss: bool = field(default=True, metadata={"trl": True, "help": "Loss on completion tokens only."})
    bin_smoothing: float = field(
        default=0.0,
        metadata={"help": "binned codecs: train each action bin against a Gaussian over its neighbouring bins of "
                          "this standard deviation in bins (HL-Gauss; about 0.75), not one-hot (0: off)."},
    )
    critic: str | None = field(
        default=None,
        metadata={"help": "An rlft train offline --algo iql RUN on this dataset: draw training rows in proportion to "
                          "exp(awr_temperature * A(s, a)) by its critic (advantage-weighted regression, IQL's policy "
                          "extraction), so the model moves toward the data's better actions (off: plain SFT)."},
    )
    awr_temperature: float = field(default=3.0, metadata={"help": "With --critic: beta of exp(beta * A), in the "
                                                                  "critic's reward units (IQL's temperature)."})
    awr_max_weight: float = field(default=100.0, metadata={"help": "With --critic: cap on a row's weight (IQL's)."})
