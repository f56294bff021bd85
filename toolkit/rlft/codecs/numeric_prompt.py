"""The prompt of the numeric datasets: ``<observation>..</observation>`` in, ``<action>..</action>`` out, plain or chat
(a system prompt describing the environment, both spaces, the encoding and the answer format), or a named
profile's prompt (RLFT4RL's)."""

from __future__ import annotations

from typing import Any

from rlft.codecs.choices import PROMPT_STYLES
from rlft.codecs.numeric import space_dims
from rlft.codecs.template import PromptTemplate
from rlft.core.errors import InvalidInputError
from rlft.envs.spaces import describe_space

PROFILES = ("rlft4rl",)


def numeric_template(
    style: str,
    observation_space: dict[str, Any],
    action_space: dict[str, Any],
    codec_description: str,
    env_id: str | None,
    history: int,
    return_to_go: bool,
    system: str | None = None,
    separator: str = " ",
    profile: str | None = None,
    turns: int = 0,
) -> PromptTemplate:
    """The prompt of numeric datasets: ``<observation>..</observation>`` in, ``<action>..</action>`` out.

    ``plain`` has no system text unless ``system`` is given; ``chat`` gets a system prompt describing the
    environment, both spaces, the encoding and the answer format. ``profile="rlft4rl"`` is RLFT4RL's prompt
    (``### Instructions: SYSTEM\n ### User: <observation>..</observation>\n ### Controller: <action>``, the
    answer's opening tag prefilled, so completions are ``v1,v2</action>``).
    """
    if style not in PROMPT_STYLES:
        raise InvalidInputError(f"prompt style must be one of {PROMPT_STYLES}, got {style!r}")
    if int(history) < 0:
        raise InvalidInputError(f"history must be >= 0, got {history}")
    if profile is not None and profile not in PROFILES:
        raise InvalidInputError(f"unknown profile {profile!r}", hint=f"known profiles: {', '.join(PROFILES)}")
    if system is None and (style == "chat" or profile):
        system = _chat_system(observation_space, action_space, codec_description, env_id, history, return_to_go,
                              separator)
    if profile == "rlft4rl":
        return PromptTemplate(
            style="plain", system="", answer_format="<action>{action}</action>", allow_think=False, prefill=True,
            instruction=f"### Instructions: {system}\n ### User: {{context}}<observation>{{observation}}"
                        f"</observation>\n ### Controller: ",
            history=int(history), return_to_go=bool(return_to_go), turns=int(turns), extra={"profile": profile},
        )
    return PromptTemplate(
        style=style,
        system=system or "",
        instruction="{context}<observation>{observation}</observation>\n",
        answer_format="<action>{action}</action>",
        allow_think=False,
        history=int(history),
        return_to_go=bool(return_to_go),
        turns=int(turns),
    )


def _chat_system(obs_space, act_space, description, env_id, history, return_to_go, separator: str = " ") -> str:
    dims = space_dims(act_space)
    example = "k" if act_space["type"] == "discrete" else separator.join(f"v{i + 1}" for i in range(min(dims, 3)))
    example += f"{separator}...{separator}v{dims}" if dims > 4 else "".join(
        f"{separator}v{i + 1}" for i in range(3, dims))
    lines = [
        f"You control the {env_id} environment." if env_id else "You control a reinforcement-learning agent.",
        f"Observation space: {describe_space(obs_space)}. Action space: {describe_space(act_space)}.",
        description + (" Values are separated by single spaces." if separator == " " else
                       f" Values are separated by {separator!r}."),
    ]
    if history:
        lines.append(f"Before the current observation you see up to {history} previous observations and actions.")
    if return_to_go:
        lines.append("<return_to_go> is the total reward still to collect in the episode; act to achieve it.")
    lines.append(f"Answer with the action only, in the form <action>{example}</action>.")
    return "\n".join(lines)
