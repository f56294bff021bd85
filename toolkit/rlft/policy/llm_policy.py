"""An LLM as a policy: prompts built ONLY by the dataset's codec, one batched generate call per step.

Per slot the policy keeps the history of (observation text, action text) pairs and the return-to-go
(``target_return`` minus the rewards collected so far) when the codec's template conditions on them, so the
prompt at evaluation is the prompt the model was trained on. A template with ``turns`` (a model trained by
episodic GRPO) makes each prompt the episode so far as a conversation, the model's own earlier answers
verbatim, exactly as :mod:`rlft.train.grpo.episodes` built them in training. Unparsable output never raises: the
slot takes the fallback action and the miss is counted (the invalid-action rate).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlft.codecs.base import ActionParseError, Codec
from rlft.core.errors import InvalidInputError
from rlft.datasets.dataset import RlftDataset
from rlft.datasets.folder import read_parquet_schema
from rlft.datasets.layout import DATA_DIR
from rlft.datasets.loading import column_array
from rlft.envs.observations import unbatch
from rlft.policy.generation import GenerationBackend, Prompt
from rlft.policy.policies import Policy, stack_actions

MAX_INVALID_EXAMPLES = 5


class FewShot:
    """M real (observation, expert action) pairs of the dataset, written through the codec."""

    def __init__(self, codec: Codec, observations, actions, rtgs=None):
        self.codec = codec
        self.pairs: list[tuple[str, str]] = []
        template = codec.template
        for i, (obs, act) in enumerate(zip(observations, actions, strict=True)):
            rtg = float(rtgs[i]) if rtgs is not None else None
            context = template.context([], rtg) if template.return_to_go else ""
            user = template.user_text(codec.encode_observation(obs), context)
            self.pairs.append((user, template.answer_text(codec.encode_action(act))))

    def __len__(self) -> int:
        return len(self.pairs)

    def apply(self, prompt: Prompt) -> Prompt:
        """Chat: example turns before the last user message. Plain: prompt+completion pairs before the user
        text (after the system text)."""
        if not self.pairs:
            return prompt
        if isinstance(prompt, list):
            turns = []
            for user, answer in self.pairs:
                turns += [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
            return prompt[:-1] + turns + prompt[-1:]
        examples = "".join(f"{user}{answer}\n\n" for user, answer in self.pairs)
        system = self.codec.template.system
        if system and prompt.startswith(system + "\n\n"):
            head = system + "\n\n"
            return head + examples + prompt[len(head):]
        return examples + prompt


def load_few_shot(codec: Codec, data: RlftDataset, n: int, seed: int) -> FewShot:
    """``n`` rows of the dataset's train split, drawn with ``seed`` (expert/dataset actions)."""

    root, dataset = data.path, data.given

    shards = sorted((root / DATA_DIR).glob("train-*.parquet"))
    if not shards:
        raise InvalidInputError(f"{dataset} has no train split for few-shot examples")
    names = read_parquet_schema(shards[0]).names
    obs_col = "observation" if "observation" in names else "state"
    cols = [obs_col, "action"] + (["return_to_go"] if "return_to_go" in names else [])
    table = data.table(cols)
    if table.num_rows == 0:
        raise InvalidInputError(f"{dataset} has no rows for few-shot examples")
    rng = np.random.default_rng(seed)
    idx = np.sort(rng.choice(table.num_rows, size=min(n, table.num_rows), replace=False))
    sub = table.take(idx)
    rtg = column_array(sub, "return_to_go") if "return_to_go" in cols else None
    if codec.template.return_to_go and rtg is None:
        raise InvalidInputError(f"{dataset} has no return_to_go column for the few-shot examples")
    return FewShot(codec, column_array(sub, obs_col), column_array(sub, "action"), rtg)


class LLMPolicy(Policy):
    kind = "llm"

    def __init__(self, codec: Codec, backend: GenerationBackend, fallback_action, action_space,
                 target_return: float | None = None, few_shot: FewShot | None = None, model: str = "",
                 constrained: bool = False):
        super().__init__()
        self.codec = codec
        self.template = codec.template
        self.backend = backend
        self.fallback = fallback_action
        self.space = action_space
        self.few_shot = few_shot
        self.model_name = model
        self.constrained = constrained
        if self.template.return_to_go and target_return is None:
            raise InvalidInputError(
                "the codec's prompts condition on return-to-go: pass --target-return R",
                hint="the return the policy should aim for, e.g. the dataset's best episode return",
            )
        self.target_return = target_return
        self.use_context = bool(self.template.history) or self.template.return_to_go
        self.history: dict[int, list[tuple[str, str]]] = {}
        self.rtg: dict[int, float] = {}
        self.turns: dict[int, list[tuple[str, str]]] = {}  # per slot: (user text, the model's answer text)
        self._obs_text: dict[int, str] = {}
        self._user_text: dict[int, str] = {}
        self.invalid_examples: list[dict[str, str]] = []
        self.invalid_reasons: dict[str, int] = {}

    def begin_episode(self, slot, episode, seed, obs):
        self.history[slot] = []
        self.turns[slot] = []
        self.rtg[slot] = float(self.target_return) if self.target_return is not None else 0.0

    def prompt(self, obs, slot: int) -> Prompt:
        """The prompt for ``slot`` at ``obs``: the codec's prompt with history / return-to-go context."""
        obs_text = self.codec.encode_observation(obs)
        self._obs_text[slot] = obs_text
        context = ""
        if self.use_context:
            context = self.template.context(self.history[slot], self.rtg[slot] if self.template.return_to_go
                                            else None)
        if self.template.turns:
            self._user_text[slot] = self.template.user_text(obs_text, context)
            prompt = self.template.build_conversation(self.turns[slot], obs_text, context)
        else:
            prompt = self.template.build_prompt(obs_text, context)
        return self.few_shot.apply(prompt) if self.few_shot is not None else prompt

    def act(self, obs, slots):
        prompts = [self.prompt(o, s) for o, s in zip(unbatch(obs, len(slots)), slots, strict=True)]
        texts = self.backend.generate(prompts)
        if self.template.turns:
            for slot, text in zip(slots, texts, strict=True):
                self.turns[slot].append((self._user_text[slot], text))
                del self.turns[slot][: -self.template.turns]
        actions = []
        for text in texts:
            self.decisions += 1
            try:
                actions.append(self.codec.decode_action(text))
            except ActionParseError as exc:
                self.invalid += 1
                key = exc.reason if len(exc.reason) < 60 else exc.reason[:57] + "..."
                self.invalid_reasons[key] = self.invalid_reasons.get(key, 0) + 1
                if len(self.invalid_examples) < MAX_INVALID_EXAMPLES:
                    self.invalid_examples.append({"output": text[:200], "reason": exc.reason})
                actions.append(self.fallback)
        return stack_actions(actions, self.space)

    def record(self, slots, actions, rewards):
        if not self.use_context:
            return
        for slot, action, reward in zip(slots, actions, rewards, strict=True):
            if self.template.history:
                self.history[slot].append((self._obs_text[slot], self.codec.encode_action(action)))
                del self.history[slot][: -self.template.history]
            self.rtg[slot] -= float(reward)

    def describe(self) -> dict[str, Any]:
        info = {"kind": self.kind, "model": self.model_name, "codec": self.codec.describe(),
                "prompt_style": self.template.style, "history": self.template.history,
                "return_to_go": self.template.return_to_go, "target_return": self.target_return,
                "few_shot_examples": len(self.few_shot) if self.few_shot is not None else 0,
                "constrained": self.constrained}
        fallback = self.fallback.tolist() if isinstance(self.fallback, np.ndarray) else self.fallback
        info["fallback_action"] = fallback
        info.update(self.backend.describe())
        return info

    def stats(self) -> dict[str, Any]:
        return {"generate_calls": self.backend.calls, "prompts": self.backend.requests,
                "cache_hits": self.backend.cache_hits,
                "new_tokens": self.backend.new_tokens, "invalid_examples": self.invalid_examples,
                "invalid_reasons": self.invalid_reasons}

    def close(self):
        self.backend.close()
