"""Text generation backends for LLM policies: one batched call per environment step.

* :class:`TransformersBackend`: a local causal LM; all prompts of a step go through ONE ``model.generate``
  call (left padding, KV cache), optionally with the codec's grammar as a logits processor.
* :class:`OpenAIBackend`: any OpenAI-compatible server (vLLM, llama.cpp, ...): chat prompts to
  ``/v1/chat/completions`` (one request per prompt), plain prompts to ``/v1/completions`` (several prompts per
  request), requests in parallel up to a concurrency limit. Standard library only.

A prompt is what the codec builds: a string (plain style) or a list of chat messages (chat style).
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.error
import urllib.request
from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rlft.core.errors import InvalidInputError, OfflineError

Prompt = str | list[dict[str, str]]


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

    def _generate(self, prompts: list[Prompt]) -> list[str]:
        torch = self.torch
        batch = self.encode(prompts).to(self.device)
        prompt_len = batch["input_ids"].shape[1]
        limit = getattr(self.model.config, "max_position_embeddings", None)
        if limit and prompt_len + self.max_new_tokens > limit:
            raise InvalidInputError(
                f"a prompt of {prompt_len} tokens plus {self.max_new_tokens} new tokens exceeds the model's "
                f"{limit} positions",
                hint="use a model with a longer context, fewer --n-examples, or a lower --max-new-tokens",
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
        with torch.inference_mode():
            out = self.model.generate(**batch, **kwargs)
        new = out[:, prompt_len:]
        self.calls += 1
        self.requests += len(prompts)
        self.new_tokens += int((new != self.tokenizer.pad_token_id).sum())
        return self.tokenizer.batch_decode(new, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    def describe(self) -> dict[str, Any]:
        info = {"backend": self.name, "max_new_tokens": self.max_new_tokens, "temperature": self.temperature,
                "decoding": "sampling" if self.temperature > 0 else "greedy"}
        if self.temperature > 0:
            info["top_p"] = self.top_p
        return info


def api_base(url: str) -> str:
    """``http://host:port`` or ``.../v1`` -> the ``.../v1`` base every endpoint hangs off."""
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise InvalidInputError(f"--api-url must start with http:// or https://, got {url!r}")
    return url if url.endswith("/v1") else url + "/v1"


class OpenAIBackend(GenerationBackend):
    """An OpenAI-compatible server over HTTP (urllib), requests in a thread pool."""

    name = "openai"

    def __init__(self, api_url: str, model: str, max_new_tokens: int, temperature: float = 0.0,
                 top_p: float = 1.0, concurrency: int = 8, prompts_per_request: int = 16, timeout: float = 120.0,
                 api_key: str | None = None, stop: list[str] | None = None, answer_prefix: str = "",
                 answer_suffix: str = "", seed: int | None = None, cache: bool = True):
        super().__init__(cache)
        if not model:
            raise InvalidInputError("--backend openai needs --api-model NAME (the model name the server serves)")
        if concurrency < 1 or prompts_per_request < 1:
            raise InvalidInputError("--concurrency and prompts per request must be at least 1")
        self.base = api_base(api_url)
        self.model = model
        self.max_new_tokens = int(max_new_tokens)
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.concurrency = int(concurrency)
        self.prompts_per_request = int(prompts_per_request)
        self.timeout = float(timeout)
        self.api_key = api_key
        self.stop = list(stop or [])
        self.answer_prefix, self.answer_suffix = answer_prefix, answer_suffix
        self.seed = seed
        self._pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="rlft-openai")

    # -- HTTP ---------------------------------------------------------------------------------------------
    def _post(self, endpoint: str, payload: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.base}/{endpoint}"
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(url, data=json.dumps(payload).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:300].decode("utf-8", "replace").strip().replace("\n", " ")
            raise InvalidInputError(f"the server at {url} answered HTTP {exc.code}: {detail or exc.reason}",
                                    hint="check --api-model and the server's log") from exc
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, ConnectionRefusedError):
                what = "connection refused"
            elif isinstance(reason, socket.timeout | TimeoutError):
                what = f"no answer within {self.timeout:g} s"
            else:
                what = str(reason)
            raise OfflineError(f"cannot reach the OpenAI-compatible server at {self.base} ({what})",
                               hint="start the server (e.g. `vllm serve MODEL`) or fix --api-url") from exc
        except TimeoutError as exc:
            raise OfflineError(f"the server at {self.base} sent no answer within {self.timeout:g} s") from exc
        except (http.client.HTTPException, ConnectionError, OSError) as exc:
            raise OfflineError(f"the connection to {self.base} failed: {type(exc).__name__}: {exc}") from exc
        try:
            data = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            snippet = body[:120].decode("utf-8", "replace")
            raise InvalidInputError(f"malformed reply from {url}: not JSON ({snippet!r})") from exc
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
            raise InvalidInputError(f"malformed reply from {url}: no 'choices' list "
                                    f"({json.dumps(data)[:160]})")
        return data

    def _params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model, "max_tokens": self.max_new_tokens,
                                  "temperature": self.temperature}
        if self.temperature > 0 and self.top_p < 1:
            params["top_p"] = self.top_p
        if self.stop:
            params["stop"] = self.stop
        if self.seed is not None:
            params["seed"] = self.seed
        return params

    def _finish(self, text: str, finish_reason: str | None) -> str:
        # a stop string is not returned by the server: close an answer block the stop string cut open
        suffix = self.answer_suffix
        if finish_reason == "stop" and suffix and suffix in self.stop and self.answer_prefix in text:
            tail = text[text.rfind(self.answer_prefix) + len(self.answer_prefix):]
            if suffix not in tail:
                return text + suffix
        return text

    def _chat(self, messages: list[dict[str, str]]) -> str:
        data = self._post("chat/completions", {**self._params(), "messages": messages})
        try:
            choice = data["choices"][0]
            content = choice["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise InvalidInputError(f"malformed reply from {self.base}/chat/completions: no choices[0].message."
                                    f"content ({json.dumps(data)[:160]})") from exc
        return self._finish(content or "", choice.get("finish_reason"))

    def _completions(self, prompts: list[str]) -> list[str]:
        data = self._post("completions", {**self._params(), "prompt": prompts})
        choices = data["choices"]
        try:
            ordered = sorted(choices, key=lambda c: c.get("index", 0))
            texts = [self._finish(c["text"] or "", c.get("finish_reason")) for c in ordered]
        except (KeyError, TypeError, AttributeError) as exc:
            raise InvalidInputError(f"malformed reply from {self.base}/completions: choices without text "
                                    f"({json.dumps(data)[:160]})") from exc
        if len(texts) != len(prompts):
            raise InvalidInputError(f"malformed reply from {self.base}/completions: {len(texts)} choices for "
                                    f"{len(prompts)} prompts")
        return texts

    def _generate(self, prompts: list[Prompt]) -> list[str]:
        chat = [not isinstance(p, str) for p in prompts]
        if any(chat) and not all(chat):
            raise InvalidInputError("a batch mixes chat and plain prompts")
        if chat[0]:
            results = list(self._pool.map(self._chat, prompts))
        else:
            size = self.prompts_per_request
            groups = [prompts[i : i + size] for i in range(0, len(prompts), size)]
            results = [t for group in self._pool.map(self._completions, groups) for t in group]
        self.calls += 1
        self.requests += len(prompts)
        return results

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "api_url": self.base, "api_model": self.model,
                "max_new_tokens": self.max_new_tokens, "temperature": self.temperature,
                "concurrency": self.concurrency, "decoding": "sampling" if self.temperature > 0 else "greedy"}

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
