"""Transition-complete data: every serialized row is (s, a, r, s', terminated, truncated) checked against its Minari
source, and an off-policy expert's replay buffer (``expert train --record-replay``) recorded as a Minari dataset
checked against the buffer it came from."""

from __future__ import annotations

import json

import minari
import numpy as np
import pytest

from factories import make_minari_dataset
from rlft.core.errors import InvalidInputError
from rlft.datasets.loading import read_split


def _rows_by_transition(out, splits):
    rows = {}
    for split in splits:
        table = read_split(out, split=split).to_pydict()
        for i in range(len(table["step"])):
            rows[(table["episode_id"][i], table["step"][i])] = {k: table[k][i] for k in table}
    return rows


def test_every_row_yields_its_next_observation(cli, tmp_path):
    """CartPole episodes end by termination (and one by the time limit): every row's s' is the source's next
    observation, the final observation on each episode's last row, with the flags and return-to-go."""
    make_minari_dataset("cartpole/trans-v0", episodes=6, seed=3)
    make_minari_dataset("cartpole/trans-cut-v0", episodes=2, max_steps=7, seed=5)
    flags = {}
    for dataset_id in ("cartpole/trans-v0", "cartpole/trans-cut-v0"):
        out = tmp_path / dataset_id.replace("/", "-")
        result = cli("data", "serialize", dataset_id, "--format", "raw", "--out", out)
        assert result.exit_code == 0, result.output
        info = json.loads((out / "rlft_info.json").read_text())
        rows = _rows_by_transition(out, info["splits"])
        source = minari.load_dataset(dataset_id)
        assert len(rows) == source.total_steps
        for episode in source.iterate_episodes():
            returns = np.cumsum(episode.rewards[::-1])[::-1]
            for t in range(len(episode.rewards)):
                row = rows[(episode.id, t)]
                np.testing.assert_allclose(row["observation"], episode.observations[t], rtol=0, atol=1e-6)
                np.testing.assert_allclose(row["next_observation"], episode.observations[t + 1], rtol=0, atol=1e-6)
                assert row["action"] == episode.actions[t]
                assert row["reward"] == pytest.approx(episode.rewards[t])
                assert row["return_to_go"] == pytest.approx(returns[t])
                assert row["terminated"] == bool(episode.terminations[t])
                assert row["truncated"] == bool(episode.truncations[t])
        ends = [r for r in rows.values() if r["terminated"] or r["truncated"]]
        assert len(ends) == source.total_episodes
        flags[dataset_id] = {("terminated", r["terminated"]) for r in ends} | {("truncated", r["truncated"])
                                                                              for r in ends}
    assert ("terminated", True) in flags["cartpole/trans-v0"]  # both kinds of episode end were checked
    assert ("truncated", True) in flags["cartpole/trans-cut-v0"]


def test_a_source_whose_observations_do_not_line_up_is_one_line(cli, tmp_path):
    """Minari keeps T+1 observations for T actions; a source with T (a converter that dropped the last) is refused
    with the counts, and nothing is written."""
    import gymnasium as gym
    from minari.data_collector.episode_buffer import EpisodeBuffer

    rng = np.random.default_rng(0)
    buffers = [EpisodeBuffer(id=0, observations=rng.standard_normal((5, 3)).astype(np.float32),
                             actions=rng.uniform(-2, 2, (5, 1)).astype(np.float32), rewards=rng.standard_normal(5),
                             terminations=np.zeros(5, bool), truncations=np.r_[np.zeros(4, bool), True])]
    minari.create_dataset_from_buffers("pendulum/shifted-v0", buffers, env=gym.make("Pendulum-v1"))
    out = tmp_path / "out"
    result = cli("data", "serialize", "pendulum/shifted-v0", "--format", "raw", "--out", out)
    assert result.exit_code == 2
    assert "does not line up: 5 observations, 5 actions and 5 rewards" in result.output
    assert not out.exists()


def _trained_with_replay(cli, tmp_path, env, algo, timesteps, dataset_id):
    out = tmp_path / f"{algo}.zip"
    result = cli("expert", "train", "--env", env, "--algo", algo, "--timesteps", timesteps, "--eval-freq", "0",
                 "--eval-episodes", "1", "--out", out, "--record-replay", dataset_id)
    assert result.exit_code == 0, result.output
    from rlft.sources.experts import load_expert

    return load_expert(out)


def test_replay_dataset_is_the_whole_buffer_in_order(cli, tmp_path, monkeypatch):
    """SAC on Pendulum for 450 steps: two whole 200-step episodes and an unfinished one of 50 (truncated), every
    observation, next observation, action (as the env received it), reward against SB3's own buffer."""
    captured = {}
    from rlft.sources import replay

    real = replay.replay_episodes

    def keep(buffer, *args):
        captured["buffer"] = buffer
        return real(buffer, *args)

    monkeypatch.setattr(replay, "replay_episodes", keep)
    model, meta = _trained_with_replay(cli, tmp_path, "Pendulum-v1", "sac", "450", "pendulum/replay-v0")
    assert meta["replay_dataset"] == "pendulum/replay-v0"
    ds = minari.load_dataset("pendulum/replay-v0")
    assert ds.total_steps == 450 and [len(e.rewards) for e in ds.iterate_episodes()] == [200, 200, 50]
    buffer = captured["buffer"]
    episodes = list(ds.iterate_episodes())
    obs = np.concatenate([e.observations[:-1] for e in episodes])
    next_obs = np.concatenate([e.observations[1:] for e in episodes])
    np.testing.assert_array_equal(obs, buffer.observations[:450, 0])
    np.testing.assert_array_equal(next_obs, buffer.next_observations[:450, 0])
    acts = np.concatenate([e.actions for e in episodes])
    np.testing.assert_allclose(acts, 2.0 * buffer.actions[:450, 0], rtol=1e-6)  # Pendulum's bounds are [-2, 2]
    assert np.abs(acts).max() > 1.0  # unscaled: the env's own range, not SAC's [-1, 1]
    np.testing.assert_allclose(np.concatenate([e.rewards for e in episodes]), buffer.rewards[:450, 0], rtol=1e-6)
    assert [bool(e.truncations[-1]) for e in episodes] == [True, True, True]
    assert not any(e.terminations.any() for e in episodes)
    assert ds.storage.metadata["rlft"]["kind"] == "replay"


def test_replay_of_a_discrete_run_ends_at_terminations(cli, tmp_path):
    """DQN on CartPole: episodes end where the pole fell (terminations), actions are plain integers."""
    _, meta = _trained_with_replay(cli, tmp_path, "CartPole-v1", "dqn", "300", "cartpole/replay-v0")
    ds = minari.load_dataset("cartpole/replay-v0")
    episodes = list(ds.iterate_episodes())
    # the tuned DQN collects 256 steps between updates: the run ends at the first multiple past 300
    assert ds.total_steps == meta["timesteps"] >= 300 and episodes[0].terminations[-1]
    assert episodes[0].actions.ndim == 1 and set(np.unique(episodes[0].actions)) <= {0, 1}
    for episode in episodes[:-1]:
        assert episode.terminations[-1] or episode.truncations[-1]
        assert not episode.terminations[:-1].any()


def test_replay_refusals_come_before_training(cli, tmp_path):
    out = tmp_path / "e.zip"
    result = cli("expert", "train", "--env", "CartPole-v1", "--algo", "ppo", "--timesteps", "64", "--out", out,
                 "--record-replay", "cartpole/replay-v0")
    assert result.exit_code == 2 and "needs an off-policy algorithm" in result.output and not out.exists()
    hp = tmp_path / "hp.yaml"
    hp.write_text("Pendulum-v1:\n  n_timesteps: 1000\n  policy: MlpPolicy\n  buffer_size: 500\n")
    result = cli("expert", "train", "--env", "Pendulum-v1", "--algo", "sac", "--hyperparams", hp, "--out", out,
                 "--record-replay", "pendulum/replay-v0")
    assert result.exit_code == 2 and "buffer_size 500 is smaller than the 1,000 steps" in result.output
    assert not out.exists()
    make_minari_dataset("cartpole/taken-v0", episodes=1)
    result = cli("expert", "train", "--env", "CartPole-v1", "--algo", "dqn", "--timesteps", "64", "--out", out,
                 "--record-replay", "cartpole/taken-v0")
    assert result.exit_code == 2 and "already exists" in result.output and not out.exists()


def test_replay_episodes_refuse_a_wrapped_buffer():
    from gymnasium import spaces
    from stable_baselines3.common.buffers import ReplayBuffer

    from rlft.sources.replay import replay_episodes

    space = spaces.Box(-1, 1, (2,))
    buffer = ReplayBuffer(3, space, space)
    for _ in range(4):
        buffer.add(np.zeros((1, 2)), np.zeros((1, 2)), np.zeros((1, 2)), np.zeros(1), np.zeros(1), [{}])
    with pytest.raises(InvalidInputError, match="wrapped around"):
        replay_episodes(buffer, space, space)
