"""Gymnasium env ids: validation with suggestions, reference scores, single and vector env factories."""

from __future__ import annotations

import contextlib
import difflib
import os
import tempfile
from dataclasses import dataclass
from typing import Any

from rlft.core.errors import InvalidInputError, MissingDependencyError, require


@dataclass(frozen=True)
class ReferenceScores:
    """Returns of a random and of an expert policy, the ends of the normalized score (D4RL convention)."""

    random: float
    expert: float
    source: str

    def normalize(self, episode_return: float) -> float:
        """Fraction of the way from random (0.0) to expert (1.0); D4RL tables print 100x this."""
        return (episode_return - self.random) / (self.expert - self.random)


# Where each number comes from matters: a normalized score is only comparable with others using the same ends.
_HALFCHEETAH = ReferenceScores(
    random=-280.178953,
    expert=12135.0,
    source="D4RL (Fu et al. 2020) REF_MIN_SCORE / REF_MAX_SCORE for halfcheetah; also used by Minari's mujoco sets",
)
REFERENCE_SCORES: dict[str, ReferenceScores] = {
    "HalfCheetah-v5": _HALFCHEETAH,
    "HalfCheetah-v4": _HALFCHEETAH,
    "CartPole-v1": ReferenceScores(
        random=22.1,
        expert=500.0,
        source="random: uniform-random actions, mean of 2,000 episodes (seeds 0..1999) measured here, "
        "22.1 +- 0.26; expert: the v1 episode limit of 500 steps at reward 1 per step",
    ),
}


# environment families registered by another package when it is imported: (id prefixes, module, rlft extra)
ENV_PACKAGES = (
    (("PointMaze", "AntMaze", "Fetch", "HandManipulate", "HandReach", "AdroitHand", "FrankaKitchen"),
     "gymnasium_robotics", "robotics"),
)


# Your own environments: modules that call gymnasium.register when imported, comma-separated, imported before an id
# gymnasium does not know is refused (every command reads it, so collect, serialize, train and eval all see them).
ENV_MODULES_VARIABLE = "RLFT_ENV_MODULES"


def import_env_modules() -> list[str]:
    """Import the modules named in ``$RLFT_ENV_MODULES`` (once each); return their names."""
    import importlib
    import sys

    names = [n.strip() for n in os.environ.get(ENV_MODULES_VARIABLE, "").split(",") if n.strip()]
    for name in names:
        if name in sys.modules:
            continue
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise InvalidInputError(f"{ENV_MODULES_VARIABLE} names {name!r}, which cannot be imported: {exc}",
                                    hint="put its folder on PYTHONPATH, or pip install its package") from exc
    return names


RLFT_ENV_PREFIX = "rlft/"  # rlft's own environments (rlft.envs.random_lake)
MUJOCO_PREFIXES = ("HalfCheetah", "Hopper", "Walker2d", "Ant-", "Humanoid", "Swimmer", "Reacher", "Pusher",
                   "InvertedPendulum", "InvertedDoublePendulum")


def ensure_registered(env_id: str) -> None:
    """Import the package that registers ``env_id`` (gymnasium-robotics for the mazes and robots), with an
    install hint when it or MuJoCo is missing; ids gymnasium already knows cost nothing."""
    import io

    import gymnasium as gym

    if env_id.startswith(MUJOCO_PREFIXES):
        import importlib.util

        if importlib.util.find_spec("mujoco") is None:

            raise MissingDependencyError(f"{env_id} needs MuJoCo, which is not installed",
                                         hint='install it with: pip install "rlft[mujoco]"')
    if env_id in gym.registry:
        return
    if env_id.startswith(RLFT_ENV_PREFIX):  # rlft's own envs register when their module is imported
        import rlft.envs.random_lake  # noqa: F401
        if env_id in gym.registry:
            return
    if import_env_modules() and env_id in gym.registry:
        return
    for prefixes, module, extra in ENV_PACKAGES:
        if env_id.startswith(prefixes):

            with contextlib.redirect_stderr(io.StringIO()):  # it prints a notice about old Adroit versions
                require(module, extra=extra)
            return


def _registered_ids() -> list[str]:
    import gymnasium as gym

    return sorted(gym.registry)


def check_env_id(env_id: str) -> str:
    """Return ``env_id`` if gymnasium knows it; otherwise raise InvalidInputError suggesting close ids."""
    ensure_registered(env_id)
    ids = _registered_ids()
    if env_id in ids:
        return env_id
    lowered = {i.lower(): i for i in ids}
    close = difflib.get_close_matches(env_id.lower(), list(lowered), n=3, cutoff=0.5)
    hint = (f"did you mean {', '.join(lowered[c] for c in close)}? " if close else "see gymnasium.pprint_registry(); "
            ) + f"your own env: name the module that registers it in {ENV_MODULES_VARIABLE}"
    raise InvalidInputError(f"unknown environment id {env_id!r}", hint=hint)


def reference_scores(env_id: str) -> ReferenceScores | None:
    """Reference random/expert returns for ``env_id``, or None when none are known."""
    return REFERENCE_SCORES.get(env_id)


def normalized_score(env_id: str, mean_return: float) -> float | None:
    """D4RL-style normalized score x100 (0 = random, 100 = expert) of ``env_id``, or None without reference
    scores: the one place experts, evaluation reports and results compute it."""
    ref = reference_scores(env_id)
    return None if ref is None else 100.0 * ref.normalize(mean_return)


def make_env(env_id: str, **kwargs: Any):
    """``gymnasium.make`` after checking the id (kwargs such as ``max_episode_steps`` pass through)."""
    import gymnasium as gym

    return drop_temp_files(gym.make(check_env_id(env_id), **kwargs))


def drop_temp_files(env):
    """Delete the model file an env wrote to the temp folder and no longer reads (gymnasium-robotics' mazes write
    ``/tmp/ant_maze<time>.xml`` for every env and never remove it; MuJoCo has loaded it by now). Returns ``env``."""
    path = getattr(env.unwrapped, "tmp_xml_file_path", None)
    if isinstance(path, str) and os.path.dirname(os.path.abspath(path)) == os.path.abspath(tempfile.gettempdir()):
        with contextlib.suppress(OSError):
            os.remove(path)
    return env


def action_space(env_id: str):
    """The action space of ``env_id`` (a throwaway env, closed again): for checks made before any work."""
    env = make_env(env_id)
    try:
        return env.action_space
    finally:
        env.close()


def make_vec_env(env_id: str, n: int, seed: int | None = None, **kwargs: Any):
    """A synchronous gymnasium vector env of ``n`` copies, reset with seeds ``seed .. seed+n-1`` when given.

    Synchronous on purpose: subprocess workers cost more than they save for fast envs on two cores.
    """
    import gymnasium as gym

    if n < 1:
        raise InvalidInputError(f"number of environments must be at least 1, got {n}")
    check_env_id(env_id)
    envs = gym.make_vec(env_id, num_envs=n, vectorization_mode="sync", **kwargs)
    if seed is not None:
        envs.reset(seed=[seed + i for i in range(n)])
        envs.action_space.seed(seed)
    return envs
