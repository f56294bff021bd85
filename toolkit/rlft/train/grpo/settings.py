"""The settings of a GRPO run, checked and resolved before anything is trained: refusals of settings that cannot work,
the defaults that depend on the data (continuous actions, the group kind, ``--reward auto``), and warnings of
settings that carry little signal."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from rlft.codecs.base import CODEC_FILENAME, Codec, load_codec
from rlft.core.console import console
from rlft.core.errors import InvalidInputError, MissingDependencyError
from rlft.models.run import read_run_info
from rlft.policy.action_scores import MAX_CHOICES
from rlft.train.grpo.config import GRPOStageConfig
from rlft.train.grpo.episode_rewards import parse_episode_reward_names
from rlft.train.grpo.rewards import parse_reward_names
from rlft.train.inputs import StageInputs
from rlft.train.trl_config import trl_value


def check_vllm(config: GRPOStageConfig) -> None:
    if not config.use_vllm:  # vLLM's own settings do nothing without it (hostile pass 18, B5)
        given = [name for name in ("vllm_mode", "vllm_gpu_memory_utilization")
                 if trl_value(config, name) != type(config).trl_defaults[name].value]
        if given:
            flag = "--" + given[0].replace("_", "-")
            raise InvalidInputError(f"{flag} does nothing here: it applies with --use-vllm", hint=f"leave {flag} out")
        return
    if trl_value(config, "vllm_mode") == "server" and trl_value(config, "vllm_gpu_memory_utilization") != \
            type(config).trl_defaults["vllm_gpu_memory_utilization"].value:
        raise InvalidInputError("--vllm-gpu-memory-utilization does nothing here: it applies with --vllm-mode "
                                "colocate (a server sets its own)", hint="leave --vllm-gpu-memory-utilization out")
    if importlib.util.find_spec("vllm") is None:
        raise MissingDependencyError("--use-vllm needs the vllm package, which is not installed",
                                     hint='install it on a GPU machine with: pip install "rlft[vllm]"')


def check_grpo_settings(config: GRPOStageConfig) -> tuple[bool, bool]:
    """(episodic, constrained sampling) from ``config``, after refusing settings that cannot work."""
    episodic = config.rollout == "episode"
    answers = episodic and config.credit == "answers"
    if config.group == "actions" and episodic and not answers:
        raise InvalidInputError("--group actions is for step rollouts (one answer per recorded state), or episode "
                                "rollouts with --credit answers", hint="drop --group, or add --credit answers")
    if config.group == "sampled" and answers:
        raise InvalidInputError("--credit answers trains every valid answer of each visited state: it needs "
                                "--group actions (or auto), not sampled", hint="drop --group")
    check_credit(config, episodic)
    check_sampling(config)
    constrained = episodic if config.constrained is None else bool(config.constrained)  # Box: action_space_defaults
    if constrained and config.use_vllm:
        raise InvalidInputError("--constrained sampling runs on the transformers backend, not with --use-vllm",
                                hint="drop --use-vllm, or sample unconstrained (--no-constrained)")
    check_vllm(config)
    return episodic, constrained


BOX_BETA = 0.05  # the KL coefficient continuous actions get by default (a trust region around the start)


def action_space_defaults(config: GRPOStageConfig, codec, episodic: bool, constrained: bool):
    """The defaults that depend on the data (given settings stay): continuous actions are sampled within the codec's
    grammar and trained with a KL to the start (``BOX_BETA``). Measured before (issue #44): unconstrained, an
    unparsable answer took the floor (-400 at horizon 20) while real actions differed by about 7, and without a KL
    one-step env rewards took a HalfCheetah SFT policy from 34.2 to 0.5 normalized. Discrete actions keep their
    defaults (no KL; constrained only for episodes)."""
    box = codec.action_space.get("type") == "box"
    if config.constrained is None and box and not config.use_vllm:  # vLLM samples on its own, unconstrained
        constrained = True
    if config.beta is None:
        config = config.with_trl(beta=BOX_BETA if box else 0.0)
    return config, constrained


def check_credit(config: GRPOStageConfig, episodic: bool) -> None:
    """Refuse credit settings that do not go together (each alone is checked by its declared choices and bounds)."""
    if config.credit != "episode" and not episodic:
        raise InvalidInputError(f"--credit {config.credit} is for episode rollouts (it compares turns of whole "
                                "episodes)",
                                hint="add --rollout episode, or drop --credit")
    if config.credit_key != "observation" and config.credit != "answers":
        raise InvalidInputError(f"--credit-key {config.credit_key} needs --credit answers (the other credits read "
                                "the critic by observation)")


def warn_unrepeated_states(config: GRPOStageConfig, codec) -> None:
    """The per-state credits pool turns by their observation text; over a continuous observation space (or a map
    drawn anew each episode) no two turns share one, and the credit then carries (almost) nothing: said before
    training, not found after it. ``--credit-key local`` pools by the codec's coarser key, so it is not warned."""
    kind = codec.observation_space.get("type")
    per_state = config.rollout == "episode" and config.credit != "episode"
    if not per_state or config.credit_key != "observation" or kind == "discrete":
        return
    keyed = type(codec).credit_key is not Codec.credit_key  # the codec names coarser states the critic can pool
    fix = ("--credit-key local pools the critic over the codec's coarser states" if keyed
           else "--credit episode compares whole episodes instead")
    console.print(f"[yellow]--credit {config.credit} pools turns that answered the same observation; this codec's "
                  f"observations ({kind}) rarely repeat exactly, so each state is seen about once and its credit "
                  f"carries little ({fix})[/]")


def auto_rewards(columns: list[str], episodic: bool) -> list[str]:
    """``--reward auto``: what the data can score. The format alone carries no signal once a model writes answers
    (every completion of a group then scores the same), so the task reward the columns allow comes with it."""
    if episodic:
        return ["return"]
    if "q_values" in columns:
        return ["format", "q-advantage"]
    if "action" in columns:
        return ["format", "bc"]
    return ["format"]


def resolve_group(config: GRPOStageConfig, codec, episodic: bool) -> str:
    """``sampled`` or ``actions`` (:class:`rlft.train.grpo.sampling.ActionSetRollout`): ``auto`` takes actions for step
    rollouts over a small discrete action space whose size divides ``num_generations``."""
    if config.group != "auto":
        return config.group
    space = codec.action_space
    if episodic and config.credit == "answers":
        return "actions"
    if episodic or space.get("type") != "discrete" or int(space["n"]) > MAX_CHOICES:
        return "sampled"
    if config.num_generations % int(space["n"]):
        console.print(f"[yellow]--group auto: sampling completions, as --num-generations {config.num_generations} "
                      f"is not a multiple of the {space['n']} actions (a multiple puts every action in each "
                      "group)[/]")
        return "sampled"
    return "actions"


def warn_forced_kl(config: GRPOStageConfig, group: str) -> None:
    """TRL's KL term is the k3 estimate ``r/p - log(r/p) - 1`` (r, p: reference and policy probabilities of the
    completion), a KL only for completions the policy sampled. Forced answers include the ones the policy has learned
    to reject, where r/p grows without bound, so the term pulls every action back toward the reference: an entropy
    bonus more than a KL. Measured on FrozenLake 8x8 (53 states, tiny model): beta 0.1 logged "kl" near 3,000 and
    ended at 70% of states right after 600 steps (row 3c); beta 0 collapsed onto one action (policy entropy 0.04)
    at 41%."""
    if group == "actions" and config.beta > 0:
        console.print(f"[dim]--beta {config.beta:g} with --group actions: the logged kl is TRL's estimate on forced "
                      "answers, large wherever the policy rejects an answer the reference still allows; it acts as a "
                      "pull toward the reference on every answer, not as a KL[/]")


def reward_names(config: GRPOStageConfig, episodic: bool, columns: list[str]) -> list[str]:
    """The rewards named by ``--rewards`` (episode rewards when ``episodic``; ``auto``: :func:`auto_rewards`), one
    weight each if weights are given."""
    given = [config.rewards] if isinstance(config.rewards, str) else list(config.rewards)
    if [str(g).strip().lower() for g in given] == ["auto"]:
        names = auto_rewards(columns, episodic)
        console.print(f"[dim]--reward auto: {','.join(names)}[/]")
    elif episodic:
        names = parse_episode_reward_names(config.rewards)
    else:
        names = parse_reward_names(config.rewards)
    if config.reward_weights is not None and len(config.reward_weights) != len(names):
        raise InvalidInputError(
            f"--reward-weights has {len(config.reward_weights)} values for {len(names)} rewards ({','.join(names)})"
        )
    return names


def check_sampling(config: GRPOStageConfig) -> None:
    """Refuse a temperature GRPO cannot sample at (group sizes, lengths, scalings: their declared bounds)."""
    if config.temperature <= 0:
        raise InvalidInputError(f"--temperature must be positive, got {config.temperature}")


MAX_COMPLETIONS_PER_STEP = 16_384  # sampled and scored at once (RLFT4RL's GRPO: 64)


def check_generation_batch(config: GRPOStageConfig) -> None:
    """Refuse a batch that does not split into whole groups of ``num_generations`` completions."""
    generation_batch = config.per_device_train_batch_size * config.gradient_accumulation_steps
    if generation_batch > MAX_COMPLETIONS_PER_STEP:  # 100,000 x 100,000 sat at step 0 filling memory (pass 21, F14)
        raise InvalidInputError(f"batch size x accumulation asks for {generation_batch:,} completions per step, more "
                                f"than {MAX_COMPLETIONS_PER_STEP:,}", hint="lower --batch-size or the accumulation")
    if generation_batch % config.num_generations:
        raise InvalidInputError(
            f"batch size x accumulation ({generation_batch}) must be a multiple of --num-generations "
            f"({config.num_generations})",
            hint="each prompt's completions are scored as one group",
        )


def check_start_format(config: GRPOStageConfig, inputs: StageInputs, conversation: bool) -> None:
    """Episodes played as one growing conversation change the prompt format of a model trained on one-step prompts
    (an SFT or step-GRPO RUN whose codec keeps no earlier turns): refused with the reason unless
    ``--allow-format-change``. Untrained models learn whatever format they are given."""
    if not conversation or config.allow_format_change:
        return
    run = Path(inputs.model_path)
    info = read_run_info(run) if run.is_dir() else None
    if not info or info.get("stage") not in ("sft", "grpo") or not (run / CODEC_FILENAME).is_file():
        return
    turns = load_codec(run).template.turns or 1
    if turns <= 1:
        raise InvalidInputError(
            f"--model {config.model} was trained on one-step prompts (the current observation alone), and episode "
            f"rollouts prompt each turn as a conversation of up to {config.max_turns} turns: the model would play "
            "in a format it never saw (row 9b: 24.7 -> -1.3)",
            hint="train the SFT start on conversations (rlft data serialize --turns N, row 9c), or use --credit "
                 "answers (each turn prompted as the model was trained), or pass --allow-format-change")
