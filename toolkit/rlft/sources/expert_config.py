"""What ``rlft expert train`` takes: :class:`ExpertConfig`, whose fields are the command's options
(``rlft.cli.options`` generates them: a setting is declared once, here). A light module: the CLI imports it to
build its options without loading SB3."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rlft.core.options import MAX_ENV_STEPS, MAX_ENVS, MAX_EPISODES, check_declared, option

ALGOS = ("ppo", "sac", "tqc", "dqn")
AUTO_ALGO = "auto"


@dataclass(kw_only=True)
class ExpertConfig:
    """Train an SB3 expert, evaluate it, and save FILE.zip + FILE.json; None means "from the hyperparameter file"."""

    env_id: str = field(metadata={"help": "Gymnasium env id, e.g. CartPole-v1, HalfCheetah-v5.",
                                  "aliases": ["--env"], "required": True})
    out: Path = field(metadata={"help": "Checkpoint FILE.zip; metadata goes to FILE.json.", "required": True})
    algo: str = option("ppo", "ppo, sac, tqc (sb3-contrib), dqn, or auto: ppo (discrete actions) or sac (Box), else "
                            "the algorithm with tuned settings for the env.", choices=(*ALGOS, AUTO_ALGO))
    timesteps: int | None = option(None, "Env steps (default: n_timesteps of the file).", min=1, max=MAX_ENV_STEPS)
    seed: int = option(0, "Seed of training envs, networks and evaluation.", min=0)
    num_envs: int | None = option(None, "Vectorised training envs (default: file).", min=1, max=MAX_ENVS)
    stop_at_return: float | None = option(None, "Stop once the periodic evaluation's mean return reaches this.")
    eval_episodes: int = option(10, "Episodes of the final evaluation.", min=1, max=MAX_EPISODES)
    eval_freq: int = option(10_000, "Env steps between periodic evaluations (0: none).", min=0, max=MAX_ENV_STEPS)
    eval_freq_episodes: int = option(5, "Episodes per periodic evaluation.", min=1, max=MAX_EPISODES,
                                     needs="periodic")
    hyperparams: Path | None = option(None, "YAML keyed by env id (default: the shipped rlft/sources/zoo/<algo>.yaml).")
    overwrite: bool = option(False, "Replace an existing checkpoint (and replay dataset).")
    record_replay: str | None = option(None, "Also write the run's whole replay buffer as this Minari dataset id "
                                           "(namespace/name-vN): every transition seen while training, D4RL's "
                                           "medium-replay kind (sac, tqc, dqn).")
    data_path: Path | None = option(None, "Minari datasets folder --record-replay writes into (default: "
                                        "$MINARI_DATASETS_PATH, else ~/.minari/datasets).", needs="replay")
    report_to: str = option("none", "none or tensorboard (FILE_tb/ beside the checkpoint: SB3's training curves).")

    def __post_init__(self) -> None:
        self.algo = str(self.algo).lower()  # PPO and ppo name one algorithm
        check_declared(self)
