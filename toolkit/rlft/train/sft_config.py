"""``rlft train sft`` settings (TRL style: one dataclass, each field documented by its ``help``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from rlft.train.configs import StageConfig
from rlft.train.trl_config import MAX_BATCH, MAX_TRAIN_STEPS, TrlDefault


@dataclass
class SFTStageConfig(StageConfig):
    """Supervised fine-tuning on the dataset's prompt/completion columns, loss on the completion only."""

    trl_config_class: ClassVar[str] = "SFTConfig"
    trl_defaults: ClassVar[dict[str, TrlDefault]] = {
        **StageConfig.trl_defaults,
        "max_length": TrlDefault(1024, "Longest tokenized prompt + completion (truncated).", min=1, max=1_000_000),
        "completion_only_loss": TrlDefault(True, "Loss on completion tokens only."),
        # passed only when evaluating (eval_split not none)
        "per_device_eval_batch_size": TrlDefault(16, "Evaluation batch size per device.", resolved=True, min=1,
                                                 max=MAX_BATCH),
        "eval_steps": TrlDefault(50, "Evaluate every N steps.", resolved=True, min=1, max=MAX_TRAIN_STEPS),
    }

    eval_split: str = field(
        default="auto",
        metadata={"help": "Split evaluated for the validation loss: a name, 'auto' (validation, else test, else "
                          "a held-out val_fraction of train, else none) or 'none'."},
    )
    val_fraction: float = field(
        default=0.0, metadata={"help": "With eval_split auto and no validation/test split: rows held out of train."}
    )
    max_eval_samples: int | None = field(default=512, metadata={"help": "Evaluate on at most N rows.", "min": 1,
                                                                "needs": "eval"})
    eval_at_start: bool = field(default=True, metadata={"help": "Also evaluate before training (loss at step 0)."})
    early_stopping_patience: int | None = field(
        default=None,
        metadata={"help": "Stop after N evaluations without a lower eval loss (keeps the best checkpoint).",
                  "needs": "eval"},
    )
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
                                                                  "critic's reward units (IQL's temperature).",
                                                          "needs": "critic"})
    awr_max_weight: float = field(default=100.0, metadata={"help": "With --critic: cap on a row's weight (IQL's).",
                                                           "needs": "critic"})
