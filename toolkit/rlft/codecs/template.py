"""Prompt templates as data: saved inside the codec JSON, loaded back by trainers and evaluation."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from rlft.codecs.choices import PROMPT_STYLES
from rlft.core.textfmt import format_fixed


def format_number(value: float, precision: int) -> str:
    """One number as text, through the same vectorised formatter the serializer uses (one value, one text)."""
    return format_fixed([[value]], precision)[0].as_py()


_SIMPLE_TYPES = {"str": str, "int": int, "bool": bool}


@dataclass
class PromptTemplate:
    """How an encoded observation becomes a prompt and an encoded action becomes a completion.

    ``instruction`` is the user text; ``{observation}`` is replaced by the codec's observation text and the
    optional ``{context}`` by history / return-to-go lines. ``answer_format`` wraps the action text; the same
    string, split at ``{action}``, is the pattern that parses model output, so the two can never disagree.
    """

    style: str = "plain"
    system: str = ""
    instruction: str = "{observation}"
    answer_format: str = "<answer>{action}</answer>"
    allow_think: bool = True  # a <think>...</think> block before the answer is accepted
    # Context before the current observation (numeric datasets): k previous (observation, action) pairs,
    # then optionally the return-to-go. Each piece has its own format so the serializer's vectorised path and
    # the evaluator's per-step path produce the same text (a test compares them).
    history: int = 0
    history_format: str = "<observation>{observation}</observation><action>{action}</action>\n"
    return_to_go: bool = False
    rtg_format: str = "<return_to_go>{rtg}</return_to_go>\n"
    rtg_precision: int = 1
    # Multi-turn conversations (episodic GRPO): 0 = one observation per prompt; K > 0 = the prompt is the episode
    # so far as turns (user: observation, assistant: the model's answer), the last K turns kept (current included).
    turns: int = 0
    # The answer's opening tag ends the prompt (RLFT4RL's "### Controller: <action>"), so a completion is the
    # action text and the closing tag only. Plain prompts, single turns.
    prefill: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for f in fields(self):  # a damaged codec file ("history": "three") is refused here, not deep in a prompt
            value, kind = getattr(self, f.name), _SIMPLE_TYPES.get(str(f.type))
            if kind is not None and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
                raise ValueError(f"template {f.name} must be {str(f.type)}, got {value!r}")
        if self.style not in PROMPT_STYLES:
            raise ValueError(f"prompt style must be one of {PROMPT_STYLES}, got {self.style!r}")
        if self.answer_format.count("{action}") != 1:
            raise ValueError("answer_format must contain {action} exactly once")
        if self.turns < 0:
            raise ValueError(f"turns must be >= 0, got {self.turns}")
        if self.prefill and (self.style != "plain" or self.turns):
            raise ValueError("a prefilled answer tag needs a plain, single-turn prompt")

    # -- building -------------------------------------------------------------------------------------
    @property
    def answer_prefix(self) -> str:
        return self.answer_format.split("{action}")[0]

    @property
    def answer_suffix(self) -> str:
        return self.answer_format.split("{action}")[1]

    @property
    def prompt_suffix(self) -> str:
        """What ends every prompt: the answer's opening tag when it is prefilled, else nothing."""
        return self.answer_prefix if self.prefill else ""

    @property
    def completion_format(self) -> str:
        """The completion around ``{action}``: the answer format without a prefilled opening tag."""
        return self.answer_format[len(self.prompt_suffix):]

    def context(self, history: list[tuple[str, str]] = (), rtg: float | None = None) -> str:
        """The ``{context}`` text: up to ``self.history`` past (observation, action) texts, oldest first, then
        the return-to-go when the template conditions on it."""
        parts = [
            self.history_format.replace("{observation}", o).replace("{action}", a)
            for o, a in list(history)[-self.history :]
        ] if self.history else []
        if self.return_to_go:
            if rtg is None:
                raise ValueError("this template conditions on return-to-go: pass rtg")
            parts.append(self.rtg_format.replace("{rtg}", format_number(rtg, self.rtg_precision)))
        return "".join(parts)

    def user_text(self, observation: str, context: str = "") -> str:
        return self.instruction.replace("{context}", context).replace("{observation}", observation)

    def build_prompt(self, observation: str, context: str = "") -> str | list[dict[str, str]]:
        """The prompt for one observation: a string (plain) or a list of chat messages (chat)."""
        user = self.user_text(observation, context)
        if self.style == "plain":
            return (f"{self.system}\n\n{user}" if self.system else user) + self.prompt_suffix
        messages = [{"role": "system", "content": self.system}] if self.system else []
        return messages + [{"role": "user", "content": user}]

    def build_conversation(self, past: list[tuple[str, str]], observation: str,
                           context: str = "") -> str | list[dict[str, str]]:
        """The prompt of one turn of an episode: the last ``turns - 1`` (user text, answer text) pairs of ``past``
        as earlier turns, then the current observation. Chat: alternating user / assistant messages. Plain: the
        turns one after another, each answer followed by a newline."""
        keep = list(past)[-(self.turns - 1):] if self.turns > 1 else []
        user = self.user_text(observation, context)
        if self.style == "plain":
            text = "".join(f"{u}{a}\n" for u, a in keep) + user
            return f"{self.system}\n\n{text}" if self.system else text
        messages = [{"role": "system", "content": self.system}] if self.system else []
        for u, a in keep:
            messages += [{"role": "user", "content": u}, {"role": "assistant", "content": a}]
        return messages + [{"role": "user", "content": user}]

    def answer_text(self, action_text: str) -> str:
        return f"{self.answer_prefix}{action_text}{self.answer_suffix}"

    def build_completion(self, action_text: str) -> str | list[dict[str, str]]:
        """The completion for one action: a string (plain) or one assistant message (chat)."""
        text = self.completion_format.replace("{action}", action_text)
        return text if self.style == "plain" else [{"role": "assistant", "content": text}]

    # -- parsing --------------------------------------------------------------------------------------
    @property
    def answer_regex(self) -> re.Pattern[str]:
        pattern = re.escape(self.answer_prefix) + r"(.*?)" + re.escape(self.answer_suffix)
        return re.compile(pattern, re.DOTALL)

    def extract_answer(self, text: str | list[dict[str, str]]) -> str | None:
        """The action text of the last answer block in ``text``, or None if there is none."""
        if isinstance(text, list):  # a chat completion: take the last message's content
            text = text[-1]["content"] if text else ""
        if not self.answer_suffix:  # open-ended answers: everything after the prefix
            idx = text.rfind(self.answer_prefix) if self.answer_prefix else 0
            return text[idx + len(self.answer_prefix) :].strip() if idx >= 0 else None
        matches = self.answer_regex.findall(text)
        return matches[-1].strip() if matches else None

    # -- persistence ----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PromptTemplate:
        return cls(**data)
