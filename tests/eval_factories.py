"""Inputs of the evaluation tests, built once per test session (cached by name under pytest's base temp):
datasets, tiny models, a short SFT run, a small PPO expert, and a local OpenAI-compatible HTTP server."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from rlft.sources.minari_source import minari_root

_CACHE: dict[str, Path] = {}


def _cached(tmp_path_factory, name: str, build) -> Path:
    key = f"{tmp_path_factory.getbasetemp()}::{name}"
    if key not in _CACHE:
        out = tmp_path_factory.mktemp("eval-" + name.replace("/", "-"))
        _CACHE[key] = build(out)
    return _CACHE[key]


def frozenlake_dataset(tmp_path_factory) -> Path:
    """``rlft data export-q frozenlake`` (4x4 slippery, chat prompts)."""

    def build(out: Path) -> Path:
        from rlft.core.console import console
        from rlft.datasets.frozenlake_q.export import ExportQConfig, export_frozenlake_q

        with console.capture():
            export_frozenlake_q(ExportQConfig(out=out / "fl4", episodes=10))
        return out / "fl4"

    return _cached(tmp_path_factory, "frozenlake", build)


def minari_dataset_folder(tmp_path_factory, env_id: str, fmt: str = "raw", episodes: int = 20,
                          max_steps: int | None = None, **options) -> Path:
    """A random-policy Minari dataset of ``env_id`` serialized with codec ``fmt`` (plain prompts)."""
    from factories import make_minari_dataset

    name = f"{env_id}-{fmt}-{episodes}-{max_steps}-" + "-".join(f"{k}{v}" for k, v in sorted(options.items()))

    def build(out: Path) -> Path:
        from rlft.core.console import console
        from rlft.datasets.serialize import serialize
        from rlft.datasets.serialize_options import SerializeConfig

        dataset_id = f"{env_id.split('-')[0].lower()}/random-v0"
        with minari_root(out / "minari"), console.capture():
            make_minari_dataset(dataset_id, env_id=env_id, episodes=episodes, max_steps=max_steps)
            serialize(SerializeConfig(source=dataset_id, out=out / "data", format=fmt, **options))
        return out / "data"

    return _cached(tmp_path_factory, name, build)


def tiny_model(tmp_path_factory, dataset: Path, name: str, **options) -> Path:
    """``rlft model init`` on ``dataset`` (2 layers, hidden 64 unless given)."""

    def build(out: Path) -> Path:
        from rlft.core.console import console
        from rlft.models.tiny import ModelInitConfig, init_model

        with console.capture():
            init_model(ModelInitConfig(dataset=str(dataset), out=out / "model", **options))
        return out / "model"

    return _cached(tmp_path_factory, "model-" + name, build)


def sft_run(tmp_path_factory, dataset: Path, model: Path, name: str, steps: int = 60, lora: bool = False,
            learning_rate: float = 3e-3) -> Path:
    """A short SFT run (the issue-4 trainer) writing a RUN folder with rlft_codec.json."""

    def build(out: Path) -> Path:
        from rlft.core.console import console
        from rlft.train.sft import run_sft
        from rlft.train.sft_config import SFTStageConfig

        with console.capture():
            run_sft(SFTStageConfig.of(dataset=str(dataset), model=str(model), out=out / "run", lora=lora,
                                   learning_rate=learning_rate, max_steps=steps, per_device_train_batch_size=16,
                                   eval_split="none", logging_steps=1000, save_steps=100_000))
        return out / "run"

    return _cached(tmp_path_factory, "sft-" + name, build)


def small_ppo(tmp_path_factory) -> Path:
    """A CartPole PPO checkpoint trained for a few thousand steps (seconds), with its metadata JSON."""

    def build(out: Path) -> Path:
        from rlft.core.console import console
        from rlft.sources.experts import ExpertConfig, train_expert

        with console.capture():
            result = train_expert(ExpertConfig(env_id="CartPole-v1", out=out / "ppo.zip", timesteps=2048,
                                               eval_episodes=2, eval_freq=0))
        return result.path

    return _cached(tmp_path_factory, "ppo", build)


# -- a local OpenAI-compatible server -------------------------------------------------------------------------


# replies of a broken server, by mode: not JSON, JSON without choices, choices of the right shape holding no text
CANNED_REPLIES = {
    "garbage": b"<html>not json</html>",
    "nochoices": b'{"object": "error"}',
    "intmessage": b'{"choices": [{"index": 0, "message": 5}]}',
    "intcontent": b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": 5}}]}',
}


class FakeOpenAIServer:
    """An OpenAI-format server on 127.0.0.1 answering every prompt with ``answer(prompt_text) -> str``.

    ``mode`` "ok" answers properly, "garbage" sends non-JSON, "nochoices" sends JSON without choices,
    "http500" fails, "401echo" refuses the key and names it, "drip" sends a valid answer one byte every 0.2 s (a
    stalled stream that every per-read timeout lets through); ``die_after`` N: from request N+1 on, connections are
    closed without an answer (a server that died mid-run). Requests are recorded (endpoint, payload) for assertions.
    """

    def __init__(self, answer, mode: str = "ok", stop_strips: bool = True, die_after: int | None = None):
        self.answer, self.mode, self.stop_strips, self.die_after = answer, mode, stop_strips, die_after
        self.requests: list[tuple[str, dict]] = []
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length", 0))
                payload = json.loads(self.rfile.read(length))
                with server.lock:
                    server.requests.append((self.path, payload))
                    dead = server.die_after is not None and len(server.requests) > server.die_after
                if dead:
                    self.close_connection = True  # no status line: the client sees the connection drop
                    return
                if server.mode == "http500":
                    self._send(500, b'{"error": "boom"}')
                    return
                if server.mode == "401echo":  # a server that names the key it refused, as some proxies do
                    key = self.headers.get("Authorization", "").removeprefix("Bearer ")
                    self._send(401, json.dumps({"error": {"message": f"Incorrect API key provided: {key}"}}).encode())
                    return
                if server.mode in CANNED_REPLIES:
                    self._send(200, CANNED_REPLIES[server.mode])
                    return
                if self.path.endswith("/chat/completions"):
                    text = "\n".join(m["content"] for m in payload["messages"])
                    choices = [server._choice(text, payload, chat=True)]
                elif self.path.endswith("/completions"):
                    prompts = payload["prompt"] if isinstance(payload["prompt"], list) else [payload["prompt"]]
                    choices = [{"index": i, **server._choice(p, payload, chat=False)} for i, p in enumerate(prompts)]
                    choices.reverse()  # servers may answer out of order: the client sorts by index
                else:
                    self._send(404, b'{"error": "not found"}')
                    return
                body = {"id": "x", "object": "chat.completion", "model": payload.get("model"), "choices": choices}
                self._send(200, json.dumps(body).encode())

            def _send(self, code: int, body: bytes):
                server._send(self, code, body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def _send(self, handler, code: int, body: bytes) -> None:
        handler.send_response(code)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        if self.mode != "drip":
            handler.wfile.write(body)
            return
        for i in range(len(body)):
            if self.stopped.wait(0.2):  # the test is over: stop dripping
                return
            try:
                handler.wfile.write(body[i:i + 1])
                handler.wfile.flush()
            except OSError:
                return

    def _choice(self, prompt_text: str, payload: dict, chat: bool) -> dict:
        text = self.answer(prompt_text)
        finish = "stop"
        for stop in payload.get("stop") or []:
            if self.stop_strips and stop in text:  # like real servers: the stop string is not returned
                text = text[: text.index(stop)]
        if chat:
            return {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
        return {"text": text, "finish_reason": finish}

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopped.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def free_port() -> int:
    """A port on 127.0.0.1 nobody listens on (bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
