"""The Stable-Baselines3 algorithms an expert is trained with: their classes, which action spaces each can act in, and
``--algo auto`` (the conventional algorithm for the action space that ships tuned settings for the env)."""

from __future__ import annotations

from rlft.core.errors import InvalidInputError, require
from rlft.envs.registry import action_space
from rlft.sources.expert_config import ALGOS
from rlft.sources.hyperparams import tuned_algos


def algo_class(algo: str):
    """The SB3 / sb3-contrib class of ``algo`` (ppo, sac, tqc, dqn)."""
    algo = algo.lower()
    if algo not in ALGOS:
        raise InvalidInputError(f"--algo must be one of {', '.join(ALGOS)}, got {algo!r}")
    if algo == "tqc":
        return require("sb3_contrib", package="sb3-contrib").TQC
    sb3 = require("stable_baselines3", package="stable-baselines3")
    return {"ppo": sb3.PPO, "sac": sb3.SAC, "dqn": sb3.DQN}[algo]


CONTINUOUS_ONLY = ("sac", "tqc")  # SB3 asserts a Box action space
DISCRETE_ONLY = ("dqn",)


def _acts_in(algo: str, space) -> bool:
    import gymnasium as gym

    box = isinstance(space, gym.spaces.Box)
    return not (algo in CONTINUOUS_ONLY and not box) and not (
        algo in DISCRETE_ONLY and not isinstance(space, gym.spaces.Discrete))


# --algo auto, by action space: the conventional choice first (PPO for discrete actions, SAC for Box), taken when
# tuned settings for the env ship with it, else the next; with none tuned, the first
AUTO_PREFERENCE = {"discrete": ("ppo", "dqn"), "box": ("sac", "tqc", "ppo")}


def auto_algo(env_id: str) -> str:
    """``--algo auto``: the first algorithm of :data:`AUTO_PREFERENCE` for the env's action space that has shipped
    tuned settings for ``env_id``; without any, PPO for discrete actions and SAC for Box."""
    import gymnasium as gym

    space = action_space(env_id)
    order = AUTO_PREFERENCE["box" if isinstance(space, gym.spaces.Box) else "discrete"]
    tuned = set(tuned_algos(env_id))
    return next((a for a in order if a in tuned and _acts_in(a, space)), order[0])


def check_algo_space(algo: str, env_id: str) -> None:
    """Refuse an algorithm that cannot act in the env's action space, before anything is built."""
    space = action_space(env_id)
    if _acts_in(algo, space):
        return
    if algo in CONTINUOUS_ONLY:
        raise InvalidInputError(f"--algo {algo} needs continuous (Box) actions; {env_id} has {space}",
                                hint="use ppo or dqn for discrete actions")
    raise InvalidInputError(f"--algo {algo} needs Discrete actions; {env_id} has {space}",
                            hint="use ppo, sac or tqc for continuous actions")
