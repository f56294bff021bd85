"""``rlft train offline`` (TD3+BC, IQL with TorchRL's losses) on real rlft dataset folders: what it learns, what it
saves, how evaluation and other stages load it, and what it refuses."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from factories import BANDIT_BEST as BEST
from factories import make_bandit_dataset
from rlft.core.errors import InvalidInputError
from rlft.models.offline import OFFLINE_CRITIC, OFFLINE_INFO, OFFLINE_POLICY, load_critic


def _bandit_dataset(cli, tmp_path, rows: int = 600):
    return make_bandit_dataset(cli, tmp_path / "bandit", rows)


def _actor_mean(run) -> float:
    from rlft.models.bc import load_bc

    obs = np.random.default_rng(1).uniform(-1, 1, (200, 3)).astype(np.float32)
    return float(load_bc(run / OFFLINE_POLICY).act(obs).mean())


@pytest.mark.parametrize("algo", ["td3bc", "iql"])
def test_offline_rl_moves_past_the_data_towards_reward(cli, tmp_path, algo):
    data = _bandit_dataset(cli, tmp_path)
    run = tmp_path / algo
    result = cli("train", "offline", "--dataset", data, "--out", run, "--algo", algo, "--steps", "400",
                 "--hidden", "32,32", "--learning-rate", "3e-3", "--seed", "0")
    assert result.exit_code == 0, result.output
    bc = tmp_path / "bc.pt"
    assert cli("train", "bc", "--dataset", data, "--out", bc, "--epochs", "20").exit_code == 0
    from rlft.models.bc import load_bc

    obs = np.random.default_rng(1).uniform(-1, 1, (200, 3)).astype(np.float32)
    bc_mean = float(load_bc(bc).act(obs).mean())
    assert abs(bc_mean) < 0.4  # imitation: the data's mean action
    assert _actor_mean(run) > bc_mean + 0.4  # offline RL: towards the rewarded action
    critic = load_critic(run)
    better, worse = np.full((50, 1), BEST, np.float32), np.full((50, 1), -1.5, np.float32)
    assert (critic.q(obs[:50], better) > critic.q(obs[:50], worse)).mean() > 0.9
    if algo == "iql":  # V and the advantage, in the data's reward units (the training scale divided out)
        assert critic.v(obs[:5]).shape == (5,)
        assert critic.advantage(obs[:50], better).mean() > critic.advantage(obs[:50], worse).mean()
        assert -4.0 < float(critic.q(obs[:50], better).mean()) < 1.0
    else:
        with pytest.raises(InvalidInputError, match="no V network"):
            critic.v(obs[:5])


def test_offline_run_folder_plays_through_rlft_eval(cli, tmp_path):
    data = _bandit_dataset(cli, tmp_path, rows=100)
    run = tmp_path / "run"
    result = cli("train", "offline", "--dataset", data, "--out", run, "--algo", "td3bc", "--steps", "50",
                 "--hidden", "16", "--check-steps", "25", "--check-episodes", "2")
    assert result.exit_code == 0, result.output
    assert {p.name for p in run.iterdir()} >= {OFFLINE_POLICY, OFFLINE_CRITIC, OFFLINE_INFO, "rlft_codec.json"}
    info = json.loads((run / OFFLINE_INFO).read_text())
    assert info["algo"] == "td3bc" and info["rows"] == 80  # the train split of 100 one-step episodes
    assert [c["step"] for c in info["checks"]] == [25, 50] and info["versions"]["torchrl"]
    assert info["curve"][-1]["step"] == 50 and "loss_q" in info["curve"][-1]
    report = tmp_path / "r.json"
    result = cli("eval", "--policy", f"offline:{run}", "--episodes", "2", "--out", report)
    assert result.exit_code == 0, result.output
    saved = json.loads(report.read_text())
    assert saved["policy_kind"] == "offline" and saved["policy_info"]["kind"] == "offline"
    assert saved["env_id"] == "Pendulum-v1" and saved["episodes"] == 2


def test_offline_refusals_are_one_line_and_write_nothing(cli, tmp_path):
    data = _bandit_dataset(cli, tmp_path, rows=20)
    run = tmp_path / "run"
    result = cli("train", "offline", "--dataset", data, "--out", run, "--algo", "cql")
    assert result.exit_code == 2 and "--algo must be one of td3bc, iql" in result.output
    # a folder serialized before rows carried s'
    import pyarrow.parquet as pq

    for path in (data / "data").glob("*.parquet"):
        pq.write_table(pq.read_table(path).drop(["next_observation"]), path)
    result = cli("train", "offline", "--dataset", data, "--out", run, "--steps", "5")
    assert result.exit_code == 2 and "no next_observation column" in result.output and not run.exists()


def test_a_critic_needs_rewards(cli, tmp_path):
    """An RLFT4RL file holds (observation, action) pairs, no rewards: asked for a critic, one line."""
    source = tmp_path / "pairs.json"
    line = ('{"observation": "<observation>' + ",".join(["0.5"] * 17) + '</observation>", "action": "<action>'
            + ",".join(["0.1"] * 6) + '</action>"}')
    source.write_text("\n".join([line] * 10) + "\n")
    out = tmp_path / "imported"
    result = cli("data", "import", "rlft4rl", source, "--env", "HalfCheetah-v5", "--out", out)
    assert result.exit_code == 0, result.output
    result = cli("train", "offline", "--dataset", out, "--out", tmp_path / "run", "--steps", "5")
    assert result.exit_code == 2 and "holds no rewards" in result.output
    assert not (tmp_path / "run").exists()


def test_discrete_actions_are_refused(cli, tmp_path):
    from factories import make_minari_dataset

    make_minari_dataset("cartpole/off-v0", episodes=2)
    out = tmp_path / "cp"
    assert cli("data", "serialize", "cartpole/off-v0", "--format", "raw", "--out", out).exit_code == 0
    result = cli("train", "offline", "--dataset", out, "--out", tmp_path / "run", "--steps", "5")
    assert result.exit_code == 2 and "continuous (Box) actions" in result.output


def test_bc_on_the_best_episodes_keeps_only_their_rows(cli, tmp_path):
    """--best-episodes 0.1 (D4RL's 10% BC): the rows of the tenth of the episodes with the highest return."""
    from rlft.datasets.loading import observations_actions

    data = _bandit_dataset(cli, tmp_path, rows=200)  # one-step episodes: return = -(a - 1)^2
    obs, actions = observations_actions(data, "train")
    best_obs, best_actions = observations_actions(data, "train", best_episodes=0.1)
    assert len(best_actions) == round(0.1 * len(actions))
    assert np.abs(best_actions - BEST).max() <= np.sort(np.abs(actions - BEST).ravel())[len(best_actions) - 1] + 1e-6
    with pytest.raises(InvalidInputError, match="fraction in"):
        observations_actions(data, "train", best_episodes=1.5)
    result = cli("train", "bc", "--dataset", data, "--out", tmp_path / "bc.pt", "--best-episodes", "0.1",
                 "--epochs", "2")
    assert result.exit_code == 0, result.output


def test_trackers_record_the_stages_whose_loop_is_rlfts(cli, tmp_path):
    """--report-to for train bc and train offline (TRL's stages have report_to): TensorBoard records their losses;
    an unknown tracker is one line."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    data = _bandit_dataset(cli, tmp_path, rows=60)
    assert cli("train", "bc", "--dataset", data, "--out", tmp_path / "bc.pt", "--epochs", "3",
               "--report-to", "tensorboard").exit_code == 0
    assert "train/loss" in EventAccumulator(str(tmp_path / "bc_tb")).Reload().Tags()["scalars"]
    run = tmp_path / "run"
    result = cli("train", "offline", "--dataset", data, "--out", run, "--steps", "1000", "--hidden", "8",
                 "--report-to", "tensorboard")
    assert result.exit_code == 0, result.output
    tags = EventAccumulator(str(run / "logs")).Reload().Tags()["scalars"]
    assert {"train/loss_q", "train/loss_value", "train/loss_actor"} <= set(tags)
    result = cli("train", "offline", "--dataset", data, "--out", tmp_path / "x", "--report-to", "mlflow")
    assert result.exit_code == 2 and "unknown tracker mlflow" in result.output


def test_a_critic_learns_dart_data_from_the_executed_actions_and_old_dart_data_is_warned(cli, tmp_path):
    """DART data labels each state with the policy's clean action while the env was stepped with a noisy one: a
    critic learned from the labels does not see what actions do (row 11e's critic-ranked play fell below random).
    rlft records the executed action beside the label (Minari infos, then an executed_action column) and the
    critic's transitions use it: they equal those of the same collection recorded with executed labels. A DART
    dataset recorded without it (before) still trains, with a warning."""
    import gymnasium as gym
    import h5py
    from stable_baselines3 import PPO

    from rlft.datasets.dataset import RlftDataset

    policy = tmp_path / "pendulum.zip"
    PPO("MlpPolicy", gym.make("Pendulum-v1"), seed=0, device="cpu").save(policy)
    for labels in ("clean", "executed"):
        result = cli("data", "collect", "--env", "Pendulum-v1", "--policy", policy, "--episodes", "3", "--seed", "5",
                     "--max-episode-steps", "30", "--noise", "0.5", "--label-actions", labels, "--dataset-id",
                     f"pendulum/{labels}-v0", "--data-path", tmp_path / "minari")
        assert result.exit_code == 0, result.output
    old = tmp_path / "minari" / "pendulum" / "old-v0"
    shutil.copytree(tmp_path / "minari" / "pendulum" / "clean-v0", old)
    with h5py.File(old / "data" / "main_data.hdf5", "r+") as f:  # DART data as rlft recorded it before
        for name in f:
            del f[name]["infos"]["executed_action"]
    for labels in ("clean", "executed", "old"):
        result = cli("data", "serialize", tmp_path / "minari" / "pendulum" / f"{labels}-v0", "--format", "binned",
                     "--out", tmp_path / labels)
        assert result.exit_code == 0, result.output
        result = cli("train", "offline", "--dataset", tmp_path / labels, "--out", tmp_path / f"run-{labels}",
                     "--algo", "iql", "--steps", "20")
        assert result.exit_code == 0, result.output
        warned = "clean labels" in " ".join(result.output.split())
        assert warned == (labels == "old"), result.output
    clean, executed, old = (RlftDataset.open(tmp_path / n) for n in ("clean", "executed", "old"))
    assert "executed_action" in clean.columns() and "executed_action" not in executed.columns() + old.columns()
    assert np.array_equal(clean.transitions().actions, executed.transitions().actions)  # what the env took
    assert np.array_equal(clean.transitions().next_observations, executed.transitions().next_observations)
    labels = np.stack(clean.table(["action"]).column("action").to_pylist())
    assert np.array_equal(labels, old.transitions().actions)  # the labels: the policy's own, noise-free
    assert not np.allclose(labels, clean.transitions().actions, atol=1e-2)
    card = (tmp_path / "clean" / "README.md").read_text()
    assert "executed_action" in card and "executed_action" not in (tmp_path / "executed" / "README.md").read_text()
