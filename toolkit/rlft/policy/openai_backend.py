"""Generation through any OpenAI-compatible server (vLLM, llama.cpp, ``transformers serve``) with the ``openai``
client: its connection handling, timeouts, retries (``max_retries``) and typed errors, turned into rlft's
one-line errors. Chat prompts go to ``chat/completions`` (one request per prompt), plain prompts to
``completions`` (several prompts per request); requests run in parallel up to ``concurrency``, in daemon
threads: Ctrl-C returns at once even while a request waits on a server that never answers (a thread pool's
workers are joined at exit, which took 90 s).
Connecting may take ``CONNECT_TIMEOUT_S``, an answer ``timeout`` seconds (``--api-timeout``); the client retries
``max_retries`` times, then the error names the server and the timeout.

The answer's closing tag is sent as a stop string (servers then stop as soon as an answer is complete) and put
back on the text, since servers do not return the stop string itself. A server that refuses a list of prompts
(``transformers serve``: "prompt must be a string") is then sent one prompt per request.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

from rlft.core.errors import InvalidInputError, OfflineError, RemoteError
from rlft.core.net import DeadlineError, check_http_url, within_deadline
from rlft.policy.generation import GenerationBackend, Prompt

CONNECT_TIMEOUT_S = 5.0
# A reply's bytes (decoded) are read up to a cap: a server answering with 50 MB held one episode for minutes and
# ~900 MB. A token is at most a few dozen bytes of JSON (escaped), so the cap is 4 MiB or 64 bytes a token asked
# for, whichever is more: far above any honest reply, far below what hurts.
MIN_REPLY_BYTES = 4 << 20
BYTES_PER_TOKEN = 64


def reply_cap(max_new_tokens: int, prompts_per_request: int) -> int:
    """The most bytes one reply (``prompts_per_request`` answers of ``max_new_tokens``) may take."""
    return max(MIN_REPLY_BYTES, BYTES_PER_TOKEN * max(1, max_new_tokens) * max(1, prompts_per_request))


def _capped_client(cap: int):
    """The ``openai`` client's HTTP client, reading at most ``cap`` bytes of a reply.

    The body is read here, in ``send``, chunk by chunk (decompressed: a small gzip body can stand for gigabytes),
    and given up past ``cap``; the error is an ``openai.OpenAIError``, which the client raises as it is, with no
    retry (the same server would send the same reply)."""
    import openai

    class ReplyTooLargeError(openai.OpenAIError):
        pass

    class CappedClient(openai.DefaultHttpxClient):
        too_large = ReplyTooLargeError

        def send(self, request, *, stream: bool = False, **kwargs):
            response = super().send(request, stream=True, **kwargs)
            if stream:
                return response
            try:
                declared = int(response.headers.get("content-length") or 0)
            except ValueError:
                declared = 0
            chunks, total = [], declared
            try:
                if declared <= cap:
                    total = 0
                    for chunk in response.iter_bytes():
                        total += len(chunk)
                        if total > cap:
                            break
                        chunks.append(chunk)
            finally:
                response.close()
            if total > cap:
                raise ReplyTooLargeError(f"{'declared' if declared > cap else 'more than'} {total:,} bytes")
            response._content = b"".join(chunks)  # what Response.read() stores: the body, read once
            return response

    return CappedClient


def daemon_map(fn: Callable[[Any], Any], items: Sequence[Any], workers: int) -> list[Any]:
    """``[fn(x) for x in items]`` on up to ``workers`` daemon threads, in order; the first exception is raised.
    The caller waits in short slices, so KeyboardInterrupt lands within a fraction of a second, and the threads
    left blocked on a socket never hold the interpreter's exit."""
    jobs: queue.Queue = queue.Queue()
    for job in enumerate(items):
        jobs.put(job)
    done: queue.Queue = queue.Queue()
    for _ in range(max(1, min(workers, len(items)))):
        threading.Thread(target=_work, args=(fn, jobs, done), daemon=True, name="rlft-openai").start()
    results: list[Any] = [None] * len(items)
    for _ in range(len(items)):
        i, ok, value = _next(done)
        if not ok:
            _drain(jobs)  # the other threads stop taking jobs
            raise value
        results[i] = value
    return results


def _work(fn, jobs: queue.Queue, done: queue.Queue) -> None:
    while True:
        try:
            i, item = jobs.get_nowait()
        except queue.Empty:
            return
        try:
            done.put((i, True, fn(item)))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, which raises it
            done.put((i, False, exc))
            return


def _next(done: queue.Queue):
    while True:
        try:
            return done.get(timeout=0.2)
        except queue.Empty:
            continue


def _drain(jobs: queue.Queue) -> None:
    while True:
        try:
            jobs.get_nowait()
        except queue.Empty:
            return


def api_base(url: str) -> str:
    """``http://host:port`` or ``.../v1`` -> the ``.../v1`` base every endpoint hangs off."""
    example = "http://127.0.0.1:8000/v1 or http://[::1]:8000/v1"
    url = check_http_url(url.strip().rstrip("/"), "--api-url", example)
    parts = urlsplit(url)
    if parts.query or parts.fragment:  # "/v1" went after them, and the report kept them (hostile pass 19, U3)
        raise InvalidInputError("--api-url is the server's base URL: it takes no ?query or #fragment",
                                hint=f"e.g. {example}; a key goes in --api-key or OPENAI_API_KEY")
    return url if url.endswith("/v1") else url + "/v1"


class OpenAIBackend(GenerationBackend):
    """An OpenAI-compatible server, requests through the ``openai`` client in a thread pool."""

    name = "openai"

    def __init__(self, api_url: str, model: str, max_new_tokens: int, temperature: float = 0.0,
                 top_p: float = 1.0, concurrency: int = 8, prompts_per_request: int = 16, timeout: float = 120.0,
                 api_key: str | None = None, stop: list[str] | None = None, answer_prefix: str = "",
                 answer_suffix: str = "", seed: int | None = None, cache: bool = True, max_retries: int = 2,
                 regex: str | None = None):
        super().__init__(cache)
        if not model:
            raise InvalidInputError("--backend openai needs --api-model NAME (the model name the server serves)")
        if concurrency < 1 or prompts_per_request < 1:
            raise InvalidInputError("--concurrency and prompts per request must be at least 1")
        if not timeout > 0 or max_retries < 0:
            raise InvalidInputError(f"--api-timeout must be > 0 seconds, got {timeout}")
        import openai

        self.base = api_base(api_url)
        self.model = model
        self.max_new_tokens = int(max_new_tokens)
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.concurrency = int(concurrency)
        self.prompts_per_request = int(prompts_per_request)
        self.timeout = float(timeout)
        self.stop = list(stop or [])
        self.answer_prefix, self.answer_suffix = answer_prefix, answer_suffix
        self.seed = seed
        self.regex = regex
        # servers started without a key accept any: the client insists on one
        self.max_retries = int(max_retries)
        self.reply_cap = reply_cap(self.max_new_tokens, self.prompts_per_request)
        http_class = _capped_client(self.reply_cap)
        self._too_large = http_class.too_large
        self.client = openai.OpenAI(base_url=self.base, api_key=api_key or "EMPTY", max_retries=self.max_retries,
                                    timeout=openai.Timeout(self.timeout, connect=min(CONNECT_TIMEOUT_S, self.timeout)),
                                    http_client=http_class(timeout=openai.Timeout(
                                        self.timeout, connect=min(CONNECT_TIMEOUT_S, self.timeout))))

    # -- requests ---------------------------------------------------------------------------------------
    def _request(self, endpoint: str, **payload):
        """One request; the client's errors as rlft's (OfflineError: unreachable; InvalidInputError: refused)."""
        import openai

        create = self.client.chat.completions.create if endpoint == "chat/completions" \
            else self.client.completions.create
        url = f"{self.base}/{endpoint}"
        # the client's timeout is per read: a server dripping its answer resets it with every byte, so each try is
        # also held to --api-timeout in all
        deadline = self.timeout * (1 + self.max_retries) + CONNECT_TIMEOUT_S
        try:
            return within_deadline(lambda: create(**self._params(), **payload), deadline)
        except self._too_large as exc:  # a malformed reply, counted as the others are (an error of the run)
            raise self._too_large_error(url, exc) from exc
        except (openai.APITimeoutError, DeadlineError) as exc:
            raise OfflineError(f"the server at {self.base} sent no complete answer within {self.timeout:g} s "
                               f"({1 + self.max_retries} tries)",
                               hint="a slow model: raise --api-timeout, or lower --concurrency") from exc
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            if isinstance(cause, self._too_large):  # older openai clients wrap any transport error as this one
                raise self._too_large_error(url, cause) from exc
            raise OfflineError(f"cannot reach the OpenAI-compatible server at {self.base} ({type(cause).__name__}: "
                               f"{str(cause)[:120]})",
                               hint="start the server (vllm serve / transformers serve) or fix --api-url") from exc
        except openai.APIStatusError as exc:
            body = exc.body if isinstance(exc.body, dict) else {}
            detail = " ".join(str(body.get("detail") or body.get("message") or exc.message).split())[:240]
            # 4xx: the request (model name, prompt) is wrong; 5xx: the server failed (a fault, exit code 1)
            kind = RemoteError if exc.status_code >= 500 else InvalidInputError
            error = kind(f"the server at {url} answered HTTP {exc.status_code}: {detail}",
                         hint="check --api-model and the server's log")
            error.status_code = exc.status_code
            raise error from exc
        except (openai.APIResponseValidationError, ValueError) as exc:
            raise RemoteError(f"malformed reply from {url}: {str(exc)[:200]}") from exc

    def _too_large_error(self, url: str, exc: BaseException) -> RemoteError:
        return RemoteError(f"malformed reply from {url}: larger than the {self.reply_cap:,} bytes a reply to "
                                 f"{self.max_new_tokens} new tokens can take ({exc})",
                                 hint="is --api-url an OpenAI-compatible model server?")

    def _params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model, "max_tokens": self.max_new_tokens,
                                  "temperature": self.temperature}
        if self.temperature > 0 and self.top_p < 1:
            params["top_p"] = self.top_p
        if self.stop:
            params["stop"] = self.stop
        if self.seed is not None:
            params["seed"] = self.seed
        if self.regex is not None:  # vLLM's structured outputs (servers that do not know the field ignore it)
            params["extra_body"] = {"structured_outputs": {"regex": self.regex}}
        return params

    def _finish(self, text: str, finish_reason: str | None) -> str:
        # a stop string is not returned by the server: close an answer block the stop string cut open
        suffix = self.answer_suffix
        if finish_reason == "stop" and suffix and suffix in self.stop and self.answer_prefix in text:
            tail = text[text.rfind(self.answer_prefix) + len(self.answer_prefix):]
            if suffix not in tail:
                return text + suffix
        return text

    @staticmethod
    def _choices(reply, url: str) -> list:
        choices = getattr(reply, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise RemoteError(f"malformed reply from {url}: no choices ({str(reply)[:160]})")
        return choices

    def _chat(self, messages: list[dict[str, str]]) -> str:
        url = f"{self.base}/chat/completions"
        choice = self._choices(self._request("chat/completions", messages=messages), url)[0]
        message = getattr(choice, "message", None)
        content = getattr(message, "content", None) if message is not None else None
        if not hasattr(message, "content") or not isinstance(content, str | None):  # {"message": 5}, {"content": 5}
            raise RemoteError(f"malformed reply from {url}: no text in choices[0].message ({str(choice)[:160]})")
        return self._finish(content or "", getattr(choice, "finish_reason", None))

    def _completions(self, prompts: list[str]) -> list[str]:
        url = f"{self.base}/completions"
        try:
            reply = self._request("completions", prompt=prompts if len(prompts) > 1 else prompts[0])
        except InvalidInputError as exc:
            if len(prompts) == 1 or getattr(exc, "status_code", None) not in (400, 422):
                raise
            self.prompts_per_request = 1  # a server that takes one prompt a request (transformers serve)
            return [t for p in prompts for t in self._completions([p])]
        choices = self._choices(reply, url)
        try:
            ordered = sorted(choices, key=lambda c: c.index or 0)
            texts = [self._finish(c.text or "", c.finish_reason) for c in ordered]
            if not all(isinstance(t, str) for t in texts):
                raise TypeError("a choice's text is not text")
        except (AttributeError, TypeError) as exc:
            raise RemoteError(f"malformed reply from {url}: choices without text") from exc
        if len(texts) != len(prompts):
            raise RemoteError(f"malformed reply from {url}: {len(texts)} choices for {len(prompts)} prompts")
        return texts

    def _generate(self, prompts: list[Prompt]) -> list[str]:
        chat = [not isinstance(p, str) for p in prompts]
        if any(chat) and not all(chat):
            raise InvalidInputError("a batch mixes chat and plain prompts")
        if chat[0]:
            results = daemon_map(self._chat, prompts, self.concurrency)
        else:
            size = self.prompts_per_request
            groups = [prompts[i : i + size] for i in range(0, len(prompts), size)]
            results = [t for group in daemon_map(self._completions, groups, self.concurrency) for t in group]
        self.calls += 1
        self.requests += len(prompts)
        return results

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "api_url": self.base, "api_model": self.model,
                "max_new_tokens": self.max_new_tokens, "temperature": self.temperature,
                "concurrency": self.concurrency, "prompts_per_request": self.prompts_per_request,
                "stop": self.stop, "decoding": "sampling" if self.temperature > 0 else "greedy",
                "constrained": "server-side regex (structured outputs)" if self.regex else None}

    def close(self) -> None:
        self.client.close()
