"""The OpenAI-compatible backend against a real HTTP server on 127.0.0.1 started by the test."""

from __future__ import annotations

import json

import pytest

from eval_factories import FakeOpenAIServer, free_port, frozenlake_dataset, minari_dataset_folder
from rlft.core.errors import InvalidInputError, OfflineError
from rlft.evaluate.config import EvalConfig
from rlft.evaluate.runner import run_evaluation
from rlft.policy.openai_backend import OpenAIBackend, api_base


def _run(**kwargs):
    return run_evaluation(EvalConfig(quiet=True, backend="openai", **kwargs))


def test_chat_prompts_go_to_chat_completions(tmp_path_factory):
    data = frozenlake_dataset(tmp_path_factory)
    with FakeOpenAIServer(lambda prompt: "<think>the hole is left</think><answer>DOWN</answer>") as server:
        report = _run(policy="llm:my-model", codec=str(data), api_url=server.url, episodes=6, num_envs=3,
                      concurrency=2, max_episode_steps=15)
    reference = run_evaluation(EvalConfig(policy="constant:DOWN", codec=str(data), episodes=6, quiet=True,
                                          max_episode_steps=15))
    assert report["returns"] == reference["returns"] and report["lengths"] == reference["lengths"]
    assert report["invalid_action_rate"] == 0.0 and report["policy_info"]["backend"] == "openai"
    endpoints = {path for path, _ in server.requests}
    # greedy: each distinct FrozenLake prompt is asked once; every other decision is answered from the cache
    assert endpoints == {"/v1/chat/completions"} and report["cache_hits"] > 0
    assert len(server.requests) == report["env_steps"] - report["cache_hits"] <= 11
    payload = server.requests[0][1]
    assert payload["model"] == "my-model" and payload["temperature"] == 0.0
    assert [m["role"] for m in payload["messages"]] == ["system", "user"]
    assert payload["stop"] == ["</answer>"]  # the suffix stops generation; the client puts it back
    assert report["generate_calls"] < report["env_steps"]  # one batched call per step with a miss


def test_plain_prompts_are_batched_into_completions(tmp_path_factory):
    data = minari_dataset_folder(tmp_path_factory, "CartPole-v1", episodes=30, precision=2)
    with FakeOpenAIServer(lambda prompt: "<action>1</action>\n") as server:
        report = _run(policy="llm:served", api_model="tiny", codec=str(data), api_url=server.url + "/",
                      episodes=8, num_envs=8)
    reference = run_evaluation(EvalConfig(policy="constant:1", env_id="CartPole-v1", episodes=8, quiet=True))
    assert report["returns"] == reference["returns"] and report["invalid_action_rate"] == 0.0
    assert {path for path, _ in server.requests} == {"/v1/completions"}
    first = server.requests[0][1]
    assert first["model"] == "tiny" and isinstance(first["prompt"], list) and len(first["prompt"]) == 8
    assert first["prompt"][0].startswith("<observation>")
    assert len(server.requests) == report["generate_calls"] < report["env_steps"]


def test_unparsable_replies_are_counted(tmp_path_factory):
    data = frozenlake_dataset(tmp_path_factory)
    with FakeOpenAIServer(lambda prompt: "I would go down.") as server:
        report = _run(policy="llm:m", codec=str(data), api_url=server.url, episodes=2, num_envs=2,
                      max_episode_steps=4, fallback_action="RIGHT")
    assert report["invalid_action_rate"] == 1.0 and report["invalid_examples"][0]["output"] == "I would go down."


@pytest.mark.parametrize(("mode", "message"), [
    ("garbage", "malformed reply"), ("nochoices", "no choices"), ("http500", "HTTP 500"),
    ("intmessage", "malformed reply"), ("intcontent", "no text in choices[0].message"),
])
def test_bad_server_replies_are_one_line_errors(tmp_path_factory, cli, mode, message):
    data = frozenlake_dataset(tmp_path_factory)
    with FakeOpenAIServer(lambda prompt: "", mode=mode) as server:
        result = cli("eval", "--policy", "llm:m", "--codec", data, "--backend", "openai", "--api-url", server.url,
                     "--episodes", "1")
    assert result.exit_code == 1 and message in result.output  # a 5xx or a reply that is not one: the server's fault
    assert len(result.output.strip().splitlines()) <= 3 and "Traceback" not in result.output


def test_server_down_fails_fast(tmp_path_factory, cli):
    data = frozenlake_dataset(tmp_path_factory)
    url = f"http://127.0.0.1:{free_port()}/v1"
    result = cli("eval", "--policy", "llm:m", "--codec", data, "--backend", "openai", "--api-url", url,
                 "--episodes", "1")
    text = " ".join(result.output.split())
    assert result.exit_code == 1 and "cannot reach the OpenAI-compatible server" in text and "Traceback" not in text
    with pytest.raises(OfflineError, match="cannot reach"):
        OpenAIBackend(url, "m", 8).generate(["hello"])


def test_backend_options_are_checked(tmp_path_factory):
    data = frozenlake_dataset(tmp_path_factory)
    assert api_base("http://127.0.0.1:8000") == "http://127.0.0.1:8000/v1"
    assert api_base("http://127.0.0.1:8000/v1/") == "http://127.0.0.1:8000/v1"
    with pytest.raises(InvalidInputError, match="http://"):
        api_base("127.0.0.1:8000")
    with pytest.raises(InvalidInputError, match="--api-url"):
        _run(policy="llm:m", codec=str(data), episodes=1)
    with pytest.raises(InvalidInputError, match="no codec"):
        _run(policy="llm:m", api_url="http://127.0.0.1:9/v1", episodes=1)


def test_a_server_that_dies_mid_run_keeps_the_finished_episodes(tmp_path_factory, cli, tmp_path):
    data = minari_dataset_folder(tmp_path_factory, "CartPole-v1", episodes=30, precision=2)
    out = tmp_path / "report.json"
    with FakeOpenAIServer(lambda prompt: "<action>1</action>\n", die_after=25) as server:
        result = cli("eval", "--policy", "llm:served", "--api-model", "tiny", "--codec", data, "--backend", "openai",
                     "--api-url", server.url, "--episodes", "20", "--num-envs", "1", "--out", out)
    text = " ".join(result.output.split())
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "cannot reach the OpenAI-compatible server" in text and "finished before it are in" in text
    report = json.loads(out.read_text())
    assert report["incomplete"] is True and report["episodes_requested"] == 20
    assert 1 <= report["episodes"] < 20 and len(report["returns"]) == report["episodes"]
    assert report["error"].startswith("cannot reach")


class SilentServer:
    """Accepts connections and never answers (a hung model server); ``connected`` is set on the first one."""

    def __init__(self):
        import socket
        import threading

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.connected = threading.Event()
        self.held: list = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)
            self.connected.set()

    def close(self):
        self.sock.close()
        for conn in self.held:
            conn.close()


def test_a_server_that_never_answers_times_out_with_one_line(tmp_path_factory, cli):
    import time

    data = frozenlake_dataset(tmp_path_factory)
    server = SilentServer()
    try:
        start = time.perf_counter()
        result = cli("eval", "--policy", "llm:m", "--codec", data, "--backend", "openai", "--api-url", server.url,
                     "--episodes", "1", "--api-timeout", "0.5")
        seconds = time.perf_counter() - start
    finally:
        server.close()
    text = " ".join(result.output.split())
    assert result.exit_code == 1 and "sent no complete answer within 0.5 s (3 tries)" in text
    assert "--api-timeout" in text
    assert seconds < 30  # three tries of 0.5 s and the client's back-off, not the 60 s default


def test_ctrl_c_stops_a_run_waiting_on_a_silent_server_within_two_seconds(tmp_path_factory, tmp_path):
    import signal
    import subprocess
    import sys
    import time

    data = frozenlake_dataset(tmp_path_factory)
    server = SilentServer()
    try:
        proc = subprocess.Popen(  # noqa: S603 - the rlft CLI itself
            [sys.executable, "-m", "rlft.cli.main", "eval", "--policy", "llm:m", "--codec", str(data), "--backend",
             "openai", "--api-url", server.url, "--episodes", "1", "--out", str(tmp_path / "r.json")],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            # a child inherits an ignored SIGINT (and Python then keeps ignoring it): give it a terminal's default,
            # whatever an earlier test or the CI runner left in this process
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        assert server.connected.wait(60), "the run never sent a request"
        start = time.perf_counter()
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=30)
        seconds = time.perf_counter() - start
    finally:
        server.close()
    assert proc.returncode == 130 and "Interrupted" in output and "Traceback" not in output
    assert seconds < 2.0
    assert not (tmp_path / "r.json").exists()


def test_a_server_that_drips_its_answer_is_stopped_by_the_timeout(tmp_path_factory, cli):
    """A server that sends its answer a byte at a time resets every per-read timeout: each try is still held to
    --api-timeout in all, so the run ends within the stated tries instead of after the whole drip."""
    import time

    data = frozenlake_dataset(tmp_path_factory)
    with FakeOpenAIServer(lambda prompt: "<answer>LEFT</answer>" * 20, mode="drip") as server:
        start = time.perf_counter()
        result = cli("eval", "--policy", "llm:m", "--codec", data, "--backend", "openai", "--api-url", server.url,
                     "--episodes", "1", "--api-timeout", "1")
        seconds = time.perf_counter() - start
    text = " ".join(result.output.split())
    assert result.exit_code == 1 and "sent no complete answer within 1 s (3 tries)" in text
    assert seconds < 20  # 3 tries of 1 s and the connect allowance, not the minutes the drip would take


def test_constrained_through_a_server_sends_the_codecs_grammar_as_a_regex(tmp_path_factory):
    """--constrained with --backend openai: every request carries the codec's answer grammar as a regex (vLLM's
    structured outputs), the same language constrained local decoding allows."""
    import re

    from rlft.codecs import load_codec
    from rlft.policy.grammar import answer_grammar

    data = frozenlake_dataset(tmp_path_factory)
    with FakeOpenAIServer(lambda prompt: "<answer>DOWN</answer>") as server:
        report = _run(policy="llm:m", codec=str(data), api_url=server.url, episodes=2, constrained=True,
                      max_episode_steps=5)
    regex = server.requests[0][1]["structured_outputs"]["regex"]
    grammar = answer_grammar(load_codec(data))
    assert regex == grammar.regex() and report["policy_info"]["constrained"].startswith("server-side regex")
    for text in ("<answer>DOWN</answer>", "<answer>LEFT</answer>", "<answer>JUMP</answer>", "DOWN",
                 "<answer></answer>"):
        assert bool(re.fullmatch(regex, text)) == grammar.matches(text), text


def test_an_api_timeout_past_a_day_is_refused_before_any_work(cli, tmp_path):
    """--api-timeout 1e300 overflowed the clock in a traceback (hostile pass 11, B2); 1e9 waited on a drip server
    for ever (B3). Bounded as data push's --timeout is."""
    result = cli("eval", "--policy", "random", "--env", "CartPole-v1", "--backend", "openai", "--api-timeout", "1e300",
                 "--episodes", "1", "--out", tmp_path / "r.json")
    assert result.exit_code == 2 and "--api-timeout" in result.output and not (tmp_path / "r.json").exists()
