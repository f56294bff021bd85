"""``rlft train offline`` settings (one dataclass, each field documented by its ``help``; the CLI is generated from
it). The defaults are the published ones for D4RL locomotion (TD3+BC: Fujimoto & Gu 2021; IQL: Kostrikov et al.
2021, as CORL runs them), except the number of gradient steps, which the CPU budget sets."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rlft.core.errors import InvalidInputError
from rlft.core.options import MAX_GRADIENT_STEPS, check_declared

# transitions in one gradient step: 1e11 was a failed allocation of 800 GB as a traceback (hostile pass 19, B3)
MAX_BATCH_ROWS = 1_000_000
# transitions sampled in a run (steps x batch; the default 51 million) and episodes its checks play: each bound alone
# let 10^7 steps of 10^6 rows, or 10^6 check episodes after every step, through (hostile pass 21, F14)
MAX_SAMPLED_ROWS = 1_000_000_000
MAX_CHECK_EPISODES = 100_000

OFFLINE_ALGOS = ("td3bc", "iql")


@dataclass
class OfflineConfig:
    """Offline RL on a dataset's transitions with TorchRL's losses: TD3+BC or IQL; the actor and the critic."""

    dataset: str = field(metadata={"help": "rlft dataset folder with transitions (observation, action, reward, "
                                           "next_observation, terminated columns)."})
    out: Path = field(metadata={"help": "RUN folder to write: policy.pt (play it with rlft eval --policy "
                                        "offline:RUN), critic.pt, rlft_offline.json."})
    algo: str = field(default="iql", metadata={"help": "td3bc or iql.", "choices": OFFLINE_ALGOS})
    steps: int = field(default=200_000, metadata={"help": "Gradient steps (the papers: 1,000,000).", "min": 1,
                                                   "max": MAX_GRADIENT_STEPS})
    batch_size: int = field(default=256, metadata={"help": "Transitions per gradient step.", "min": 1,
                                                   "max": MAX_BATCH_ROWS})
    learning_rate: float = field(default=3e-4, metadata={"help": "Adam's learning rate (actor, critics, value)."})
    hidden: list[int] = field(default_factory=lambda: [256, 256], metadata={"help": "Hidden layer sizes of "
                                                                                    "every network."})
    discount: float = field(default=0.99, metadata={"help": "Discount of the critic's targets."})
    tau: float = field(default=0.005, metadata={"help": "Polyak rate of the target networks."})
    alpha: float = field(default=2.5, metadata={"help": "td3bc: weight of Q against the BC term (lambda = alpha / "
                                                        "mean |Q|).", "min": 0, "needs": "td3bc"})
    policy_noise: float = field(default=0.2, metadata={"help": "td3bc: target policy smoothing noise.", "min": 0,
                                                          "needs": "td3bc"})
    noise_clip: float = field(default=0.5, metadata={"help": "td3bc: clip of that noise.", "min": 0, "needs": "td3bc"})
    policy_freq: int = field(default=2, metadata={"help": "td3bc: one actor update per N critic updates.",
                                                  "min": 1, "needs": "td3bc"})
    expectile: float = field(default=0.7, metadata={"help": "iql: expectile of V's regression on Q.",
                                                         "needs": "iql"})
    temperature: float = field(default=3.0, metadata={"help": "iql: inverse temperature of advantage-weighted "
                                                              "regression (beta).", "min": 0, "needs": "iql"})
    normalize_rewards: bool = field(default=True, metadata={"help": "iql: scale rewards by 1000 / (max - min "
                                                                    "episode return), as IQL does on locomotion.",
                                                                    "needs": "iql"})
    split: str = field(default="train", metadata={"help": "Dataset split to train on."})
    max_train_samples: int | None = field(default=None, metadata={
        "help": "Train on the split's first N rows only (as train sft's and train bc's option).", "min": 1})
    check_steps: int = field(default=0, metadata={"help": "Every N steps, play --check-episodes episodes with the "
                                                          "actor and log their normalized score (0: never).",
                                                  "min": 0})
    check_episodes: int = field(default=5, metadata={"help": "Episodes of each closed-loop check.", "min": 1,
                                                     "needs": "checks"})
    report_to: str = field(default="none", metadata={"help": "Trackers, comma-separated: none, tensorboard (RUN/logs), "
                                                             "wandb, trackio."})
    seed: int = field(default=0, metadata={"help": "Seeds the networks, the batches and the checks' episodes.",
                                           "min": 0})
    overwrite: bool = field(default=False, metadata={"help": "Replace an existing --out RUN folder."})

    def __post_init__(self) -> None:
        self.algo = str(self.algo).lower().replace("+", "").replace("-", "").replace("_", "")
        check_declared(self)  # after the spelling is normalized (TD3+BC -> td3bc)
        if not 0 < self.discount <= 1 or not 0 < self.tau <= 1:
            raise InvalidInputError(f"--discount and --tau must be in (0, 1], got {self.discount}, {self.tau}")
        if not 0 < self.expectile < 1:
            raise InvalidInputError(f"--expectile must be in (0, 1), got {self.expectile}")
        if self.learning_rate <= 0:
            raise InvalidInputError(f"--learning-rate must be positive, got {self.learning_rate}")
        if self.steps * self.batch_size > MAX_SAMPLED_ROWS:
            raise InvalidInputError(f"--steps x --batch-size is {self.steps * self.batch_size:,} sampled transitions, "
                                    f"more than {MAX_SAMPLED_ROWS:,}", hint="the defaults sample 51 million")
        checks = self.steps // self.check_steps * self.check_episodes if self.check_steps else 0
        if checks > MAX_CHECK_EPISODES:
            raise InvalidInputError(f"the closed-loop checks would play {checks:,} episodes (--steps / --check-steps x "
                                    f"--check-episodes), more than {MAX_CHECK_EPISODES:,}",
                                    hint="check less often, or on fewer episodes")
