"""Env registry, hyperparameter files and SB3 experts (train, save with metadata, load, evaluate)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from rlft.core.errors import InvalidInputError
from rlft.envs.registry import check_env_id, make_env, make_vec_env, reference_scores
from rlft.sources.experts import ExpertConfig, load_expert, train_expert
from rlft.sources.hyperparams import load_hyperparams

CARTPOLE_RANDOM = 22.1


def test_unknown_env_id_suggests_close_ids():
    with pytest.raises(InvalidInputError, match="did you mean CartPole-v1"):
        check_env_id("cartpole-v1")
    assert check_env_id("HalfCheetah-v5") == "HalfCheetah-v5"


def test_reference_scores_and_env_factories():
    ref = reference_scores("HalfCheetah-v5")
    assert (ref.random, ref.expert) == (-280.178953, 12135.0)
    assert ref.normalize(12135.0) == pytest.approx(1.0) and ref.normalize(-280.178953) == pytest.approx(0.0)
    assert reference_scores("Pendulum-v1") is None
    assert make_env("CartPole-v1", max_episode_steps=7).spec.max_episode_steps == 7
    envs = make_vec_env("CartPole-v1", 3, seed=0)
    assert envs.num_envs == 3
    envs.close()


def test_hyperparams_rl_zoo_cartpole_entry():
    hp = load_hyperparams("ppo", "CartPole-v1")
    assert (hp.n_envs, hp.n_timesteps) == (8, 100_000)
    kwargs = hp.algo_kwargs()
    assert kwargs["n_steps"] == 32 and kwargs["batch_size"] == 256 and kwargs["gae_lambda"] == 0.8
    assert kwargs["learning_rate"](1.0) == pytest.approx(1e-3) and kwargs["learning_rate"](0.5) == pytest.approx(5e-4)
    assert kwargs["clip_range"](0.0) == pytest.approx(0.0)
    assert "n_envs" not in kwargs
    assert "defaults" in load_hyperparams("ppo", "Acrobot-v1").source


def test_hyperparams_file_errors(tmp_path):
    file = tmp_path / "hp.yaml"
    file.write_text("CartPole-v1:\n  n_steps: 16\n")
    with pytest.raises(InvalidInputError, match="no entry for 'Acrobot-v1'"):
        load_hyperparams("ppo", "Acrobot-v1", file)
    with pytest.raises(InvalidInputError, match="does not exist"):
        load_hyperparams("ppo", "CartPole-v1", tmp_path / "missing.yaml")
    file.write_text("CartPole-v1:\n  normalize: true\n")
    with pytest.raises(InvalidInputError, match="unsupported"):
        load_hyperparams("ppo", "CartPole-v1", file)


@pytest.fixture(scope="module")
def small_ppo(tmp_path_factory):
    """A PPO CartPole checkpoint trained for a few thousand steps (seconds)."""
    out = tmp_path_factory.mktemp("experts") / "ppo-cartpole.zip"
    result = train_expert(ExpertConfig(env_id="CartPole-v1", out=out, timesteps=2048, eval_episodes=3, eval_freq=0))
    return result


def test_train_writes_checkpoint_and_metadata(small_ppo):
    meta = json.loads(small_ppo.path.with_suffix(".json").read_text())
    assert meta["env_id"] == "CartPole-v1" and meta["algo"] == "ppo" and meta["num_envs"] == 8
    assert meta["timesteps"] >= 2048 and meta["timesteps_requested"] == 2048 and not meta["stopped_early"]
    assert meta["hyperparams"]["n_steps"] == 32 and meta["hyperparams_source"].endswith("ppo.yaml")
    assert meta["eval"]["episodes"] == 3 and len(meta["eval"]["returns"]) == 3
    assert meta["normalized_score"] == pytest.approx(
        100 * (meta["eval"]["mean_return"] - CARTPOLE_RANDOM) / (500 - CARTPOLE_RANDOM)
    )
    assert {"rlft", "stable_baselines3", "torch"} <= set(meta["versions"])
    assert meta["train_seconds"] > 0 and meta["seed"] == 0


def test_load_expert_predicts_batches(small_ppo, tmp_path):
    model, meta = load_expert(small_ppo.path)
    actions, _ = model.predict(np.zeros((5, 4), dtype=np.float32), deterministic=True)
    assert actions.shape == (5,) and meta["algo"] == "ppo"
    # Without the JSON the algorithm is read from the checkpoint itself.
    bare = tmp_path / "bare.zip"
    shutil.copy(small_ppo.path, bare)
    model, meta = load_expert(bare)
    assert meta["algo"] == "ppo" and type(model).__name__ == "PPO"


def test_expert_cli_eval_and_errors(cli, small_ppo, tmp_path):
    result = cli("expert", "eval", small_ppo.path, "--episodes", "3")
    assert result.exit_code == 0, result.output
    assert "mean return" in result.output and "normalized score" in result.output

    result = cli("expert", "train", "--env", "CartPol-v1", "--out", tmp_path / "x.zip")
    assert result.exit_code == 2 and "did you mean CartPole-v1" in result.output
    result = cli("expert", "train", "--env", "CartPole-v1", "--algo", "a2c", "--out", tmp_path / "x.zip")
    assert result.exit_code == 2 and "--algo must be one of" in result.output
    result = cli("expert", "train", "--env", "CartPole-v1", "--out", tmp_path / "x.pt")
    assert result.exit_code == 2 and ".zip" in result.output
    result = cli("expert", "train", "--env", "CartPole-v1", "--out", small_ppo.path, "--timesteps", "10")
    assert result.exit_code == 2 and "already exists" in result.output
    result = cli("expert", "train", "--env", "CartPole-v1", "--out", tmp_path / "x.zip", "--stop-at-return", "9",
                 "--eval-freq", "0")
    assert result.exit_code == 2 and "--eval-freq" in result.output
    result = cli("expert", "eval", tmp_path / "missing.zip")
    assert result.exit_code == 2 and "does not exist" in result.output


@pytest.mark.parametrize(
    ("algo", "env_id", "extra"),
    [
        ("sac", "Pendulum-v1", "learning_starts: 50\n  batch_size: 32\n  policy_kwargs:\n    net_arch: [32, 32]\n"),
        ("tqc", "Pendulum-v1", "learning_starts: 50\n  batch_size: 32\n  policy_kwargs:\n    net_arch: [32, 32]\n"),
        ("dqn", "CartPole-v1", "learning_starts: 50\n  train_freq: 16\n  batch_size: 32\n"),
    ],
    ids=["sac", "tqc", "dqn"],
)
def test_other_algorithms_train_and_load(cli, tmp_path, algo, env_id, extra):
    hp = tmp_path / "hp.yaml"
    hp.write_text(f"{env_id}:\n  policy: MlpPolicy\n  {extra}")
    out = tmp_path / f"{algo}.zip"
    result = cli("expert", "train", "--env", env_id, "--algo", algo, "--timesteps", "150", "--hyperparams", hp,
                 "--eval-episodes", "1", "--eval-freq", "0", "--out", out)
    assert result.exit_code == 0, result.output
    out.with_suffix(".json").unlink()  # force the algorithm guess from the checkpoint
    model, meta = load_expert(out)
    assert meta["algo"] == algo
    env = make_env(env_id)
    obs = np.stack([env.reset(seed=i)[0] for i in range(3)])
    actions, _ = model.predict(obs, deterministic=True)
    assert len(actions) == 3


@pytest.mark.slow
def test_ppo_cartpole_expert_beats_random_and_stops_at_return(cli, tmp_path):
    out = tmp_path / "ppo.zip"
    result = cli("expert", "train", "--env", "CartPole-v1", "--algo", "ppo", "--timesteps", "20000",
                 "--eval-freq", "0", "--out", out)
    assert result.exit_code == 0, result.output
    meta = json.loads(out.with_suffix(".json").read_text())
    assert meta["eval"]["mean_return"] > 5 * CARTPOLE_RANDOM
    assert meta["timesteps"] >= 20000 and meta["steps_per_second"] > 0

    out = tmp_path / "medium.zip"
    result = cli("expert", "train", "--env", "CartPole-v1", "--timesteps", "50000", "--stop-at-return", "60",
                 "--eval-freq", "2048", "--eval-freq-episodes", "3", "--out", out)
    assert result.exit_code == 0, result.output
    meta = json.loads(out.with_suffix(".json").read_text())
    assert meta["stopped_early"] and meta["timesteps"] < 50000
    assert meta["eval_history"][-1]["mean_return"] >= 60
    assert all(h["mean_return"] < 60 for h in meta["eval_history"][:-1])


def test_acrobot_and_mountaincar_ship_tuned_dqn_settings_and_the_error_names_them(cli, tmp_path):
    from rlft.sources.hyperparams import load_hyperparams, tuned_algos

    for env_id, steps in (("Acrobot-v1", 100_000), ("MountainCar-v0", 120_000)):
        hp = load_hyperparams("dqn", env_id)
        assert hp.n_timesteps == steps and hp.source.endswith("dqn.yaml") and hp.raw["policy_kwargs"]
        assert tuned_algos(env_id) == ["dqn"]
    result = cli("expert", "train", "--env", "Acrobot-v1", "--out", tmp_path / "a.zip")
    assert result.exit_code == 2 and "no tuned ppo settings for Acrobot-v1" in result.output
    assert "--algo dqn" in result.output and not (tmp_path / "a.zip").exists()


def test_training_leaves_no_folder_in_the_temporary_directory(tmp_path, monkeypatch):
    """SB3's default logger makes an empty SB3-<date> folder per learn(); rlft's runs leave nothing behind."""
    import tempfile

    from rlft.train.online import train_online
    from rlft.train.online_config import OnlineConfig

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    train_expert(ExpertConfig(env_id="CartPole-v1", out=tmp_path / "ppo.zip", timesteps=256, eval_episodes=1,
                              eval_freq=0))
    train_online(OnlineConfig(env="CartPole-v1", out=tmp_path / "online", timesteps=256, eval_episodes=1))
    left = sorted(p.name for p in scratch.iterdir())
    # the lock folder is shared by design (rlft.core.io), torch's compile cache is torch's
    assert [n for n in left if not n.startswith(("rlft-locks-", "torchinductor_"))] == [], left


def test_auto_algo_follows_the_action_space_and_the_tuned_settings():
    from rlft.sources.expert_algos import auto_algo

    assert auto_algo("CartPole-v1") == "ppo"  # discrete, PPO tuned
    assert auto_algo("Acrobot-v1") == "dqn"  # discrete, only DQN tuned
    assert auto_algo("Pendulum-v1") == "sac"  # Box
    assert auto_algo("FrozenLake-v1") == "ppo"  # nothing tuned: PPO for discrete actions


def test_sb3_stages_report_to_tensorboard(cli, tmp_path):
    """expert train and train online take --report-to tensorboard (SB3's own curves); W&B is refused with the way on."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "ppo.zip"
    result = cli("expert", "train", "--env", "CartPole-v1", "--timesteps", "600", "--eval-freq", "0",
                 "--eval-episodes", "1", "--out", out, "--report-to", "tensorboard")
    assert result.exit_code == 0, result.output
    events = list((tmp_path / "ppo_tb").rglob("events.out.tfevents.*"))
    assert events and EventAccumulator(str(events[0].parent)).Reload().Tags()["scalars"]
    result = cli("train", "online", "--env", "CartPole-v1", "--out", tmp_path / "online", "--timesteps", "600",
                 "--eval-episodes", "1", "--report-to", "tensorboard")
    assert result.exit_code == 0, result.output
    assert list((tmp_path / "online" / "logs").rglob("events.out.tfevents.*"))
    result = cli("expert", "train", "--env", "CartPole-v1", "--timesteps", "64", "--out", tmp_path / "x.zip",
                 "--report-to", "wandb")
    assert result.exit_code == 2 and "log to tensorboard" in result.output
