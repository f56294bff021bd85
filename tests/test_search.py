"""``rlft eval --search``: test-time search around a policy's action, scored by real lookahead rollouts."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
from typer.testing import CliRunner

from rlft.cli.main import app
from rlft.envs.state import step_from_state
from rlft.policy.policies import ConstantPolicy
from rlft.policy.search import SearchPolicy

EXPERT = Path(__file__).resolve().parents[1] / "pipelines" / "experts" / "halfcheetah-medium-sac.zip"


class _Unused:
    """horizon 1: the continuation policy is never asked."""

    def predict(self, batch, deterministic=True):
        raise AssertionError("a horizon-1 search has no continuation")


def test_search_plays_the_candidate_with_the_best_one_step_reward():
    env = gym.make("HalfCheetah-v5")
    obs, _ = env.reset(seed=2)
    for _ in range(10):
        obs, *_ = env.step(env.action_space.sample())
    base = ConstantPolicy(env.action_space, np.zeros(6, dtype=np.float32))
    search = SearchPolicy(base, _Unused(), lambda: gym.make("HalfCheetah-v5"), env.action_space, candidates=6,
                          horizon=1, noise=0.5, seed=0)
    chosen = search.act(obs[None], [0])[0]
    reward = step_from_state(gym.make("HalfCheetah-v5"), obs, chosen).reward
    base_reward = step_from_state(gym.make("HalfCheetah-v5"), obs, np.zeros(6, dtype=np.float32)).reward
    assert reward >= base_reward
    assert np.all(np.abs(chosen) <= 1.0)
    assert search.describe()["search"]["changed_rate"] == float(not np.allclose(chosen, 0.0))
    search.close()


def test_eval_search_reports_its_settings_and_refuses_without_an_expert(tmp_path):
    runner = CliRunner()
    out = tmp_path / "search.json"
    args = ["eval", "--env", "HalfCheetah-v5", "--policy", f"expert:{EXPERT}", "--episodes", "1", "--seed", "3",
            "--max-episode-steps", "15", "--search", "4", "--search-horizon", "3", "--quiet"]
    result = runner.invoke(app, [*args, "--expert", str(EXPERT), "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    search = report["policy_info"]["search"]
    assert (search["candidates"], search["horizon"]) == (4, 3) and 0.0 < search["changed_rate"] <= 1.0
    assert report["lengths"] == [15]
    refused = runner.invoke(app, [*args, "--out", str(tmp_path / "no.json")])
    assert refused.exit_code == 2 and "--expert" in refused.output
    assert not (tmp_path / "no.json").exists()


def test_eval_search_needs_two_candidates(tmp_path):
    result = CliRunner().invoke(app, ["eval", "--env", "HalfCheetah-v5", "--policy", "random", "--episodes", "1",
                                      "--search", "1", "--expert", str(EXPERT), "--out", str(tmp_path / "r.json")])
    assert result.exit_code == 2 and "at least 2 candidates" in result.output
