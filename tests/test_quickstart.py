"""The docs' quickstart, as written: its environment module registered through RLFT_ENV_MODULES and the one recipe
(pipelines/llm.yaml) from expert to evaluated LLM policy, at a smaller budget."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def quickstart_module() -> str:
    """The python block of docs/quickstart.md: the environment a reader copies."""
    page = (REPO / "docs" / "quickstart.md").read_text(encoding="utf-8")
    return re.search(r"```python\n(.*?)```", page, re.S).group(1)


@pytest.fixture
def corridor(tmp_path, monkeypatch):
    """The quickstart's module importable, named in RLFT_ENV_MODULES (unregistered again afterwards)."""
    import gymnasium as gym

    (tmp_path / "my_envs.py").write_text(quickstart_module(), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("RLFT_ENV_MODULES", "my_envs")
    yield tmp_path
    import sys

    sys.modules.pop("my_envs", None)
    gym.registry.pop("Corridor-v0", None)


def test_own_env_ids_need_their_module_named(cli, corridor, monkeypatch):
    monkeypatch.delenv("RLFT_ENV_MODULES")
    result = cli("data", "collect", "--env", "Corridor-v0", "--episodes", "1", "--dataset-id", "c/x-v0")
    assert result.exit_code == 2 and "unknown environment id 'Corridor-v0'" in result.output
    assert "RLFT_ENV_MODULES" in result.output
    monkeypatch.setenv("RLFT_ENV_MODULES", "my_envs, no_such_module_here")
    result = cli("data", "collect", "--env", "Corridor-v0", "--episodes", "1", "--dataset-id", "c/x-v0")
    assert result.exit_code == 2 and "'no_such_module_here', which cannot be imported" in result.output


@pytest.mark.slow
def test_the_quickstart_recipe_takes_your_env_to_an_llm_policy(cli, corridor, monkeypatch):
    monkeypatch.chdir(REPO)
    out = corridor / "runs" / "corridor"
    result = cli("pipeline", "run", "pipelines/llm.yaml", "--out", out, "--set", "env=Corridor-v0",
                 "--set", "timesteps=20000", "--set", "quick=true")
    assert result.exit_code == 0, result.output
    reports = {name: json.loads((out / "reports" / f"{name}.json").read_text())
               for name in ("llm-sft", "expert", "bc-mlp", "random")}
    assert {r["env_id"] for r in reports.values()} == {"Corridor-v0"}
    assert reports["llm-sft"]["expert_agreement"] >= 0.9 and reports["llm-sft"]["invalid_action_rate"] == 0
    assert reports["llm-sft"]["return_mean"] > reports["random"]["return_mean"] + 1.0
    codec = json.loads((out / "dataset" / "rlft_codec.json").read_text())
    assert codec["kind"] == "binned" and codec["env_id"] == "Corridor-v0"


@pytest.mark.slow
def test_the_one_recipe_runs_quick_on_a_builtin_env(cli, tmp_path, monkeypatch):
    """pipelines/llm.yaml --set env=Acrobot-v1 --set quick=true: the expert algorithm chosen from the action space
    (DQN, the one with tuned settings), every step to the four reports."""
    monkeypatch.chdir(REPO)
    out = tmp_path / "acrobot"
    result = cli("pipeline", "run", "pipelines/llm.yaml", "--out", out, "--set", "env=Acrobot-v1",
                 "--set", "quick=true")
    assert result.exit_code == 0, result.output
    assert json.loads((out / "expert" / "expert.json").read_text())["algo"] == "dqn"
    reports = [json.loads((out / "reports" / f"{n}.json").read_text()) for n in ("llm-sft", "expert", "random")]
    assert {r["env_id"] for r in reports} == {"Acrobot-v1"} and {r["episodes"] for r in reports} == {5}
