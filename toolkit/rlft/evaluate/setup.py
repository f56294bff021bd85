"""Build what an evaluation needs from its config: the policy (LLM or baseline), env, codec, Q-table."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlft.codecs.base import Codec, load_codec
from rlft.core.errors import InvalidInputError
from rlft.datasets.dataset import RlftDataset
from rlft.datasets.frozenlake_q.table import QTable
from rlft.envs.registry import check_env_id, ensure_registered
from rlft.envs.vector_envs import check_spaces
from rlft.evaluate.config import EvalConfig, parse_policy_spec
from rlft.models.offline import OFFLINE_POLICY
from rlft.models.run import load_policy_model, read_run_info
from rlft.policy.backbone import load_online
from rlft.policy.bc import BCPolicy
from rlft.policy.decoding import LocalDecoding
from rlft.policy.generation import default_max_new_tokens
from rlft.policy.grammar import answer_grammar
from rlft.policy.llm_policy import LLMPolicy, load_few_shot
from rlft.policy.openai_backend import OpenAIBackend
from rlft.policy.policies import (
    ConstantPolicy,
    ExpertPolicy,
    LakeSolverPolicy,
    Policy,
    RandomPolicy,
    TablePolicy,
    default_action,
    parse_action_value,
)
from rlft.sources.experts import check_expert_spaces, load_expert


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


def _resolve_env(config: EvalConfig, codec: Codec | None, fallback_env: str | None,
                 fallback_kwargs: dict | None) -> tuple[str, dict]:

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


    ensure_registered(env_id)  # first: a missing package is its own one-line error with the install command
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
    _check_options(config, kind)
    dataset = RlftDataset.open(config.codec, require_codec=False) if config.codec else None  # the --codec dataset
    codec = dataset.codec if dataset is not None else None
    codec_source = str(config.codec) if config.codec else None
    notes: list[str] = []

    if kind == "llm":
        return _llm_setup(config, arg, dataset, codec, codec_source, notes)

    loaded = _load_baseline(kind, arg)  # before the env: a BC policy or an SB3 model names the env it was made on
    if kind == "q-greedy" and codec is None:
        raise InvalidInputError("--policy q-greedy needs --codec DATASET_DIR (a FrozenLake Q dataset: "
                                "rlft data export-q frozenlake)")
    env_id, env_kwargs, obs_space, act_space = _checked_env(config, codec, codec_source, loaded.env_id,
                                                            loaded.env_kwargs)
    qtable = _qtable(dataset, codec, obs_space)
    policy = _baseline_policy(kind, arg, config, loaded, codec, codec_source, qtable, env_id, obs_space, act_space)
    return Setup(policy, env_id, env_kwargs, codec, codec_source, qtable, notes, None, obs_space, act_space)


def _check_options(config: EvalConfig, kind: str) -> None:
    """Refuse --backend openai or --target-return for a non-LLM policy."""
    if config.backend == "openai" and kind != "llm":
        raise InvalidInputError("--backend openai is for llm policies")
    if config.target_return is not None and kind != "llm":
        raise InvalidInputError(f"--target-return conditions an LLM whose codec writes the return-to-go; a {kind} "
                                "policy does not read it", hint="leave --target-return out")


def _checked_env(config: EvalConfig, codec: Codec | None, codec_source: str | None, fallback_env: str | None,
                 fallback_kwargs: dict | None) -> tuple[str, dict, Any, Any]:
    """The environment (id, kwargs, observation and action space), checked against the codec's spaces."""
    env_id, env_kwargs = _resolve_env(config, codec, fallback_env, fallback_kwargs)
    obs_space, act_space = _env_spaces(env_id, env_kwargs)
    if codec is not None:
        check_spaces(f"the codec of {codec_source}", codec.observation_space, codec.action_space, env_id, obs_space,
                     act_space)
    return env_id, env_kwargs, obs_space, act_space


@dataclass
class _LoadedBaseline:
    """What a baseline policy loaded from a file brings: the environment it names, and the BC policy or the SB3
    model (with its path and metadata)."""

    env_id: str | None = None
    env_kwargs: dict | None = None
    bc_policy: Any = None
    sb3: tuple[Path, Any, dict] | None = None


def _load_baseline(kind: str, arg: str | None) -> _LoadedBaseline:
    """Load the file of a ``bc:``, ``offline:``, ``expert:`` or ``online:`` policy (nothing to load for the
    others). An offline run's actor is a file of the BC format (RUN/policy.pt)."""
    if kind in ("bc", "offline"):
        bc_policy = BCPolicy(Path(arg) / OFFLINE_POLICY if kind == "offline" and Path(arg).is_dir() else arg)
        bc_policy.kind = kind
        return _LoadedBaseline(bc_policy.info.get("env_id"), bc_policy.info.get("env_kwargs"), bc_policy=bc_policy)
    if kind == "expert":

        path = Path(arg)
        model, metadata = load_expert(path)
    elif kind == "online":

        path = Path(arg)
        model, metadata = load_online(path)
    else:
        return _LoadedBaseline()
    return _LoadedBaseline(metadata.get("env_id"), sb3=(path, model, metadata))


def _baseline_policy(kind: str, arg: str | None, config: EvalConfig, loaded: _LoadedBaseline, codec: Codec | None,
                     codec_source: str | None, qtable, env_id: str, obs_space, act_space) -> Policy:
    """The policy of a non-LLM --policy, checked against the environment's spaces."""
    if kind == "random":

        return RandomPolicy(act_space, config.seed)
    if kind == "constant":

        return ConstantPolicy(act_space, parse_action_value(arg, act_space, codec) if arg else None)
    if kind in ("expert", "online"):

        path, model, metadata = loaded.sb3
        policy = ExpertPolicy(model, metadata, str(path))
        policy.kind = kind
        check_expert_spaces(model, env_id, obs_space, act_space, str(path))
        return policy
    if kind in ("bc", "offline"):
        what = "behaviour-cloning" if kind == "bc" else "offline-RL"
        check_spaces(f"the {what} policy {arg}", loaded.bc_policy.observation_space, loaded.bc_policy.action_space,
                     env_id, obs_space, act_space)
        return loaded.bc_policy
    # q-greedy
    if qtable is None and getattr(codec, "kind", None) == "frozenlake-grid" and codec.lake is None:
        return LakeSolverPolicy(codec)  # random maps: each episode's map solved when it is met
    if qtable is None:
        raise InvalidInputError(f"--policy q-greedy: {codec_source} holds no Q-values (state, q_values, "
                                "optimal_actions columns)", hint="make one with rlft data export-q frozenlake")

    return TablePolicy(qtable.greedy, qtable.source)


def _qtable(dataset: RlftDataset | None, codec: Codec | None, obs_space):
    """Exact Q-values of ``dataset`` (a FrozenLake Q dataset folder) for agreement and q-greedy, or None."""
    from gymnasium import spaces

    if codec is None or dataset is None or not isinstance(obs_space, spaces.Discrete):
        return None

    return QTable(dataset, int(obs_space.n)) if dataset.has_q_values else None


def _run_dataset(run: str) -> str | None:
    """The local dataset folder recorded in a RUN folder's rlft_run.json, when it still exists."""

    info = read_run_info(run) if Path(run).is_dir() else None
    dataset = (info or {}).get("dataset")
    return str(dataset) if dataset and Path(str(dataset)).is_dir() else None


def _default_target_return(config: EvalConfig, dataset: RlftDataset | None) -> float | None:
    if config.target_return is not None:
        return float(config.target_return)
    if dataset is not None:

        try:
            info = dataset.info
        except InvalidInputError:
            return None
        if info.get("return_max") is not None:
            return float(info["return_max"])
    return None


def _llm_setup(config: EvalConfig, model_arg: str, dataset: RlftDataset | None, codec: Codec | None,
               codec_source: str | None, notes: list[str]) -> Setup:
    """The setup of ``llm:MODEL``: the model (transformers) or the server (openai), its codec, the environment
    and the decoding options. ``dataset`` is the --codec dataset (the few-shot examples come from it); it, else
    the dataset a RUN folder was trained on, is ``trained_on``: its Q-values grade the actions, its best return is
    the default target."""

    model = tokenizer = None
    trained_on = dataset
    if config.backend == "transformers":
        model, tokenizer, run_codec = _load_transformers_model(model_arg)
        model = _place(model, config.device)
        codec, codec_source, run_dataset = _codec_or_run_codec(config, model_arg, codec, codec_source, run_codec,
                                                                notes)
        if run_dataset is not None:
            trained_on = RlftDataset.open(run_dataset, require_codec=False)
    else:
        codec, codec_source = _codec_or_local_codec(model_arg, codec, codec_source)
    if codec is None:
        raise InvalidInputError(f"no codec for {model_arg}: pass --codec DATASET_DIR (the dataset the model was "
                                "trained on)", hint="a RUN folder written by rlft train carries rlft_codec.json")
    if config.target_return is not None and not codec.template.return_to_go:  # it would be recorded, unused
        raise InvalidInputError(f"--target-return: the codec of {codec_source or model_arg} writes no return-to-go "
                                "in its prompts, so the model is not conditioned on it",
                                hint="leave --target-return out, or serialize with --return-to-go")
    env_id, env_kwargs, obs_space, act_space = _checked_env(config, codec, codec_source, None, None)
    qtable = _qtable(trained_on, codec, obs_space)
    fallback = _fallback_action(config, codec, act_space)
    few_shot = _few_shot(config, dataset, codec)
    # a local model's decoding (rlft.policy.decoding); through a server, --constrained is its regex
    decoding = (LocalDecoding.choose(codec, tokenizer, model, bin_decoding=config.bin_decoding,
                                     constrained=config.constrained, temperature=config.temperature,
                                     top_p=config.top_p) if config.backend == "transformers" else None)
    table = decoding.table if decoding is not None else None
    precompute = table.describe() if table is not None else None
    max_new = _max_new_tokens(config, codec, table, notes)
    backend = _generation_backend(config, model_arg, codec, model, decoding, max_new)
    target_return = _default_target_return(config, trained_on)
    policy = LLMPolicy(codec, backend, fallback, act_space, target_return, few_shot, model=model_arg,
                       constrained=config.constrained)
    if codec.template.return_to_go and config.target_return is None:
        notes.append(f"--target-return not given: using the dataset's best episode return {policy.target_return:g}")
    return Setup(policy, env_id, env_kwargs, codec, codec_source, qtable, notes, precompute, obs_space, act_space)


def _place(model, device: str):
    """``model`` on ``device`` (``auto``: the GPU when torch sees one). Weights keep their dtype: a float32 policy
    is evaluated as trained, only faster."""
    import torch

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise InvalidInputError(f"--device {device}: torch sees no GPU here",
                                hint="pass --device cpu (or auto), or install a CUDA build of torch")
    try:
        target = torch.device(device)
    except RuntimeError as exc:
        raise InvalidInputError(f"--device {device!r} is not a device torch knows: {exc}",
                                hint="auto, cpu, cuda or cuda:N") from exc
    return model.to(target)


def _load_transformers_model(model_arg: str):
    """(model, tokenizer, codec of a RUN folder or None) of MODEL, loaded without the weight-loading bar."""
    from transformers.utils import logging as hf_logging


    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # a "Loading weights" bar per evaluation is noise
    try:
        return load_policy_model(model_arg)
    finally:
        if bars:
            hf_logging.enable_progress_bar()


def _codec_or_run_codec(config: EvalConfig, model_arg: str, codec: Codec | None, codec_source: str | None,
                        run_codec: Codec | None, notes: list[str]) -> tuple[Codec | None, str | None, str | None]:
    """(codec, codec source, the RUN folder's dataset or None): --codec wins over the codec a RUN folder was
    trained with (a note says when they differ)."""
    if codec is None and run_codec is not None:
        return run_codec, f"{model_arg} (rlft_codec.json)", _run_dataset(model_arg)
    if codec is not None and run_codec is not None and codec.to_dict() != run_codec.to_dict():
        given, trained = codec_identity(codec), codec_identity(run_codec)
        if given != trained and not config.allow_codec_mismatch:
            raise InvalidInputError(
                f"--codec {config.codec} is a {given[1]} codec for {given[0]}, but {model_arg} was trained with a "
                f"{trained[1]} codec for {trained[0]}: its answers would not parse (a report of invalid actions)",
                hint="drop --codec to use the run's own codec, or pass --allow-codec-mismatch to evaluate anyway")
        notes.append(f"--codec {config.codec} differs from the codec the run was trained with; using --codec")
    return codec, codec_source, None


def codec_identity(codec: Codec) -> tuple[str, str, str, str]:
    """(env id, codec kind, observation space, action space): what must match for a model to read a codec."""
    return (codec.env_id or "an unnamed environment", codec.kind, json.dumps(codec.observation_space, sort_keys=True),
            json.dumps(codec.action_space, sort_keys=True))


def _codec_or_local_codec(model_arg: str, codec: Codec | None, codec_source: str | None
                          ) -> tuple[Codec | None, str | None]:
    """--codec, else the rlft_codec.json in MODEL when MODEL is a local folder that holds one."""
    local = Path(model_arg)
    if codec is None and (local / "rlft_codec.json").is_file():
        return load_codec(local), f"{model_arg} (rlft_codec.json)"
    return codec, codec_source


def _fallback_action(config: EvalConfig, codec: Codec, act_space):
    """The action taken for an unparsable answer: --fallback-action, else the action space's default."""

    return (parse_action_value(config.fallback_action, act_space, codec) if config.fallback_action is not None
            else default_action(act_space))


def _few_shot(config: EvalConfig, dataset: RlftDataset | None, codec: Codec):
    """The --n-examples example rows of the --codec dataset for the prompts, or None."""

    if not config.n_examples:
        return None
    if dataset is None:
        raise InvalidInputError("--n-examples needs --codec DATASET_DIR (the examples come from its rows)")
    return load_few_shot(codec, dataset, config.n_examples, config.seed)


def _max_new_tokens(config: EvalConfig, codec: Codec, table, notes: list[str]) -> int:
    """--max-new-tokens (a note when it cuts constrained answers), else enough for the longest answer."""

    if config.max_new_tokens is None:
        return default_max_new_tokens(codec, table)
    if config.max_new_tokens < 1:
        raise InvalidInputError("--max-new-tokens must be at least 1")
    max_new = int(config.max_new_tokens)
    if table is not None and max_new < table.max_new_tokens:
        notes.append(f"--max-new-tokens {max_new} is below the longest constrained answer "
                     f"({table.max_new_tokens} tokens): some answers may be cut")
    return max_new


def _generation_backend(config: EvalConfig, model_arg: str, codec: Codec, model, decoding: LocalDecoding | None,
                        max_new: int):
    """The backend that answers the prompts: the loaded ``model`` with its ``decoding`` (bins or text), or an
    OpenAI-compatible server."""
    if decoding is not None:
        return dataclasses.replace(decoding, max_new_tokens=max_new).backend(model, cache=config.cache)
    import os


    if not config.api_url:
        raise InvalidInputError("--backend openai needs --api-url URL (e.g. http://127.0.0.1:8000/v1)")
    suffix = codec.template.answer_suffix
    return OpenAIBackend(config.api_url, config.api_model or model_arg, max_new, config.temperature,
                         config.top_p, config.concurrency, api_key=config.api_key or os.environ.get(
                             "OPENAI_API_KEY"), stop=[suffix] if suffix and config.api_stop else None,
                         answer_prefix=codec.template.answer_prefix, answer_suffix=suffix,
                         seed=config.seed, timeout=config.api_timeout,
                         # --constrained: the codec's grammar as a regex the server constrains sampling with (vLLM's
                         # structured outputs); the logits themselves never leave the server
                         regex=answer_grammar(codec).regex() if config.constrained else None)
