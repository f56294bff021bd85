"""Baselines in real environments give their known values; episodes do not depend on K."""

from __future__ import annotations

import numpy as np
import pytest

from eval_factories import frozenlake_dataset, minari_dataset_folder, small_ppo
from rlft.core.errors import InvalidInputError
from rlft.evaluate.config import EvalConfig
from rlft.evaluate.runner import run_evaluation


def _run(**kwargs):
    return run_evaluation(EvalConfig(quiet=True, **kwargs))


def test_random_cartpole_matches_the_reference_mean():
    # registry: 22.1 +- 0.26 over 2,000 episodes; 300 episodes have a standard error of about 0.7
    report = _run(policy="random", env_id="CartPole-v1", episodes=300, num_envs=8, seed=0)
    assert abs(report["return_mean"] - 22.1) < 2.5
    assert report["episodes"] == 300 and report["seeds"] == list(range(300))
    assert report["normalized_score"] == pytest.approx(100 * (report["return_mean"] - 22.1) / (500 - 22.1))
    assert report["invalid_action_rate"] is None and report["generate_calls"] is None


def test_episodes_do_not_depend_on_the_number_of_envs():
    a = _run(policy="random", env_id="CartPole-v1", episodes=12, num_envs=1, seed=7)
    b = _run(policy="random", env_id="CartPole-v1", episodes=12, num_envs=5, seed=7)
    c = _run(policy="random", env_id="CartPole-v1", episodes=12, num_envs=5, seed=8)
    assert a["returns"] == b["returns"] and a["lengths"] == b["lengths"] and a["seeds"] == list(range(7, 19))
    assert a["returns"] != c["returns"]


def test_q_greedy_frozenlake_success_rate(tmp_path_factory):
    data = frozenlake_dataset(tmp_path_factory)
    report = _run(policy="q-greedy", codec=str(data), episodes=600, num_envs=16, seed=0)
    # exact probability of success within the 100-step limit: 0.7402; 600 episodes: stderr 0.018
    assert report["env_id"] == "FrozenLake-v1" and report["env_kwargs"]["is_slippery"] is True
    assert abs(report["success_rate"] - 0.7402) < 0.065
    assert report["expert_agreement"] == 1.0  # greedy on Q* is always in the optimal set
    assert report["success_rate"] == report["return_mean"]


def test_constant_policy_and_fallback_values(tmp_path_factory):
    data = frozenlake_dataset(tmp_path_factory)
    left = _run(policy="constant:LEFT", codec=str(data), episodes=5)
    zero = _run(policy="constant", codec=str(data), episodes=5)
    assert left["returns"] == zero["returns"] and left["policy_info"]["value"] == 0
    assert _run(policy="constant:2", env_id="FrozenLake-v1", episodes=3)["policy_info"]["value"] == 2
    with pytest.raises(InvalidInputError, match="outside"):
        _run(policy="constant:9", env_id="FrozenLake-v1", episodes=1)
    box = _run(policy="constant:0.5", env_id="Pendulum-v1", episodes=1, max_episode_steps=5)
    assert box["policy_info"]["value"] == [0.5] and box["lengths"] == [5]


def test_expert_baseline_gives_the_experts_own_evaluation(tmp_path_factory):
    from rlft.sources.experts import evaluate, load_expert

    path = small_ppo(tmp_path_factory)
    model, _ = load_expert(path)
    reference = evaluate(model, "CartPole-v1", episodes=6, seed=100, num_envs=1)
    report = _run(policy=f"expert:{path}", episodes=6, num_envs=4, seed=100, expert=path)
    assert report["env_id"] == "CartPole-v1"  # from the checkpoint's metadata
    assert report["returns"] == reference.returns and report["lengths"] == reference.lengths
    assert report["expert_agreement"] == 1.0 and report["expert_agreement_steps"] == sum(reference.lengths)
    # the random policy agrees with the expert only now and then
    rand = _run(policy="random", env_id="CartPole-v1", episodes=4, expert=path)
    assert 0.0 < rand["expert_agreement"] < 1.0


def test_behaviour_cloning_learns_a_deterministic_expert(tmp_path, tmp_path_factory, cli):
    import rlft.cli.train_bc  # noqa: F401  (registers `rlft train bc`)

    data = frozenlake_dataset(tmp_path_factory)
    out = tmp_path / "bc.pt"
    result = cli("train", "bc", "--dataset", data, "--out", out, "--epochs", "300", "--val-fraction", "0",
                 "--learning-rate", "0.01")
    assert result.exit_code == 0, result.output
    report = _run(policy=f"bc:{out}", codec=str(data), episodes=200, num_envs=8)
    q = _run(policy="q-greedy", codec=str(data), episodes=200, num_envs=8)
    # the MLP reproduces the greedy optimal action of each of the 11 decision states
    assert report["expert_agreement"] == 1.0 and report["returns"] == q["returns"]
    result = cli("train", "bc", "--dataset", data, "--out", out)
    assert result.exit_code == 2 and "already exists" in result.output


def test_behaviour_cloning_continuous(tmp_path, tmp_path_factory):
    from rlft.policy.bc import BCPolicy
    from rlft.train.bc import BCConfig, train_bc

    data = minari_dataset_folder(tmp_path_factory, "Pendulum-v1", episodes=4, max_steps=25)
    info = train_bc(BCConfig(dataset=str(data), out=tmp_path / "bc.pt", epochs=5))
    assert info["env_id"] == "Pendulum-v1" and info["val_rows"] > 0 and "val_mean_abs_error" in info
    policy = BCPolicy(tmp_path / "bc.pt")
    actions = policy.act(np.zeros((3, 3), np.float32), [0, 1, 2])
    assert actions.shape == (3, 1) and np.all(np.abs(actions) <= 2.0)
    report = _run(policy=f"bc:{tmp_path / 'bc.pt'}", episodes=2, num_envs=2, max_episode_steps=10)
    assert report["env_id"] == "Pendulum-v1" and report["lengths"] == [10, 10]
    with pytest.raises(InvalidInputError, match="does not match"):
        _run(policy=f"bc:{tmp_path / 'bc.pt'}", env_id="MountainCarContinuous-v0", episodes=1)
    first = train_bc(BCConfig(dataset=str(data), out=tmp_path / "bc30.pt", epochs=1, max_train_samples=30))
    assert first["rows"] == 30 and info["rows"] > 30  # the split's first 30 rows, as train sft's option


def test_action_scale_probes_how_hard_the_policy_pushes():
    # a constant 0.5 torque scaled by 2 is the constant 1.0 policy's episode exactly; 8 is clipped to Pendulum's 2
    half = _run(policy="constant:0.5", env_id="Pendulum-v1", episodes=2, max_episode_steps=20, action_scale=2.0)
    one = _run(policy="constant:1.0", env_id="Pendulum-v1", episodes=2, max_episode_steps=20)
    clipped = _run(policy="constant:0.5", env_id="Pendulum-v1", episodes=2, max_episode_steps=20, action_scale=8.0)
    full = _run(policy="constant:2.0", env_id="Pendulum-v1", episodes=2, max_episode_steps=20)
    assert half["returns"] == one["returns"] and clipped["returns"] == full["returns"]
    assert half["action_scale"] == 2.0 and one["action_scale"] == 1.0
    with pytest.raises(InvalidInputError, match="continuous actions"):
        _run(policy="random", env_id="CartPole-v1", episodes=1, action_scale=1.5)
    with pytest.raises(InvalidInputError, match="positive number"):
        _run(policy="random", env_id="Pendulum-v1", episodes=1, action_scale=0.0)
