"""The network boundary: Hugging Face offline mode and a connectivity probe that fails within seconds."""

from __future__ import annotations

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


class DeadlineError(TimeoutError):
    """:func:`within_deadline`'s call did not return in time (it may still be running, on a daemon thread)."""


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
        raise DeadlineError(f"no complete answer within {seconds:g} s")
    ok, value = outcome[0]
    if not ok:
        raise value
    return value
