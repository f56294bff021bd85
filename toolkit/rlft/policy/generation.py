"""Text generation backends for LLM policies: one batched call per environment step.

* :class:`TransformersBackend`: a local causal LM; all prompts of a step go through ONE ``model.generate``
  call (left padding, KV cache), optionally with the codec's grammar as a logits processor.
* ``OpenAIBackend`` (:mod:`rlft.policy.openai_backend`): any OpenAI-compatible server (vLLM, llama.cpp,
  ``transformers serve``) through the ``openai`` client.

A prompt is what the codec builds: a string (plain style) or a list of chat messages (chat style).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from contextlib import contextmanager
from typing import Any

from rlft.core.errors import InvalidInputError

Prompt = str | list[dict[str, str]]


@contextmanager
def generating(model, tokenizer):
    """The model in eval mode while it generates in the middle of training, then its training mode and the
    tokenizer's padding side as they were: a backend pads left, while the trainer's collator keeps its own side."""
    side, was_training = tokenizer.padding_side, model.training
    model.eval()
    try:
        yield
    finally:
        tokenizer.padding_side = side
        if was_training:
            model.train()


def default_max_new_tokens(codec, table=None) -> int:
    """New tokens enough for the codec's longest valid answer: the constrained token table's longest path, else
    the answer grammar's longest text in characters plus slack (a token holds at least one), else 64."""
    if table is not None:
        return int(table.max_new_tokens)
    from rlft.policy.grammar import answer_grammar

    try:
        return answer_grammar(codec).max_chars() + 8
    except InvalidInputError:
        return 64


class GenerationBackend(ABC):
    """Turns a batch of prompts into a batch of completion texts.

    With greedy decoding (temperature 0) a completion is a function of its prompt, so each distinct prompt is
    generated once and remembered: FrozenLake has 11 decision states, so 100 episodes need 11 generations, not
    4,000 (``cache_hits`` counts the prompts answered from memory). A backend lives for one evaluation or one
    check of a model: new weights get a new backend, so the memory never outlives the weights it came from.
    """

    name: str = "backend"

    def __init__(self, cache: bool = True) -> None:
        self.calls = 0  # batched generate calls (one per environment step with a miss)
        self.requests = 0  # prompts sent
        self.new_tokens = 0
        self.cache_hits = 0
        self._cache: dict[str, str] | None = {} if cache else None

    def stop_caching(self) -> None:
        """Generate every prompt anew from here on: for a caller that reads what each call computed (the bin
        distributions of :class:`~rlft.policy.bins.BinBackend`), which a prompt answered from memory lacks."""
        self._cache = None

    @property
    def greedy(self) -> bool:
        return getattr(self, "temperature", 0.0) <= 0.0

    def generate(self, prompts: list[Prompt]) -> list[str]:
        """One completion text per prompt, in order (greedy: every distinct prompt generated once)."""
        if self._cache is None or not self.greedy:
            return self._generate(prompts) if prompts else []
        keys = [p if isinstance(p, str) else json.dumps(p, sort_keys=True) for p in prompts]
        missing: dict[str, Prompt] = {}
        for key, prompt in zip(keys, prompts, strict=True):
            if key not in self._cache and key not in missing:
                missing[key] = prompt
        if missing:
            texts = self._generate(list(missing.values()))
            self._cache.update(zip(missing, texts, strict=True))
        self.cache_hits += len(prompts) - len(missing)
        return [self._cache[key] for key in keys]

    @abstractmethod
    def _generate(self, prompts: list[Prompt]) -> list[str]:
        """One completion text per (non-empty list of) prompts, in order."""

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name}

    def close(self) -> None:
        """Release connections and threads."""
        return None


class TransformersBackend(GenerationBackend):
    """Batched generation with a local ``transformers`` model (greedy unless ``temperature > 0``)."""

    name = "transformers"

    def __init__(self, model, tokenizer, max_new_tokens: int, temperature: float = 0.0, top_p: float = 1.0,
                 token_table=None, cache: bool = True):
        super().__init__(cache)
        import torch

        self.torch = torch
        self.model = model
        self.tokenizer = tokenizer
        self.max_new_tokens = int(max_new_tokens)
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.token_table = token_table
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        tokenizer.padding_side = "left"
        from rlft.policy.constrained import eos_ids

        self.eos = eos_ids(tokenizer, model)
        self.device = next(model.parameters()).device

    def prompt_text(self, prompt: Prompt) -> str:
        """The exact text the model sees: the chat template for messages (with the generation prompt)."""
        if isinstance(prompt, str):
            return prompt
        if not getattr(self.tokenizer, "chat_template", None):
            raise InvalidInputError(
                "the codec's prompts are chat messages but the tokenizer has no chat template",
                hint="use a model with a chat template, or a dataset with --prompt-style plain",
            )
        return self.tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)

    def encode(self, prompts: list[Prompt]):
        """Left-padded token batch; chat text already holds its special tokens, plain text gets them added."""
        chat = [not isinstance(p, str) for p in prompts]
        texts = [self.prompt_text(p) for p in prompts]
        if all(chat) or not any(chat):
            return self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=not chat[0])
        raise InvalidInputError("a batch mixes chat and plain prompts")

    def _run(self, prompts: list[Prompt], scores: bool = False):
        """One ``generate`` call: (output, prompt length in tokens)."""
        torch = self.torch
        batch = self.encode(prompts).to(self.device)
        prompt_len = batch["input_ids"].shape[1]
        limit = getattr(self.model.config, "max_position_embeddings", None)
        if limit and prompt_len + self.max_new_tokens > limit:
            raise InvalidInputError(
                f"a prompt of {prompt_len} tokens plus {self.max_new_tokens} new tokens exceeds the model's "
                f"{limit} positions",
                hint="use a model with a longer context, fewer --n-examples or turns, or a lower --max-new-tokens",
            )
        kwargs: dict[str, Any] = dict(
            max_new_tokens=self.max_new_tokens,
            pad_token_id=self.tokenizer.pad_token_id,
            eos_token_id=self.eos,
            use_cache=True,
        )
        if self.temperature > 0:
            kwargs.update(do_sample=True, temperature=self.temperature, top_p=self.top_p, top_k=0)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        if self.token_table is not None:
            from transformers import LogitsProcessorList

            from rlft.policy.constrained import GrammarLogitsProcessor

            kwargs["logits_processor"] = LogitsProcessorList(
                [GrammarLogitsProcessor(self.token_table, len(prompts), prompt_len)]
            )
        if scores:
            kwargs.update(output_scores=True, return_dict_in_generate=True)
        with torch.inference_mode():
            # input ids and mask only: a tokenizer may add token_type_ids, which causal LMs do not take
            out = self.model.generate(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], **kwargs)
        self.calls += 1
        self.requests += len(prompts)
        return out, prompt_len

    def _generate(self, prompts: list[Prompt]) -> list[str]:
        out, prompt_len = self._run(prompts)
        new = out[:, prompt_len:]
        self.new_tokens += int((new != self.tokenizer.pad_token_id).sum())
        return self.tokenizer.batch_decode(new, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    def sample_ids(self, prompts: list[Prompt]) -> tuple[list[list[int]], list[str], list[list[float]]]:
        """For training rollouts: per prompt the generated token ids up to and including the first EOS (no
        padding), their text (as :meth:`generate` returns it) and each token's log-probability under the
        distribution it was sampled from (temperature, top-p and the grammar applied)."""
        out, prompt_len = self._run(prompts, scores=True)
        new = out.sequences[:, prompt_len:]
        logps = self.torch.stack(out.scores, dim=1).float().log_softmax(-1)  # (batch, steps, vocab)
        eos = set(self.eos)
        ids, logprobs = [], []
        for row, lp in zip(new.tolist(), logps, strict=True):
            end = next((i + 1 for i, t in enumerate(row) if t in eos), len(row))
            ids.append(row[:end])
            logprobs.append([float(lp[i, t]) for i, t in enumerate(row[:end])])
        self.new_tokens += sum(len(r) for r in ids)
        texts = self.tokenizer.batch_decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        return ids, texts, logprobs

    def prompt_ids(self, prompt: Prompt) -> list[int]:
        """The token ids the model is given for one prompt (what :meth:`encode` pads into a batch)."""
        chat = not isinstance(prompt, str)
        return self.tokenizer(self.prompt_text(prompt), add_special_tokens=not chat)["input_ids"]

    def describe(self) -> dict[str, Any]:
        info = {"backend": self.name, "max_new_tokens": self.max_new_tokens, "temperature": self.temperature,
                "decoding": "sampling" if self.temperature > 0 else "greedy"}
        if self.temperature > 0:
            info["top_p"] = self.top_p
        return info
