"""``rlft eval``: run a policy (an LLM or a baseline) for N episodes over K vector environments.

Episode ``i`` is always reset with seed ``seed + i``. Episodes go to free slots of a
``gymnasium.vector.SyncVectorEnv`` (autoreset disabled; finished slots are reset with ``reset_mask``) until
N are done, and each step asks the policy for the actions of all live slots at once (for an LLM: one
batched generate call). Because an episode's seed and its actions depend only on its own history, K = 1 and
K = 8 give the same per-episode returns with deterministic policies and greedy decoding.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlft.codecs.base import Codec
from rlft.core.errors import InvalidInputError, MissingDependencyError, OutputExistsError
from rlft.evaluate.policies import Policy

POLICY_KINDS = ("llm", "random", "constant", "expert", "bc", "q-greedy")
BACKENDS = ("transformers", "openai")


@dataclass
class EvalConfig:
    """Everything ``rlft eval`` takes (the CLI flags, one to one)."""

    policy: str
    env_id: str | None = None
    episodes: int = 10
    num_envs: int = 1
    seed: int = 0
    out: Path | None = None
    codec: str | None = None  # dataset folder whose codec (and Q-values / examples) to use
    backend: str = "transformers"
    api_url: str | None = None
    api_model: str | None = None
    api_key: str | None = None
    concurrency: int = 8
    constrained: bool = False
    fallback_action: str | None = None
    target_return: float | None = None
    n_examples: int = 0
    temperature: float = 0.0
    top_p: float = 1.0
    max_new_tokens: int | None = None
    expert: Path | None = None  # SB3 checkpoint to measure agreement against
    video: Path | None = None
    video_episodes: int = 3
    max_episode_steps: int | None = None
    overwrite: bool = False
    quiet: bool = False


@dataclass
class EpisodeResult:
    index: int
    seed: int
    episode_return: float
    length: int
    terminated: bool


@dataclass
class RolloutResult:
    episodes: list[EpisodeResult]
    seconds: float
    policy_seconds: float
    env_seconds: float
    env_steps: int  # steps of evaluated episodes (idle slots not counted)
    agreement_hits: int = 0
    agreement_total: int = 0
    expert_match: int = 0
    expert_total: int = 0
    expert_abs_diff_sum: float = 0.0
    expert_abs_diff_n: int = 0
    videos: list[str] = field(default_factory=list)


# -- policy specs -------------------------------------------------------------------------------------------


def parse_policy_spec(spec: str) -> tuple[str, str | None]:
    """``llm:MODEL``, ``random``, ``constant[:VALUE]``, ``expert:FILE.zip``, ``bc:FILE``, ``q-greedy``."""
    kind, _, arg = str(spec).partition(":")
    kind = kind.strip().lower()
    arg = arg.strip() or None
    if kind not in POLICY_KINDS:
        raise InvalidInputError(
            f"unknown policy {spec!r}",
            hint="use llm:MODEL, random, constant[:VALUE], expert:FILE.zip, bc:FILE or q-greedy",
        )
    if kind in ("expert", "bc") and not arg:
        raise InvalidInputError(f"--policy {kind} needs a file: {kind}:FILE")
    if kind == "llm" and not arg:
        raise InvalidInputError("--policy llm needs a model: llm:MODEL (a model folder, a RUN folder or a Hub id)")
    return kind, arg


# -- environments -------------------------------------------------------------------------------------------


def spaces_mismatch(codec_space: dict, env_space) -> str | None:
    """How a codec's space dict differs from an environment's space, or None when they match."""
    from rlft.codecs.spaces import describe_space, space_to_dict

    try:
        env = space_to_dict(env_space)
    except InvalidInputError:
        return f"the environment's space {env_space} is not Discrete or Box"
    if codec_space["type"] != env["type"]:
        return f"{describe_space(codec_space)} vs {describe_space(env)}"
    if env["type"] == "discrete":
        if (codec_space["n"], codec_space.get("start", 0)) != (env["n"], env["start"]):
            return f"{describe_space(codec_space)} (start {codec_space.get('start', 0)}) vs Discrete({env['n']}) " \
                   f"(start {env['start']})"
        return None
    if list(codec_space["shape"]) != list(env["shape"]):
        return f"shape {tuple(codec_space['shape'])} vs {tuple(env['shape'])}"
    for bound in ("low", "high"):
        a, b = np.asarray(codec_space[bound], np.float64), np.asarray(env[bound], np.float64)
        same = (a == b) | np.isclose(a, b, rtol=1e-5, atol=1e-6)
        if not same.all():
            j = int(np.argmin(same))
            return f"{bound} bound of dimension {j}: {a[j]:g} vs {b[j]:g}"
    return None


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
                 video: VideoSlots | None) -> list[Callable]:
    import gymnasium as gym

    kwargs = dict(env_kwargs)
    if max_episode_steps:
        kwargs["max_episode_steps"] = int(max_episode_steps)
    if video is not None:
        kwargs["render_mode"] = "rgb_array"

    def make(slot: int):
        env = gym.make(env_id, **kwargs)
        return video.wrap(env, slot) if video is not None else env

    return [lambda k=k: make(k) for k in range(num_envs)]


def check_video(env_id: str, env_kwargs: dict) -> None:
    """Fail early and clearly when episodes cannot be recorded: moviepy missing, or rendering broken."""
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


class Agreement:
    """Agreement of the policy's actions with an expert on the same observations."""

    def __init__(self, qtable=None, expert_model=None):
        self.qtable, self.expert = qtable, expert_model

    def update(self, result: RolloutResult, obs: np.ndarray, actions: np.ndarray) -> None:
        if self.qtable is not None:
            for state, action in zip(np.asarray(obs).reshape(-1), np.asarray(actions).reshape(-1), strict=True):
                ok = self.qtable.agrees(int(state), int(action))
                if ok is not None:
                    result.agreement_hits += int(ok)
                    result.agreement_total += 1
        if self.expert is not None:
            expert_actions = np.asarray(self.expert.predict(obs, deterministic=True)[0])
            actions = np.asarray(actions)
            if np.issubdtype(expert_actions.dtype, np.integer) and np.issubdtype(actions.dtype, np.integer):
                result.expert_match += int((expert_actions.reshape(-1) == actions.reshape(-1)).sum())
                result.expert_total += len(actions)
            else:
                diff = np.abs(expert_actions.reshape(len(actions), -1) - actions.reshape(len(actions), -1))
                result.expert_abs_diff_sum += float(diff.sum())
                result.expert_abs_diff_n += int(diff.size)


def rollout(policy: Policy, env_fns: list[Callable], episodes: int, seed: int, idle_action,
            agreement: Agreement | None = None, video: VideoSlots | None = None,
            on_episode: Callable[[EpisodeResult], None] | None = None) -> RolloutResult:
    """Run ``episodes`` episodes (episode i seeded ``seed + i``) over ``len(env_fns)`` vector slots."""
    import gymnasium as gym
    from gymnasium.vector import AutoresetMode

    if episodes < 1:
        raise InvalidInputError(f"--episodes must be at least 1, got {episodes}")
    k_envs = len(env_fns)
    envs = gym.vector.SyncVectorEnv(env_fns, autoreset_mode=AutoresetMode.DISABLED)
    space = envs.single_action_space
    results: dict[int, EpisodeResult] = {}
    result = RolloutResult([], 0.0, 0.0, 0.0, 0)
    slot_ep = list(range(k_envs))
    returns = np.zeros(k_envs)
    lengths = np.zeros(k_envs, dtype=np.int64)
    next_ep = k_envs
    t_policy = t_env = 0.0
    start = time.perf_counter()
    try:
        if video is not None:
            for k in range(k_envs):
                video.before_reset(k, k, seed + k)
        obs, _ = envs.reset(seed=[seed + k for k in range(k_envs)])
        for k in range(k_envs):
            policy.begin_episode(k, k, seed + k, obs[k])
        while any(ep >= 0 for ep in slot_ep):
            live = [k for k in range(k_envs) if slot_ep[k] >= 0]
            live_obs = obs[live]
            t0 = time.perf_counter()
            actions = policy.act(live_obs, live)
            t1 = time.perf_counter()
            t_policy += t1 - t0
            if agreement is not None:
                agreement.update(result, live_obs, actions)
            if len(live) == k_envs:
                full = actions
            else:
                full = np.stack([np.asarray(idle_action, dtype=space.dtype)] * k_envs) if not isinstance(
                    space, gym.spaces.Discrete) else np.full(k_envs, idle_action, dtype=np.int64)
                full[live] = actions
            t2 = time.perf_counter()
            obs, rewards, terminated, truncated, _ = envs.step(full)
            t_env += time.perf_counter() - t2
            policy.record(live, actions, rewards[live])
            done = np.logical_or(terminated, truncated)
            for k in live:
                returns[k] += float(rewards[k])
                lengths[k] += 1
                result.env_steps += 1
                if done[k]:
                    ep = slot_ep[k]
                    res = EpisodeResult(ep, seed + ep, float(returns[k]), int(lengths[k]), bool(terminated[k]))
                    results[ep] = res
                    if on_episode is not None:
                        on_episode(res)
            if done.any():
                seeds: list[int | None] = [None] * k_envs
                new = []
                for k in np.flatnonzero(done):
                    if slot_ep[k] >= 0 and next_ep < episodes:
                        slot_ep[k] = next_ep
                        seeds[k] = seed + next_ep
                        new.append(k)
                        next_ep += 1
                    else:
                        slot_ep[k] = -1  # idle: reset (stepping a finished env is refused) and never read
                    returns[k], lengths[k] = 0.0, 0
                    if video is not None:
                        video.before_reset(int(k), slot_ep[k] if slot_ep[k] >= 0 else None, seeds[k])
                t3 = time.perf_counter()
                obs, _ = envs.reset(seed=seeds, options={"reset_mask": done.copy()})
                t_env += time.perf_counter() - t3
                for k in new:
                    policy.begin_episode(k, slot_ep[k], seed + slot_ep[k], obs[k])
    finally:
        result.seconds = time.perf_counter() - start
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            envs.close()
    result.policy_seconds, result.env_seconds = t_policy, t_env
    result.episodes = [results[i] for i in sorted(results)]
    if video is not None:
        result.videos = video.finish()
    return result


# -- assembling an evaluation -------------------------------------------------------------------------------


@dataclass
class Setup:
    policy: Policy
    env_id: str
    env_kwargs: dict
    codec: Codec | None
    codec_source: str | None
    qtable: Any = None
    notes: list[str] = field(default_factory=list)
    precompute: dict[str, Any] | None = None
    observation_space: Any = None
    action_space: Any = None


def _load_codec_from(path: str) -> Codec:
    from rlft.evaluate.data import load_dataset_codec

    return load_dataset_codec(path)


def _resolve_env(config: EvalConfig, codec: Codec | None, fallback_env: str | None,
                 fallback_kwargs: dict | None) -> tuple[str, dict]:
    from rlft.envs.registry import check_env_id

    env_id = config.env_id or (codec.env_id if codec is not None else None) or fallback_env
    if not env_id:
        raise InvalidInputError("no environment: pass --env ID", hint="or --codec DATASET_DIR, whose codec names it")
    check_env_id(env_id)
    if codec is not None and codec.env_id == env_id:
        return env_id, dict(codec.env_kwargs)
    if codec is None and fallback_env == env_id and fallback_kwargs:
        return env_id, dict(fallback_kwargs)
    return env_id, {}


def _env_spaces(env_id: str, env_kwargs: dict):
    import gymnasium as gym

    try:
        env = gym.make(env_id, **env_kwargs)
    except Exception as exc:  # noqa: BLE001 - bad kwargs from a codec, missing dependency of the env...
        raise InvalidInputError(f"cannot create {env_id} with {env_kwargs}: {type(exc).__name__}: {exc}") from exc
    try:
        return env.observation_space, env.action_space
    finally:
        env.close()


def build_setup(config: EvalConfig) -> Setup:
    """Load the policy, its codec and the environment description; check that they fit together."""
    kind, arg = parse_policy_spec(config.policy)
    if config.backend not in BACKENDS:
        raise InvalidInputError(f"--backend must be one of {', '.join(BACKENDS)}, got {config.backend!r}")
    if config.backend == "openai" and kind != "llm":
        raise InvalidInputError("--backend openai is for llm policies")
    if config.n_examples < 0:
        raise InvalidInputError("--n-examples must be >= 0")
    codec = _load_codec_from(config.codec) if config.codec else None
    codec_source = str(config.codec) if config.codec else None
    notes: list[str] = []

    if kind == "llm":
        return _llm_setup(config, arg, codec, codec_source, notes)

    fallback_env, fallback_kwargs = None, None
    bc_policy = expert_policy = None
    if kind == "bc":
        from rlft.evaluate.bc import BCPolicy

        bc_policy = BCPolicy(arg)
        fallback_env, fallback_kwargs = bc_policy.info.get("env_id"), bc_policy.info.get("env_kwargs")
    elif kind == "expert":
        from rlft.sources.experts import load_expert

        path = Path(arg)
        model, metadata = load_expert(path)
        fallback_env = metadata.get("env_id")
        expert_policy = (path, model, metadata)
    if kind == "q-greedy" and codec is None:
        raise InvalidInputError("--policy q-greedy needs --codec DATASET_DIR (a FrozenLake Q dataset: "
                                "rlft data export-q frozenlake)")
    env_id, env_kwargs = _resolve_env(config, codec, fallback_env, fallback_kwargs)
    obs_space, act_space = _env_spaces(env_id, env_kwargs)
    if codec is not None:
        check_spaces(f"the codec of {codec_source}", codec.observation_space, codec.action_space, env_id, obs_space,
                     act_space)
    qtable = _qtable(config.codec, codec, obs_space)

    if kind == "random":
        from rlft.evaluate.policies import RandomPolicy

        policy: Policy = RandomPolicy(act_space, config.seed)
    elif kind == "constant":
        from rlft.evaluate.policies import ConstantPolicy, parse_action_value

        policy = ConstantPolicy(act_space, parse_action_value(arg, act_space, codec) if arg else None)
    elif kind == "expert":
        from rlft.evaluate.policies import ExpertPolicy

        path, model, metadata = expert_policy
        policy = ExpertPolicy(model, metadata, str(path))
        _check_sb3_spaces(model, env_id, obs_space, act_space, str(path))
    elif kind == "bc":
        check_spaces(f"the behaviour-cloning policy {arg}", bc_policy.observation_space, bc_policy.action_space,
                     env_id, obs_space, act_space)
        policy = bc_policy
    else:  # q-greedy
        if qtable is None:
            raise InvalidInputError(f"--policy q-greedy: {codec_source} holds no Q-values (state, q_values, "
                                    "optimal_actions columns)", hint="make one with rlft data export-q frozenlake")
        from rlft.evaluate.policies import TablePolicy

        policy = TablePolicy(qtable.greedy, qtable.source)
    return Setup(policy, env_id, env_kwargs, codec, codec_source, qtable, notes, None, obs_space, act_space)


def _check_sb3_spaces(model, env_id, obs_space, act_space, what) -> None:
    from rlft.codecs.spaces import space_to_dict

    try:
        check_spaces(f"the expert {what}", space_to_dict(model.observation_space), space_to_dict(model.action_space),
                     env_id, obs_space, act_space)
    except InvalidInputError as exc:
        if "does not match" in exc.message:
            raise
        # spaces rlft cannot describe: compare shapes only
        if model.observation_space.shape != obs_space.shape or model.action_space.shape != act_space.shape:
            raise InvalidInputError(f"the expert {what} does not match {env_id}") from exc


def _qtable(dataset: str | None, codec: Codec | None, obs_space):
    """Exact Q-values of ``dataset`` (a FrozenLake Q dataset folder) for agreement and q-greedy, or None."""
    from gymnasium import spaces

    if codec is None or not dataset or not isinstance(obs_space, spaces.Discrete):
        return None
    from rlft.evaluate.data import QTable, dataset_dir, has_q_values

    root = dataset_dir(dataset)
    return QTable(root, int(obs_space.n)) if has_q_values(root) else None


def _run_dataset(run: str) -> str | None:
    """The local dataset folder recorded in a RUN folder's rlft_run.json, when it still exists."""
    from rlft.train.run import read_run_info

    try:
        info = read_run_info(run) if Path(run).is_dir() else None
    except InvalidInputError:
        return None
    dataset = (info or {}).get("dataset")
    return str(dataset) if dataset and Path(str(dataset)).is_dir() else None


def _default_target_return(config: EvalConfig, dataset: str | None) -> float | None:
    if config.target_return is not None:
        return float(config.target_return)
    if dataset:
        from rlft.evaluate.data import dataset_dir, dataset_info

        try:
            info = dataset_info(dataset_dir(dataset))
        except InvalidInputError:
            return None
        if info.get("return_max") is not None:
            return float(info["return_max"])
    return None


def _llm_setup(config: EvalConfig, model_arg: str, codec: Codec | None, codec_source: str | None,
               notes: list[str]) -> Setup:
    from rlft.evaluate.constrained import answer_grammar, build_token_table
    from rlft.evaluate.llm_policy import LLMPolicy, load_few_shot
    from rlft.evaluate.policies import default_action, parse_action_value

    model = tokenizer = None
    run_dataset = None  # the dataset a RUN folder was trained on (its Q-values grade the actions)
    if config.backend == "transformers":
        from transformers.utils import logging as hf_logging

        from rlft.train.run import load_policy_model

        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # a "Loading weights" bar per evaluation is noise
        try:
            model, tokenizer, run_codec = load_policy_model(model_arg)
        finally:
            if bars:
                hf_logging.enable_progress_bar()
        if codec is None and run_codec is not None:
            codec, codec_source = run_codec, f"{model_arg} (rlft_codec.json)"
            run_dataset = _run_dataset(model_arg)
        elif codec is not None and run_codec is not None and codec.to_dict() != run_codec.to_dict():
            notes.append(f"--codec {config.codec} differs from the codec the run was trained with; using --codec")
    else:
        local = Path(model_arg)
        if codec is None and (local / "rlft_codec.json").is_file():
            codec, codec_source = _load_codec_from(str(local)), f"{model_arg} (rlft_codec.json)"
        if config.constrained:
            raise InvalidInputError("--constrained needs --backend transformers (the logits are not reachable "
                                    "through the OpenAI API)")
    if codec is None:
        raise InvalidInputError(f"no codec for {model_arg}: pass --codec DATASET_DIR (the dataset the model was "
                                "trained on)", hint="a RUN folder written by rlft train carries rlft_codec.json")
    env_id, env_kwargs = _resolve_env(config, codec, None, None)
    obs_space, act_space = _env_spaces(env_id, env_kwargs)
    check_spaces(f"the codec of {codec_source}", codec.observation_space, codec.action_space, env_id, obs_space,
                 act_space)
    qtable = _qtable(config.codec or run_dataset, codec, obs_space)
    fallback = (parse_action_value(config.fallback_action, act_space, codec) if config.fallback_action is not None
                else default_action(act_space))
    few_shot = None
    if config.n_examples:
        if not config.codec:
            raise InvalidInputError("--n-examples needs --codec DATASET_DIR (the examples come from its rows)")
        few_shot = load_few_shot(codec, config.codec, config.n_examples, config.seed)

    precompute = None
    table = None
    if config.constrained:
        table = build_token_table(codec, tokenizer, model)
        precompute = table.describe()
    if config.max_new_tokens is not None:
        if config.max_new_tokens < 1:
            raise InvalidInputError("--max-new-tokens must be at least 1")
        max_new = int(config.max_new_tokens)
        if table is not None and max_new < table.max_new_tokens:
            notes.append(f"--max-new-tokens {max_new} is below the longest constrained answer "
                         f"({table.max_new_tokens} tokens): some answers may be cut")
    elif table is not None:
        max_new = table.max_new_tokens
    else:
        try:
            max_new = answer_grammar(codec).max_chars() + 8
        except InvalidInputError:
            max_new = 64
    if config.backend == "transformers":
        from rlft.evaluate.generation import TransformersBackend

        backend = TransformersBackend(model, tokenizer, max_new, config.temperature, config.top_p, table)
    else:
        import os

        from rlft.evaluate.generation import OpenAIBackend

        if not config.api_url:
            raise InvalidInputError("--backend openai needs --api-url URL (e.g. http://127.0.0.1:8000/v1)")
        suffix = codec.template.answer_suffix
        backend = OpenAIBackend(config.api_url, config.api_model or model_arg, max_new, config.temperature,
                                config.top_p, config.concurrency, api_key=config.api_key or os.environ.get(
                                    "OPENAI_API_KEY"), stop=[suffix] if suffix else None,
                                answer_prefix=codec.template.answer_prefix, answer_suffix=suffix,
                                seed=config.seed)
    target_return = _default_target_return(config, config.codec or run_dataset)
    policy = LLMPolicy(codec, backend, fallback, act_space, target_return, few_shot, model=model_arg,
                       constrained=config.constrained)
    if codec.template.return_to_go and config.target_return is None:
        notes.append(f"--target-return not given: using the dataset's best episode return {policy.target_return:g}")
    return Setup(policy, env_id, env_kwargs, codec, codec_source, qtable, notes, precompute, obs_space, act_space)


def run_evaluation(config: EvalConfig) -> dict[str, Any]:
    """Build everything, run the episodes, write and print the report; return the report dict."""
    from rlft.core.console import console, progress
    from rlft.core.seeding import limit_threads, seed_everything
    from rlft.evaluate.report import build_report, print_report, write_report

    if config.episodes < 1:
        raise InvalidInputError(f"--episodes must be at least 1, got {config.episodes}")
    if config.num_envs < 1:
        raise InvalidInputError(f"--num-envs must be at least 1, got {config.num_envs}")
    if config.max_episode_steps is not None and config.max_episode_steps < 1:
        raise InvalidInputError("--max-episode-steps must be at least 1")
    if config.out is not None:
        out = Path(config.out)
        if out.suffix.lower() != ".json":
            raise InvalidInputError(f"--out must be a .json file, got {out}")
        if out.exists() and not config.overwrite:
            raise OutputExistsError(f"--out {out} already exists", hint="pass --overwrite to replace it")
    limit_threads()
    seed_everything(config.seed)
    expert_model = None
    if config.expert is not None:
        from rlft.sources.experts import load_expert

        expert_model, _ = load_expert(config.expert)
    setup = build_setup(config)
    if expert_model is not None:
        _check_sb3_spaces(expert_model, setup.env_id, setup.observation_space, setup.action_space,
                          str(config.expert))
    num_envs = config.num_envs
    if num_envs > config.episodes:
        setup.notes.append(f"--num-envs {num_envs} is more than --episodes {config.episodes}: "
                           f"using {config.episodes} environments")
        num_envs = config.episodes
    video = None
    if config.video is not None:
        check_video(setup.env_id, setup.env_kwargs)
        video = VideoSlots(config.video, config.video_episodes, num_envs)
    if not config.quiet:
        for note in setup.notes:
            console.print(f"[yellow]note:[/] {note}")
        if setup.precompute:
            pc = setup.precompute
            console.print(f"constrained decoding: {pc['states']} grammar states, {pc['candidate_tokens']} candidate "
                          f"tokens, precomputed in {pc['precompute_seconds'] * 1000:.1f} ms")
    env_fns = make_env_fns(setup.env_id, setup.env_kwargs, num_envs, config.max_episode_steps, video)
    agreement = Agreement(setup.qtable, expert_model) if (setup.qtable is not None or expert_model is not None) \
        else None
    from rlft.evaluate.policies import default_action

    try:
        with progress(transient=True) as bar:
            task = bar.add_task(f"{config.policy} on {setup.env_id}", total=config.episodes)
            result = rollout(setup.policy, env_fns, config.episodes, config.seed, default_action(setup.action_space),
                             agreement, video, on_episode=lambda _r: bar.advance(task))
    finally:
        setup.policy.close()
    report = build_report(config, setup, result, num_envs)
    if config.out is not None:
        report["files"] = write_report(report, Path(config.out))
    if not config.quiet:
        print_report(report)
    return report
