"""The OpenAI backend against a real server: ``transformers serve`` (the ``transformers[serving]`` extra) started
on 127.0.0.1 with a tiny model trained here. Greedy evaluation through the server must give the same report as
the local transformers backend on the same episodes, for chat prompts (chat/completions) and plain prompts
(completions)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from eval_factories import free_port, frozenlake_dataset, minari_dataset_folder, sft_run, tiny_model
from rlft.evaluate.config import EvalConfig
from rlft.evaluate.runner import run_evaluation

SAME = ("returns", "lengths", "seeds", "expert_agreement", "invalid_actions", "decisions")


def transformers_cli() -> str | None:
    local = Path(sys.executable).with_name("transformers")
    return str(local) if local.is_file() else shutil.which("transformers")


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(transformers_cli() is None or __import__("importlib").util.find_spec("fastapi") is None,
                       reason='needs `transformers serve` (pip install "rlft[serve]")'),
]


class Served:
    """``transformers serve MODEL`` on 127.0.0.1 (one thread), ready when /health answers."""

    def __init__(self, model: Path):
        self.port = free_port()
        env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
        self.proc = subprocess.Popen(
            [transformers_cli(), "serve", str(model), "--host", "127.0.0.1", "--port", str(self.port),
             "--device", "cpu", "--log-level", "error"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"transformers serve exited: {self.proc.stderr.read()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2):
                    return
            except OSError:
                time.sleep(0.5)  # polling a starting server: the one wait in this suite
        self.close()
        raise RuntimeError("transformers serve did not answer /health within 120 s")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _both(run: Path, data: Path, **common) -> tuple[dict, dict]:
    local = run_evaluation(EvalConfig(policy=f"llm:{run}", codec=str(data), quiet=True, **common))
    server = Served(run)
    try:
        # transformers' stop-string matching spells "abcdef" with the served tokenizer, which a tiny word-level
        # tokenizer cannot (HTTP 500): the model ends its answer with its end-of-turn token instead
        remote = run_evaluation(EvalConfig(policy=f"llm:{run}", codec=str(data), backend="openai",
                                           api_url=server.url, api_model=str(run), api_stop=False, quiet=True,
                                           **common))
    finally:
        server.close()
    return local, remote


def test_chat_prompts_through_transformers_serve_equal_the_local_backend(tmp_path_factory):
    data = frozenlake_dataset(tmp_path_factory)
    model = tiny_model(tmp_path_factory, data, "lake-serve")
    run = sft_run(tmp_path_factory, data, model, "lake-serve", steps=60, learning_rate=1e-3)
    local, remote = _both(run, data, episodes=12, num_envs=4, seed=7, max_episode_steps=40)
    assert remote["policy_info"]["backend"] == "openai" and local["policy_info"]["backend"] == "transformers"
    assert local["invalid_action_rate"] == 0.0  # a trained model: the answers parse
    for key in SAME:
        assert remote[key] == local[key], key


def test_plain_prompts_through_transformers_serve_equal_the_local_backend(tmp_path_factory):
    data = minari_dataset_folder(tmp_path_factory, "CartPole-v1", episodes=30, precision=2)
    model = tiny_model(tmp_path_factory, data, "cartpole-serve")
    run = sft_run(tmp_path_factory, data, model, "cartpole-serve", steps=40, learning_rate=1e-2)
    local, remote = _both(run, data, episodes=6, num_envs=3, seed=11)
    assert local["invalid_action_rate"] == 0.0
    for key in ("returns", "lengths", "seeds", "invalid_actions", "decisions"):
        assert remote[key] == local[key], key
