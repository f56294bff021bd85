"""What the ninth hostile pass found unbounded, each now ended in one line: a model server's huge replies, a model
folder whose config.json asks for terabytes, Hub and Minari downloads from a server that never answers or drips,
reference scores that are not numbers, and ``data collect`` writing HDF5 to a disk with no room."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import resource
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from factories import one_line
from rlft.core.errors import WriteFaultError


def _one_line(result, code: int, *words: str) -> None:
    one_line(result, code, *words, max_lines=3)  # the error and its hint, wrapped


class _Server:
    """An HTTP server on 127.0.0.1 whose every request is answered by ``reply(handler)``."""

    def __init__(self, reply):
        self.requests = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _any(self):
                outer.requests += 1
                self.rfile.read(int(self.headers.get("content-length") or 0))
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up: as tested
                    reply(self)

            do_GET = do_POST = do_HEAD = _any  # noqa: N815 - http.server's names

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def _endless(handler, declare: bool) -> None:
    """A 200 answer of 50 MB (declared, or not: then it runs until the connection closes) sent as fast as read."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    if declare:
        handler.send_header("Content-Length", str(50 << 20))
    handler.end_headers()
    block = b'{"choices": [{"text": "' + b"x" * (64 << 10)
    for _ in range(50 << 4):
        handler.wfile.write(block)


@pytest.mark.parametrize("declare", [True, False])
def test_a_huge_openai_reply_is_a_malformed_reply_read_only_up_to_a_cap(cli, tmp_path_factory, declare):
    from eval_factories import frozenlake_dataset

    data = frozenlake_dataset(tmp_path_factory)
    with _Server(lambda h: _endless(h, declare)) as server:
        start = time.perf_counter()
        result = cli("eval", "--policy", "llm:m", "--codec", data, "--backend", "openai", "--api-url",
                     server.url + "/v1", "--episodes", "1", "--concurrency", "1")
        seconds = time.perf_counter() - start
    _one_line(result, 1, "malformed reply", "larger than the 4,194,304 bytes")
    # no retry (the same server would send the same reply); the oldest openai clients rlft supports retry any
    # transport failure themselves, within their max_retries (2)
    assert seconds < 20 and 1 <= server.requests <= 3


def test_a_model_whose_config_asks_for_more_memory_than_the_machine_has_is_refused_first(cli, tmp_path_factory,
                                                                                       tmp_path):
    import shutil

    from eval_factories import frozenlake_dataset, tiny_model

    data = frozenlake_dataset(tmp_path_factory)
    model = tmp_path / "model"
    shutil.copytree(tiny_model(tmp_path_factory, data, "pass9"), model)
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "hidden_size": 10_000_000}))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    result = cli("eval", "--policy", f"llm:{model}", "--codec", data, "--episodes", "1")
    _one_line(result, 2, "needs about", "hidden size 10,000,000", "GiB of memory available")
    assert time.perf_counter() - start < 30
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 1 << 20  # KiB: under 1 GiB more


@pytest.fixture
def hub_at(monkeypatch):
    """Point the Hub at ``url`` for real (the session is offline; huggingface_hub read that once, at import)."""

    def point(url: str, seconds: str = "1") -> None:
        monkeypatch.setenv("HF_HUB_OFFLINE", "0")
        monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
        monkeypatch.setenv("HF_ENDPOINT", url)
        monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", url)
        monkeypatch.setenv("RLFT_HUB_TIMEOUT", seconds)
        monkeypatch.setenv("HF_HOME", str(Path(os.environ["MINARI_DATASETS_PATH"]).parent / "hf"))

    return point


class _Mute:
    """A server that accepts connections and never answers."""

    def __enter__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        return self

    def __exit__(self, *exc):
        self.sock.close()


def test_hub_ids_from_a_server_that_never_answers_end_in_one_line(cli, tmp_path_factory, tmp_path, hub_at):
    from eval_factories import frozenlake_dataset, tiny_model

    data = frozenlake_dataset(tmp_path_factory)
    model = tiny_model(tmp_path_factory, data, "pass9")
    with _Mute() as mute:
        hub_at(mute.url)
        for args in (("train", "sft", "--dataset", "someone/data", "--model", model, "--out", tmp_path / "a"),
                     ("train", "sft", "--dataset", data, "--model", "someone/model", "--out", tmp_path / "b"),
                     ("eval", "--policy", "llm:someone/model", "--codec", data, "--episodes", "1")):
            start = time.perf_counter()
            result = cli(*args)
            assert time.perf_counter() - start < 10, args
            _one_line(result, 1, "cannot be reached", "accepted a connection but sent no answer within 1 s",
                      mute.url)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def _drip(handler) -> None:
    if handler.command == "HEAD":  # the first-byte check passes: the server is alive
        handler.send_response(200)
        handler.end_headers()
        return
    handler.send_response(200)
    handler.send_header("Content-Length", "100000")
    handler.end_headers()
    for _ in range(100):
        handler.wfile.write(b" ")
        handler.wfile.flush()
        time.sleep(0.2)  # the server's pace: one byte resets every per-read timeout


def test_a_hub_download_that_drips_is_given_up_at_the_deadline(cli, tmp_path_factory, hub_at):
    from eval_factories import frozenlake_dataset

    data = frozenlake_dataset(tmp_path_factory)
    with _Server(_drip) as server:
        hub_at(server.url, "1.5")
        start = time.perf_counter()
        result = cli("eval", "--policy", "llm:someone/model", "--codec", data, "--episodes", "1")
        assert time.perf_counter() - start < 10
    _one_line(result, 1, "did not finish within 1.5 s", "RLFT_HUB_TIMEOUT")


def test_hub_timeout_must_be_seconds(monkeypatch):
    from rlft.core.errors import InvalidInputError
    from rlft.core.net import hub_timeout

    for bad in ("soon", "0", "-5", "inf", "nan"):
        monkeypatch.setenv("RLFT_HUB_TIMEOUT", bad)
        with pytest.raises(InvalidInputError, match="RLFT_HUB_TIMEOUT"):
            hub_timeout()
    monkeypatch.delenv("RLFT_HUB_TIMEOUT")
    assert hub_timeout() == 3600.0


def test_data_info_download_is_bounded_by_its_download_timeout(cli, hub_at):
    with _Mute() as mute:
        hub_at(mute.url)
        start = time.perf_counter()
        result = cli("data", "info", "someone/data-v0", "--download", "--download-timeout", "1")
        assert time.perf_counter() - start < 10
    _one_line(result, 1, "did not finish within 1 s", "--download-timeout")
    refused = cli("data", "info", "someone/data-v0", "--download", "--download-timeout", "0")
    assert refused.exit_code == 2 and "--download-timeout" in refused.output  # click's range check


@pytest.mark.parametrize(("scores", "words"), [
    (("NaN", 100.0), "ref_min_score must be a finite number, got 'NaN'"),
    ((float("nan"), 100.0), "ref_min_score must be a finite number"),
    ((10.0, 10.0), "ref_min_score 10.0 must be below ref_max_score 10.0"),
])
def test_reference_scores_that_are_not_a_range_are_refused_by_serialize_and_info(cli, tmp_path, scores, words):
    from factories import make_minari_dataset
    from rlft.sources.minari_source import datasets_root

    make_minari_dataset("test/ref-v0", episodes=2, max_steps=10)
    meta = datasets_root() / "test" / "ref-v0" / "data" / "metadata.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "ref_min_score": scores[0],
                                "ref_max_score": scores[1]}))
    for args in (("data", "serialize", "test/ref-v0", "--out", tmp_path / "s"), ("data", "info", "test/ref-v0")):
        _one_line(cli(*args), 2, "metadata.json", words)
    assert not (tmp_path / "s").exists()


def test_hdf5_collect_without_room_ends_in_one_line_and_leaves_nothing(tmp_path):
    """A real full disk needs root (a tmpfs); ``ulimit -f`` is the same failure to HDF5 (its writes fail with
    EFBIG, which Python's ignored SIGXFSZ leaves to the writer), and crashed the process before the fix."""
    root = tmp_path / "minari"

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (20 << 10, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    env = {**os.environ, "MINARI_DATASETS_PATH": str(root)}
    proc = subprocess.run([sys.executable, "-m", "rlft.cli.main", "data", "collect", "--env", "CartPole-v1",
                           "--dataset-id", "test/full-v0", "--episodes", "40"], env=env, capture_output=True,
                          text=True, preexec_fn=limit, timeout=300)
    output = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode == 1, output
    assert "Traceback" not in output and "cannot write --dataset-id" in output and "size limit" in output, output
    assert not [p.name for p in root.rglob("*") if p.name.startswith(".rlft-collect-")]
    assert not (root / "test" / "full-v0").exists()


def test_room_for_a_write_is_checked_against_the_free_space(tmp_path):
    from rlft.sources.collect_space import check_room

    check_room(tmp_path, 1 << 10, tmp_path / "out")
    with pytest.raises(WriteFaultError, match="the disk is full"):
        check_room(tmp_path, 1 << 60, tmp_path / "out")  # more than any disk holds
