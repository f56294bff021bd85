"""What ``rlft data collect`` takes: :class:`CollectConfig`, whose fields are the command's options
(``rlft.cli.options`` generates them: a setting is declared once, here). A light module: the CLI imports it to
build its options without loading gymnasium, SB3 or Minari."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rlft.core.options import MAX_ENVS, MAX_EPISODE_STEPS, MAX_EPISODES, Declared, option

DATA_FORMATS = ("hdf5", "arrow")
# What a noisy collection records as the action: the one the env was stepped with, or the policy's own (DART).
ACTION_LABELS = ("executed", "clean")


@dataclass(kw_only=True)
class CollectConfig(Declared):
    """Record policy rollouts as a Minari dataset (DataCollector), with seeds and reference scores."""

    env_id: str = field(metadata={"help": "Gymnasium env id, e.g. CartPole-v1, HalfCheetah-v5.",
                                  "aliases": ["--env"], "required": True})
    dataset_id: str = field(metadata={"help": "Minari id NAMESPACE/NAME-vK (the version is required).",
                                      "required": True})
    episodes: int = field(metadata={"help": "Episodes to record.", "required": True, "min": 1,
                                     "max": MAX_EPISODES})
    policy: str = option("random", "An SB3 checkpoint FILE.zip, or 'random'.")
    num_envs: int = option(1, "Envs stepped together with batched policy inference.", min=1, max=MAX_ENVS)
    seed: int = option(0, "Episode i is reset with seed + i (stored in the dataset).", min=0)
    noise: float = option(0.0, "Box actions: Gaussian std in half action ranges, clipped. Discrete: epsilon-random.")
    stochastic: bool = option(False, "Record the policy's own sampled actions (SB3 predict with deterministic=False: "
                                   "SAC's squashed Gaussian, PPO's distribution), as D4RL recorded its datasets, "
                                   "instead of its mean action.")
    label_actions: str = option("executed", "With --noise: record the action the env was stepped with (executed), or "
                                          "the policy's own action before the noise (clean: DART-style data, "
                                          "off-path states with expert labels).", choices=ACTION_LABELS)
    data_format: str = option("hdf5", "Minari storage: hdf5 (default) or arrow.", choices=DATA_FORMATS)
    max_episode_steps: int | None = option(None, "Override the env's limit.", min=1, max=MAX_EPISODE_STEPS)
    author: str = option("rlft", "Author recorded in the dataset metadata.")
    description: str | None = option(None, "Description recorded in the dataset metadata.", cli=False)
    overwrite: bool = option(False, "Replace an existing id (only after success).")
    data_path: Path | None = option(None, "Minari datasets folder to write into (default: $MINARI_DATASETS_PATH, else "
                                        "~/.minari/datasets); read it back with the dataset's folder, PATH/ID.")
