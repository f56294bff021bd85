"""The network boundary: Hugging Face offline mode and a connectivity probe that fails within seconds."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from urllib.parse import urlparse

from rlft.core.errors import InvalidInputError, OfflineError
from rlft.core.secrets import redact_text


def hub_offline() -> bool:
    """``HF_HUB_OFFLINE`` is set to a true value.

    Not ``huggingface_hub.is_offline_mode()``: that returns a constant read once when huggingface_hub is imported,
    so a variable set afterwards (a pipeline step, a test) would be missed; this reads the same variable, the
    same way, when asked."""
    return os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes", "on")


DEFAULT_HUB_ENDPOINT = "https://huggingface.co"


def hub_endpoint() -> str:
    """The Hub's base URL: ``HF_ENDPOINT`` (a self-hosted mirror) or huggingface.co, read when asked (the
    constant huggingface_hub reads at import would miss a variable set later)."""
    url = os.environ.get("HF_ENDPOINT", DEFAULT_HUB_ENDPOINT).rstrip("/") or DEFAULT_HUB_ENDPOINT
    return check_http_url(url, "HF_ENDPOINT", "https://huggingface.co, or unset it")


def check_http_url(url: str, name: str, example: str) -> str:
    """``url`` when it is an http(s) URL naming a host (``name`` and ``example`` say what it is in the errors, its
    secrets masked); an IPv6 typo or a bad port is one line, not urllib's ValueError at first use."""
    if not url.startswith(("http://", "https://")):
        raise InvalidInputError(f"{name} must start with http:// or https://, got {redact_text(url)!r}",
                                hint=f"e.g. {example}")
    try:
        parsed = urlparse(url)
        _port = parsed.port  # reading it checks it
    except ValueError as exc:  # "Invalid IPv6 URL", a port out of range or not a number
        raise InvalidInputError(f"{name} {redact_text(url)!r} is not a valid URL ({exc})",
                                hint=f"e.g. {example}") from exc
    if not parsed.hostname:
        raise InvalidInputError(f"{name} {redact_text(url)!r} names no host", hint=f"e.g. {example}")
    return url


def host_port(url: str) -> tuple[str, int]:
    """(host, port) of an http(s) URL, the scheme's port when none is written."""
    parsed = urlparse(url)
    return parsed.hostname or "huggingface.co", parsed.port or (80 if parsed.scheme == "http" else 443)


def check_reachable(host: str, port: int, timeout: float, what: str, hint: str) -> None:
    """Raise :class:`OfflineError` unless a TCP connection to ``host:port`` opens within ``timeout`` seconds.

    Name resolution is not covered by socket timeouts, so the probe runs in a daemon thread that is given up
    on after ``timeout``.
    """
    outcome: list[BaseException | None] = []

    def probe() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            outcome.append(None)
        except OSError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout)
    if not outcome or outcome[0] is not None:
        reason = "timed out" if not outcome else f"{outcome[0].__class__.__name__}: {outcome[0]}"
        raise OfflineError(f"cannot reach {what} {host}:{port} ({reason})", hint=hint)


def check_answers(url: str, timeout: float, what: str, hint: str) -> None:
    """Raise :class:`OfflineError` unless the HTTP server at ``url`` sends the first bytes of an answer (any status)
    within ``timeout`` seconds: a server that accepts connections and never answers passes
    :func:`check_reachable`, and would hold a download until its deadline. Certificates are not checked here:
    nothing is sent but a HEAD request, and nothing of the answer is used."""
    import ssl
    import urllib.error
    import urllib.request

    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE

    def head() -> None:
        with contextlib.suppress(urllib.error.HTTPError):  # an HTTP error is an answer all the same
            urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout,
                                   context=context).close()

    try:
        within_deadline(head, timeout)
    except (DeadlineError, TimeoutError) as exc:
        raise OfflineError(f"{what} at {redact_text(url)} accepted a connection but sent no answer within "
                           f"{timeout:g} s", hint=hint) from exc
    except (OSError, ValueError) as exc:  # refused, reset, a broken answer (http.client's errors are OSError or not)
        raise OfflineError(f"{what} at {redact_text(url)} did not answer ({type(exc).__name__}: {str(exc)[:120]})",
                           hint=hint) from exc
    except Exception as exc:  # noqa: BLE001 - http.client.HTTPException: an answer that is not HTTP
        raise OfflineError(f"{what} at {redact_text(url)} did not answer HTTP ({type(exc).__name__})",
                           hint=hint) from exc


HUB_TIMEOUT_VARIABLE = "RLFT_HUB_TIMEOUT"
DEFAULT_HUB_TIMEOUT_S = 3600.0  # in all, for a whole model or dataset: large downloads take long, never forever


def hub_timeout() -> float:
    """Seconds a Hub download (``--model`` / ``--dataset`` / ``llm:`` Hub ids) may take in all:
    ``$RLFT_HUB_TIMEOUT``, else an hour; a stalled or dripping server is given up then."""
    text = os.environ.get(HUB_TIMEOUT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_HUB_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise InvalidInputError(f"{HUB_TIMEOUT_VARIABLE} must be a number of seconds > 0, got {text!r}",
                                hint=f"e.g. {HUB_TIMEOUT_VARIABLE}=600, or unset it for {DEFAULT_HUB_TIMEOUT_S:g} s")
    return value


class DeadlineError(TimeoutError):
    """:func:`within_deadline`'s call did not return in time (it may still be running, on a daemon thread)."""


_ABANDONED: list[threading.Thread] = []  # requests left running past their deadline


def abandoned_requests() -> bool:
    """Whether a request left past its deadline still runs (the ``rlft`` command then exits without Python's
    finalization, during which such a thread, inside an HTTP or upload library's native code, can crash it)."""
    return any(thread.is_alive() for thread in _ABANDONED)


def within_deadline(fn, seconds: float):
    """``fn()`` run on a daemon thread and waited for at most ``seconds`` in all: a server that accepts and never
    answers, or answers one byte at a time (which resets every per-read timeout), cannot hold the caller longer.
    Its exception is raised here; past the deadline :class:`DeadlineError` is (the thread is left to the
    process's exit)."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append((True, fn()))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            outcome.append((False, exc))

    thread = threading.Thread(target=run, daemon=True, name="rlft-deadline")
    thread.start()
    thread.join(seconds)
    if not outcome:
        _ABANDONED.append(thread)
        raise DeadlineError(f"no complete answer within {seconds:g} s")
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def remote_fault(exc: BaseException) -> tuple[str, int | None]:
    """What a failed call to a Hub-like server was, the one classification every caller shares: ("status", code)
    when the server answered with an HTTP error, ("reply", None) when it answered something the client could not
    read (HTML, bad JSON, JSON without the fields it needs), ("transport", None) when the connection failed."""
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(status, int):
        return "status", status
    # a reply that is not JSON raises ValueError; requests' JSONDecodeError (older huggingface_hub parses with
    # requests) is an OSError too, yet it is the endpoint's fault, not the network's
    if isinstance(exc, ValueError):
        return "reply", None
    if isinstance(exc, OSError) or type(exc).__module__.split(".")[0] in ("httpx", "httpx2", "requests", "urllib3"):
        return "transport", None
    return "reply", None
