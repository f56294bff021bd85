"""``rlft train online`` settings: on-policy RL (PPO, TRPO) whose policy network is a language model."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rlft.core.options import MAX_ENV_STEPS, MAX_ENVS, MAX_EPISODES, MAX_LORA_RANK, Declared

ONLINE_ALGOS = ("ppo", "trpo")


@dataclass
class OnlineConfig(Declared):
    """Stable-Baselines3 PPO / sb3-contrib TRPO with an LLM backbone (or the plain MLP, identical otherwise)."""

    env: str = field(metadata={"help": "Gymnasium env id, e.g. CartPole-v1 or HalfCheetah-v5."})
    out: Path = field(metadata={"help": "RUN folder to write."})
    algo: str = field(default="ppo", metadata={"help": "ppo or trpo.", "choices": ONLINE_ALGOS})
    backbone: str = field(default="mlp", metadata={"help": "A model folder (rlft model init / fetch) or mlp."})
    backbone_mode: str = field(default="full", metadata={"help": "frozen, lora or full (trainable transformer).",
                                                         "needs": "transformer"})
    backbone_lr_scale: float | None = field(default=None, metadata={
        "help": "The transformer's learning rate as a multiple of the algorithm's, its heads at the full rate "
                "(default: 0.1 for PPO, whose RL-Zoo rates are tuned for an MLP and made a transformer collapse, "
                "row 10e; 1.0 for TRPO; see rlft.policy.backbone.BackboneScaledAdam).", "needs": "trainable"})
    lora_r: int = field(default=8, metadata={"help": "LoRA rank with --backbone-mode lora.", "min": 1,
                                             "max": MAX_LORA_RANK, "needs": "lora"})
    codec: str | None = field(default=None, metadata={"help": "Dataset folder whose codec writes observations."})
    format: str = field(default="raw", metadata={"help": "Without --codec: a raw codec (fixed-precision numbers)."})
    precision: int = field(default=2, metadata={"help": "Decimals of the raw codec.", "min": 0, "needs": "text"})
    timesteps: int | None = field(default=None, metadata={"help": "Environment steps (default: the Zoo's).", "min": 1,
                                                          "max": MAX_ENV_STEPS})
    num_envs: int | None = field(default=None, metadata={"help": "Parallel envs (default: the Zoo's).", "min": 1,
                                                         "max": MAX_ENVS})
    hyperparams: Path | None = field(default=None, metadata={"help": "RL-Zoo style YAML (default: shipped)."})
    eval_episodes: int = field(default=10, metadata={"help": "Deterministic episodes evaluated at the end.",
                                                     "min": 1, "max": MAX_EPISODES})
    check_freq: int = field(default=0, metadata={
        "help": "Every N environment steps (and at the end) play check_episodes deterministic episodes, the same "
                "seeds each time and apart from the final evaluation's, and keep the best policy seen as the run's "
                "(RL-Zoo's best model; 0: off, the last policy is kept).", "min": 0})
    check_episodes: int = field(default=10, metadata={"help": "Episodes of each check (--check-freq).", "min": 1,
                                                      "needs": "checks",
                                                      "max": MAX_EPISODES})
    report_to: str = field(default="none", metadata={"help": "none or tensorboard (RUN/logs: SB3's training "
                                                             "curves)."})
    seed: int = field(default=0, metadata={"help": "Seeds torch, numpy and the environments.", "min": 0})
    overwrite: bool = field(default=False, metadata={"help": "Replace an existing RUN folder."})
