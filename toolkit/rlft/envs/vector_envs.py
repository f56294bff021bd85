"""The environments of an evaluation: K vector slots, space checks against the codec, video slots."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

from rlft.core.errors import InvalidInputError, MissingDependencyError
from rlft.envs.registry import drop_temp_files
from rlft.envs.spaces import describe_space, space_to_dict


def spaces_mismatch(codec_space: dict, env_space) -> str | None:
    """How a codec's space dict differs from an environment's space, or None when they match."""

    try:
        env = env_space if isinstance(env_space, dict) else space_to_dict(env_space)
    except InvalidInputError as exc:
        return f"the environment's space {env_space} cannot be written as text ({exc.message})"
    return _dict_mismatch(codec_space, env, "")


def _dict_mismatch(codec_space: dict, env: dict, path: str) -> str | None:
    """How two space dicts differ (``path``: where they sit in a dict/tuple space, "" at the top), or None."""
    if codec_space["type"] != env["type"]:
        return _described(codec_space, env, path)
    check = _MISMATCH_BY_TYPE.get(env["type"], _box_mismatch)
    return check(codec_space, env, path)


def _where(path: str) -> str:
    """The prefix that places a difference inside a dict/tuple space."""
    return f"{path}: " if path else ""


def _described(codec_space: dict, env: dict, path: str) -> str:
    """Both spaces, described in full."""

    return f"{_where(path)}{describe_space(codec_space)} vs {describe_space(env)}"


def _same_keys(codec_space: dict, env: dict, keys: tuple[str, ...]) -> bool:
    """Whether both spaces hold the same values under ``keys`` (absent counts as None)."""
    return all(codec_space.get(k) == env.get(k) for k in keys)


def _composite_mismatch(codec_space: dict, env: dict, path: str) -> str | None:
    """Dict and tuple spaces: the same fields, then the first field that differs."""
    a, b = codec_space["spaces"], env["spaces"]
    keys_a, keys_b = (list(a), list(b)) if env["type"] == "dict" else (list(range(len(a))), list(range(len(b))))
    if keys_a != keys_b:
        return f"{_where(path)}fields {keys_a} vs {keys_b}"
    for key in keys_a:
        diff = _dict_mismatch(a[key], b[key], f"{path}.{key}" if path else str(key))
        if diff:
            return diff
    return None


def _text_mismatch(codec_space: dict, env: dict, path: str) -> str | None:
    """Text spaces: the same length limits."""
    return None if _same_keys(codec_space, env, ("min_length", "max_length")) else _described(codec_space, env, path)


def _discrete_mismatch(codec_space: dict, env: dict, path: str) -> str | None:
    """Discrete spaces: the same size and start (a codec space without ``start`` starts at 0)."""

    if (codec_space["n"], codec_space.get("start", 0)) != (env["n"], env["start"]):
        return f"{_where(path)}{describe_space(codec_space)} (start {codec_space.get('start', 0)}) vs " \
               f"Discrete({env['n']}) (start {env['start']})"
    return None


def _shape_mismatch(codec_space: dict, env: dict, path: str) -> str | None:
    """Array spaces: the same shape."""
    if list(codec_space["shape"]) != list(env["shape"]):
        return f"{_where(path)}shape {tuple(codec_space['shape'])} vs {tuple(env['shape'])}"
    return None


def _multi_mismatch(codec_space: dict, env: dict, path: str) -> str | None:
    """MultiDiscrete and MultiBinary spaces: the same shape, sizes and starts."""
    shape = _shape_mismatch(codec_space, env, path)
    if shape:
        return shape
    return None if _same_keys(codec_space, env, ("nvec", "start")) else _described(codec_space, env, path)


def _box_mismatch(codec_space: dict, env: dict, path: str) -> str | None:
    """Box spaces: the same shape and close bounds; names the first dimension whose bound differs."""
    shape = _shape_mismatch(codec_space, env, path)
    if shape:
        return shape
    for bound in ("low", "high"):
        a, b = np.asarray(codec_space[bound], np.float64), np.asarray(env[bound], np.float64)
        same = (a == b) | np.isclose(a, b, rtol=1e-5, atol=1e-6)
        if not same.all():
            j = int(np.argmin(same))
            return f"{_where(path)}{bound} bound of dimension {j}: {a[j]:g} vs {b[j]:g}"
    return None


# how each space type is compared once both types agree; any other type (box) compares shape and bounds
_MISMATCH_BY_TYPE = {
    "dict": _composite_mismatch,
    "tuple": _composite_mismatch,
    "text": _text_mismatch,
    "discrete": _discrete_mismatch,
    "multi_discrete": _multi_mismatch,
    "multi_binary": _multi_mismatch,
}


def check_spaces(what: str, obs_space: dict, act_space: dict, env_id: str, single_obs, single_act) -> None:
    problems = []
    diff = spaces_mismatch(obs_space, single_obs)
    if diff:
        problems.append(f"observation space {diff}")
    diff = spaces_mismatch(act_space, single_act)
    if diff:
        problems.append(f"action space {diff}")
    if problems:
        raise InvalidInputError(f"{what} does not match {env_id}: " + "; ".join(problems) + f" ({what} vs env)",
                                hint="evaluate on the environment the data came from")


def _render_hint(env_id: str) -> str:
    return ("MuJoCo renders headless only with MUJOCO_GL=egl (or osmesa): run `MUJOCO_GL=egl rlft eval ...`"
            if any(k in env_id for k in ("Cheetah", "Hopper", "Walker", "Ant", "Humanoid", "Swimmer", "Reacher",
                                         "Pusher", "InvertedPendulum", "InvertedDoublePendulum"))
            else "the environment must render with render_mode='rgb_array'; classic-control and toy-text envs "
                 'need pygame: pip install "gymnasium[classic-control,toy-text]"')


# what VideoSlots leaves in its folder: the renamed episodes, and the folders its recorders write into
VIDEO_FILES = re.compile(r"episode-\d{4,}-seed--?\d+\.mp4|\.slot\d+")


class VideoSlots:
    """RecordVideo on every slot; only the first ``episodes`` evaluated episodes are recorded and their files
    renamed ``episode-IIII-seed-S.mp4``."""

    def __init__(self, folder: Path, episodes: int, num_envs: int):
        self.folder, self.episodes = Path(folder), episodes
        self.flags = [False] * num_envs
        self.resets = [-1] * num_envs  # RecordVideo's own episode counter, per slot
        self.names: dict[tuple[int, int], tuple[int, int]] = {}

    def wrap(self, env, slot: int):
        from gymnasium.wrappers import RecordVideo

        return RecordVideo(env, video_folder=str(self.folder / f".slot{slot}"), name_prefix=f"slot{slot}",
                           episode_trigger=lambda _ep, k=slot: self.flags[k], disable_logger=True)

    def before_reset(self, slot: int, episode: int | None, seed: int | None) -> None:
        self.resets[slot] += 1
        record = episode is not None and episode < self.episodes
        self.flags[slot] = record
        if record:
            self.names[(slot, self.resets[slot])] = (episode, seed)

    def finish(self) -> list[str]:
        import shutil

        out = []
        for (slot, wrapper_ep), (episode, seed) in sorted(self.names.items(), key=lambda kv: kv[1][0]):
            src = self.folder / f".slot{slot}" / f"slot{slot}-episode-{wrapper_ep}.mp4"
            if src.is_file():
                dst = self.folder / f"episode-{episode:04d}-seed-{seed}.mp4"
                src.replace(dst)
                out.append(str(dst))
        for slot in range(len(self.flags)):
            shutil.rmtree(self.folder / f".slot{slot}", ignore_errors=True)
        return out


def make_env_fns(env_id: str, env_kwargs: dict, num_envs: int, max_episode_steps: int | None,
                 video: VideoSlots | None, action_scale: float = 1.0) -> list[Callable]:
    """One maker per vector slot. ``action_scale`` != 1 multiplies every (Box) action by it, clipped to the space,
    before the env steps (:func:`scale_actions`)."""
    import gymnasium as gym

    kwargs = dict(env_kwargs)
    if max_episode_steps:
        kwargs["max_episode_steps"] = int(max_episode_steps)
    if video is not None:
        kwargs["render_mode"] = "rgb_array"

    def make(slot: int):
        env = drop_temp_files(gym.make(env_id, **kwargs))
        if action_scale != 1.0:
            env = scale_actions(env, action_scale)
        return video.wrap(env, slot) if video is not None else env

    return [lambda k=k: make(k) for k in range(num_envs)]


def scale_actions(env, scale: float):
    """``env`` (a Box action space: ``rlft eval`` refuses --action-scale on others before any env is made) whose
    actions are multiplied by ``scale`` and clipped to the Box: a probe of how much the return hinges on how hard a
    policy pushes (``rlft eval --action-scale``)."""
    from gymnasium.wrappers import TransformAction

    space = env.action_space
    return TransformAction(env, lambda a: np.clip(np.asarray(a) * scale, space.low, space.high).astype(space.dtype),
                           space)


def check_video(env_id: str, env_kwargs: dict) -> None:
    """Fail early and clearly when episodes cannot be recorded: moviepy missing, or rendering broken."""
    import os

    # pygame (classic-control rendering) opens an audio device on init and prints "error: XDG_RUNTIME_DIR is
    # invalid" on a headless machine; videos need no sound
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    try:
        import moviepy  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError(
            "--video needs moviepy (gymnasium's RecordVideo writes MP4 files with it)",
            hint='install it with: pip install "gymnasium[other]"  (or: pip install moviepy)',
        ) from exc
    import gymnasium as gym

    try:
        env = gym.make(env_id, render_mode="rgb_array", **env_kwargs)
        try:
            env.reset(seed=0)
            frame = env.render()
        finally:
            env.close()
    except Exception as exc:  # noqa: BLE001 - any rendering failure: say how to fix it
        raise InvalidInputError(f"rendering {env_id} failed ({type(exc).__name__}: {exc})",
                                hint=_render_hint(env_id)) from exc
    if not isinstance(frame, np.ndarray):
        raise InvalidInputError(f"rendering {env_id} gave no RGB frame", hint=_render_hint(env_id))


# -- the rollout loop ---------------------------------------------------------------------------------------
