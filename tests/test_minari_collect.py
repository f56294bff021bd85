"""``rlft data collect`` / ``rlft data info`` and the Minari loading API, on tiny real Minari datasets."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import gymnasium as gym
import minari
import numpy as np
import pytest

from rlft.core.errors import InvalidInputError, OfflineError, OutputExistsError
from rlft.sources import collect as collect_mod
from rlft.sources import minari_source
from rlft.sources.collect import CollectConfig, collect_to_minari
from rlft.sources.minari_source import dataset_summary, load_minari
from rlft.sources.rollouts import add_noise, episode_blocks

EXPERTS = Path(__file__).resolve().parents[1] / "pipelines" / "experts"


def _collect(cli, *args):
    result = cli("data", "collect", *args)
    assert result.exit_code == 0, result.output
    return result


@pytest.mark.parametrize("fmt", ["hdf5", "arrow"])
def test_collect_random_cartpole_both_storages(cli, fmt):
    result = _collect(cli, "--env", "CartPole-v1", "--episodes", "5", "--dataset-id", f"cartpole/random-{fmt}-v0",
                      "--num-envs", "2", "--seed", "3", "--data-format", fmt)
    assert "mean return" in result.output and "steps/s" in result.output
    ds = minari.load_dataset(f"cartpole/random-{fmt}-v0")
    assert ds.total_episodes == 5 and ds.storage.metadata["data_format"] == fmt
    meta = ds.storage.metadata
    assert meta["ref_min_score"] == 22.1 and meta["ref_max_score"] == 500.0
    assert meta["rlft"]["seed"] == 3 and meta["rlft"]["num_envs"] == 2 and meta["author"] == {"rlft"}
    seeds = [m["seed"] for m in ds.storage.get_episode_metadata(range(5))]
    assert seeds == [3, 4, 5, 6, 7]
    for ep in ds.iterate_episodes():
        assert len(ep.observations) == len(ep.actions) + 1
        assert ep.terminations[-1] and not ep.truncations.any()  # random CartPole falls before step 500

    info = cli("data", "info", f"cartpole/random-{fmt}-v0", "--json")
    summary = json.loads(info.output)
    assert summary["episodes"] == 5 and summary["storage_format"] == fmt and summary["env_id"] == "CartPole-v1"
    assert summary["episodes_terminated"] == 5 and summary["seed"] == 3
    table = cli("data", "info", f"cartpole/random-{fmt}-v0")
    assert table.exit_code == 0 and "return_mean" in table.output


def test_truncation_kept_apart_from_termination(cli):
    _collect(cli, "--env", "CartPole-v1", "--episodes", "3", "--dataset-id", "cartpole/short-v0",
             "--max-episode-steps", "5")
    ds = minari.load_dataset("cartpole/short-v0")
    assert ds.env_spec.max_episode_steps == 5
    for ep in ds.iterate_episodes():
        assert len(ep.rewards) == 5 and ep.truncations[-1] and not ep.terminations.any()


@pytest.fixture
def ppo_zip(tmp_path):
    """A deterministic SB3 policy (PPO, untrained): noise is the only randomness in its episodes."""
    from stable_baselines3 import PPO

    path = tmp_path / "ppo.zip"
    PPO("MlpPolicy", gym.make("CartPole-v1"), seed=0, device="cpu").save(path)
    return path


def test_seeds_reproduce_the_same_episodes_whatever_the_num_envs(cli, ppo_zip):
    for name, num_envs, noise in (("a", "1", "0.3"), ("b", "2", "0.3"), ("c", "4", "0.3"), ("d", "4", "0")):
        _collect(cli, "--env", "CartPole-v1", "--policy", ppo_zip, "--episodes", "6", "--dataset-id",
                 f"cartpole/{name}-v0", "--seed", "11", "--num-envs", num_envs, "--noise", noise)
    a, b, c, d = (minari.load_dataset(f"cartpole/{n}-v0") for n in "abcd")
    for ea, eb, ec in zip(a.iterate_episodes(), b.iterate_episodes(), c.iterate_episodes(), strict=True):
        assert np.array_equal(ea.actions, eb.actions) and np.array_equal(ea.actions, ec.actions)
        assert np.array_equal(ea.observations, eb.observations) and np.array_equal(ea.observations, ec.observations)
    # the noise really acts: the same policy and seeds without it play other actions
    assert any(not np.array_equal(ea.actions, ed.actions) for ea, ed in
               zip(a.iterate_episodes(), d.iterate_episodes(), strict=True))
    # The recorded seed is the reset seed: the first observation is reproduced by a fresh env.
    first = list(a.storage.get_episode_metadata([4]))[0]
    obs, _ = gym.make("CartPole-v1").reset(seed=first["seed"])
    assert first["seed"] == 15 and np.allclose(obs, a[4].observations[0])


def test_clean_labels_record_the_policy_action_on_the_noisy_path(cli, tmp_path):
    """DART-style data: the env is stepped with the noisy action (the states of a --noise collection), the
    dataset records the policy's own action in each of those states."""
    from stable_baselines3 import PPO

    policy = tmp_path / "pendulum.zip"
    PPO("MlpPolicy", gym.make("Pendulum-v1"), seed=0, device="cpu").save(policy)
    common = ("--env", "Pendulum-v1", "--policy", policy, "--episodes", "3", "--seed", "5", "--max-episode-steps",
              "30", "--noise", "0.5")
    _collect(cli, *common, "--num-envs", "2", "--dataset-id", "pendulum/executed-v0")
    _collect(cli, *common, "--num-envs", "2", "--dataset-id", "pendulum/clean-v0", "--label-actions", "clean")
    _collect(cli, *common, "--num-envs", "3", "--dataset-id", "pendulum/clean3-v0", "--label-actions", "clean")
    executed, clean, clean3 = (minari.load_dataset(f"pendulum/{n}-v0") for n in ("executed", "clean", "clean3"))
    model = PPO.load(policy, device="cpu")
    for e, c, c3 in zip(executed.iterate_episodes(), clean.iterate_episodes(), clean3.iterate_episodes(),
                        strict=True):
        assert np.array_equal(e.observations, c.observations)  # the same noisy path ...
        assert np.allclose(c.observations, c3.observations, atol=1e-5)  # ... whatever the batching
        own = model.predict(c.observations[:-1], deterministic=True)[0]
        assert np.allclose(c.actions, own, atol=1e-5)  # ... labelled with the policy's own action
        assert not np.allclose(e.actions, own, atol=1e-2)  # the executed labels carry the noise
    meta = clean.storage.metadata
    assert meta["rlft"]["action_labels"] == "clean" and "DART" in meta["algorithm_name"]
    assert executed.storage.metadata["rlft"]["action_labels"] == "executed"
    result = cli("data", "collect", "--env", "Pendulum-v1", "--policy", policy, "--episodes", "1",
                 "--dataset-id", "pendulum/x-v0", "--label-actions", "clean")
    assert result.exit_code == 2 and "--noise > 0" in result.output
    # MuJoCo envs: Minari records the env spec, which is the plain env's (the noise belongs to the collection)
    _collect(cli, "--env", "HalfCheetah-v5", "--policy", EXPERTS / "halfcheetah-medium-sac.zip", "--episodes",
             "2", "--max-episode-steps", "5", "--num-envs", "2", "--noise", "0.1", "--label-actions", "clean",
             "--dataset-id", "mujoco/clean-v0")
    spec = minari.load_dataset("mujoco/clean-v0").env_spec
    assert spec.id == "HalfCheetah-v5" and not spec.additional_wrappers


def test_halfcheetah_normalized_score_metadata(cli):
    _collect(cli, "--env", "HalfCheetah-v5", "--episodes", "2", "--dataset-id", "mujoco/halfcheetah/tiny-v0",
             "--max-episode-steps", "20", "--num-envs", "2", "--noise", "0.1")
    ds = load_minari("mujoco/halfcheetah/tiny-v0")
    meta = ds.storage.metadata
    assert meta["ref_min_score"] == -280.178953 and meta["ref_max_score"] == 12135.0
    assert minari.get_normalized_score(ds, np.array([12135.0]))[0] == pytest.approx(1.0)
    summary = dataset_summary(ds)
    expected = 100 * (summary["return_mean"] + 280.178953) / (12135.0 + 280.178953)
    assert summary["normalized_score_x100"] == pytest.approx(expected)
    assert summary["episodes_truncated"] == 2 and summary["steps"] == 40
    assert any("mujoco==" in r for r in meta["requirements"])
    for ep in ds.iterate_episodes():  # Gaussian noise stays within the action bounds
        assert np.all(np.abs(ep.actions) <= 1.0)


def test_collect_with_expert_policy(cli, tmp_path):
    from rlft.sources.experts import ExpertConfig, train_expert

    out = tmp_path / "ppo.zip"
    train_expert(ExpertConfig(env_id="CartPole-v1", out=out, timesteps=512, eval_episodes=1, eval_freq=0))
    _collect(cli, "--env", "CartPole-v1", "--policy", out, "--episodes", "2", "--dataset-id", "cartpole/ppo-v0",
             "--max-episode-steps", "50")
    meta = minari.load_dataset("cartpole/ppo-v0").storage.metadata
    assert meta["rlft"]["policy"] == str(out) and meta["rlft"]["policy_metadata"]["algo"] == "ppo"
    assert meta["algorithm_name"].startswith("PPO expert")
    result = cli("data", "collect", "--env", "Acrobot-v1", "--policy", out, "--episodes", "1",
                 "--dataset-id", "acrobot/ppo-v0")
    assert result.exit_code == 2 and "trained on CartPole-v1" in result.output


def test_collect_errors(cli):
    result = cli("data", "collect", "--env", "CartPole-v9", "--episodes", "1", "--dataset-id", "cartpole/x-v0")
    assert result.exit_code == 2 and "unknown environment id" in result.output and "CartPole-v1" in result.output
    result = cli("data", "collect", "--env", "CartPole-v1", "--episodes", "1", "--dataset-id", "cartpole/random")
    assert result.exit_code == 2 and "cartpole/random-v0" in result.output
    result = cli("data", "collect", "--env", "CartPole-v1", "--episodes", "1", "--dataset-id", "cp/x-v0",
                 "--data-format", "csv")
    assert result.exit_code == 2 and "--data-format" in result.output
    result = cli("data", "collect", "--env", "CartPole-v1", "--episodes", "1", "--dataset-id", "cp/x-v0",
                 "--policy", "nope.zip")
    assert result.exit_code == 2 and "nope.zip" in result.output
    result = cli("data", "collect", "--env", "CartPole-v1", "--episodes", "1", "--dataset-id", "cp/x-v0",
                 "--noise", "2")
    assert result.exit_code == 2 and "probability" in result.output


def test_existing_id_refused_and_replaced_only_on_success(cli, monkeypatch):
    _collect(cli, "--env", "CartPole-v1", "--episodes", "2", "--dataset-id", "cartpole/keep-v0")
    result = cli("data", "collect", "--env", "CartPole-v1", "--episodes", "4", "--dataset-id", "cartpole/keep-v0")
    assert result.exit_code == 2 and "already exists" in result.output
    assert minari.load_dataset("cartpole/keep-v0").total_episodes == 2

    def broken(*args, **kwargs):
        raise RuntimeError("simulated crash mid-collection")

    config = CollectConfig(env_id="CartPole-v1", dataset_id="cartpole/keep-v0", episodes=4, overwrite=True)
    real = collect_mod.run_episodes
    monkeypatch.setattr(collect_mod, "run_episodes", broken)
    with pytest.raises(RuntimeError, match="simulated"):
        collect_to_minari(config)
    assert minari.load_dataset("cartpole/keep-v0").total_episodes == 2
    assert list(minari.list_local_datasets()) == ["cartpole/keep-v0"]  # no temporary leftovers listed
    monkeypatch.setattr(collect_mod, "run_episodes", real)  # not undo(): that would drop the isolated data path

    _collect(cli, "--env", "CartPole-v1", "--episodes", "4", "--dataset-id", "cartpole/keep-v0", "--overwrite")
    assert minari.load_dataset("cartpole/keep-v0").total_episodes == 4
    with pytest.raises(OutputExistsError):
        collect_to_minari(CollectConfig(env_id="CartPole-v1", dataset_id="cartpole/keep-v0", episodes=1))


@pytest.mark.filterwarnings("ignore::UserWarning")  # Minari nags about optional metadata left out
def test_load_minari_by_path_and_foreign_dataset(tmp_path):
    # A dataset written with Minari directly (not rlft), in Arrow storage, without reference scores.
    env = minari.DataCollector(gym.make("CartPole-v1"), data_format="arrow")
    for seed in range(3):
        env.reset(seed=seed)
        done = False
        while not done:
            _, _, term, trunc, _ = env.step(env.action_space.sample())
            done = term or trunc
    env.create_dataset("other/tool-v1", algorithm_name="random", author="someone", description="made elsewhere")
    env.close()

    by_id = load_minari("other/tool-v1")
    folder = by_id.storage.data_path.parent
    for target in (folder, folder / "data", str(folder)):
        assert load_minari(target).total_episodes == 3
    summary = dataset_summary(by_id)
    assert summary["storage_format"] == "arrow" and summary["normalized_score_x100"] is None
    assert summary["episodes"] == 3 and summary["return_min"] <= summary["return_mean"] <= summary["return_max"]
    with pytest.raises(InvalidInputError, match="not a Minari dataset folder"):
        load_minari(tmp_path)
    with pytest.raises(InvalidInputError, match="not in"):
        load_minari("other/missing-v0")
    with pytest.raises(InvalidInputError, match="-v0"):
        load_minari("other/noversion")


def _closed_local_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_offline_download_fails_fast(cli, monkeypatch):
    # Only loopback: the probe is pointed at a closed local port, so nothing leaves the machine.
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(minari_source, "remote_endpoint", lambda: ("127.0.0.1", _closed_local_port()))
    start = time.perf_counter()
    with pytest.raises(OfflineError, match="cannot reach the Minari remote"):
        load_minari("mujoco/halfcheetah/medium-v0", download=True)
    assert time.perf_counter() - start < 3.5

    result = cli("data", "info", "mujoco/halfcheetah/medium-v0", "--download")
    assert result.exit_code == 1 and "cannot reach" in result.output

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OfflineError, match="HF_HUB_OFFLINE"):
        load_minari("mujoco/halfcheetah/medium-v0", download=True)


def test_remote_endpoint_follows_minari_remote(monkeypatch):
    monkeypatch.delenv("MINARI_REMOTE", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    assert minari_source.remote_endpoint() == ("huggingface.co", 443)
    monkeypatch.setenv("MINARI_REMOTE", "gcp://minari-datasets")
    assert minari_source.remote_endpoint() == ("storage.googleapis.com", 443)


def test_blocks_and_noise_helpers():
    assert [list(b) for b in episode_blocks(5, 3)] == [[0, 1], [2, 3], [4]]
    assert sum(len(b) for b in episode_blocks(7, 7)) == 7
    box = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    rngs = [np.random.default_rng(i) for i in range(4)]
    noisy = add_noise(box, np.full((4, 3), 0.99, np.float32), 0.5, rngs)
    assert noisy.dtype == np.float32 and np.all(np.abs(noisy) <= 1.0) and not np.allclose(noisy, 0.99)
    # noise 1.0 on Discrete(2): every action is replaced by a uniform one, so about half become 1
    many = [np.random.default_rng(i) for i in range(2000)]
    flipped = add_noise(gym.spaces.Discrete(2), np.zeros(2000, np.int64), 1.0, many)
    assert 0.45 < flipped.mean() < 0.55
    assert add_noise(gym.spaces.Discrete(2), np.zeros(2000, np.int64), 0.2, many).mean() < 0.15
    assert np.array_equal(add_noise(gym.spaces.Discrete(2), np.zeros(4, np.int64), 0.0, rngs), np.zeros(4))


def test_spaces_print_in_one_short_line():
    from rlft.sources.minari_source import space_line

    charset = "".join(chr(c) for c in range(32, 20000))  # a large Unicode charset: its text is tens of kilobytes
    assert space_line(gym.spaces.Text(50, charset=charset)) == "Text(min_length=1, max_length=50, 19,968 characters)"
    assert space_line(gym.spaces.Box(-1, 1, (3, 3, 3))) == "Box(-1.0, 1.0, (3, 3, 3), float32)"
    wide = space_line(gym.spaces.Box(np.zeros(200), np.arange(1, 201)))
    assert len(wide) == 120 and wide.endswith("...")


def test_collect_writes_into_the_data_path_given(cli, tmp_path):
    import os

    from rlft.sources.minari_source import datasets_root

    result = cli("data", "collect", "--env", "CartPole-v1", "--episodes", "2", "--dataset-id", "cp/random-v0",
                 "--data-path", tmp_path / "mine")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "mine" / "cp" / "random-v0" / "data").is_dir()
    assert not (datasets_root() / "cp").exists()  # the default folder is untouched, and the variable restored
    assert os.environ["MINARI_DATASETS_PATH"] != str(tmp_path / "mine")
    result = cli("data", "serialize", tmp_path / "mine" / "cp" / "random-v0", "--out", tmp_path / "ds")
    assert result.exit_code == 0, result.output


def test_collect_into_a_relative_data_path(cli, tmp_path, monkeypatch):
    """Minari joins a relative datasets root onto itself when it writes: rlft hands it an absolute one."""
    monkeypatch.chdir(tmp_path)
    result = cli("data", "collect", "--env", "CartPole-v1", "--episodes", "2", "--dataset-id", "cp/random-v0",
                 "--data-path", "runs/minari")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "runs" / "minari" / "cp" / "random-v0" / "data").is_dir()


def test_stochastic_collection_records_the_policys_own_samples(cli):
    """--stochastic: SAC's sampled actions (D4RL's way), reproducible with the same seed, unlike the mean's;
    refused without a policy."""
    expert = EXPERTS / "halfcheetah-medium-sac.zip"
    common = ("--env", "HalfCheetah-v5", "--policy", expert, "--episodes", "2", "--max-episode-steps", "30",
              "--num-envs", "2", "--seed", "4")
    _collect(cli, *common, "--dataset-id", "hc/mean-v0")
    _collect(cli, *common, "--stochastic", "--dataset-id", "hc/sampled-v0")
    _collect(cli, *common, "--stochastic", "--dataset-id", "hc/sampled-v1")
    mean, sampled, again = (np.concatenate([e.actions for e in minari.load_dataset(i).iterate_episodes()])
                            for i in ("hc/mean-v0", "hc/sampled-v0", "hc/sampled-v1"))
    np.testing.assert_array_equal(sampled, again)
    assert np.abs(sampled - mean).mean() > 0.05
    meta = minari.load_dataset("hc/sampled-v0").storage.metadata
    assert meta["rlft"]["stochastic"] is True and meta["rlft"]["deterministic_policy"] is False
    assert "sampled from the policy" in meta["algorithm_name"]
    result = cli("data", "collect", "--env", "CartPole-v1", "--episodes", "1", "--stochastic", "--dataset-id",
                 "cp/x-v0")
    assert result.exit_code == 2 and "--stochastic samples a policy's own action distribution" in result.output


def test_combine_keeps_every_episode_and_the_reference_scores(cli):
    """D4RL's medium-expert is medium and expert together: Minari's combine_datasets behind one command; datasets of
    another env are refused by name, and nothing is written."""
    from factories import make_minari_dataset

    make_minari_dataset("cartpole/a-v0", episodes=3, seed=0, ref_scores=(22.1, 500.0))
    make_minari_dataset("cartpole/b-v0", episodes=2, seed=7, ref_scores=(22.1, 500.0))
    make_minari_dataset("pendulum/c-v0", env_id="Pendulum-v1", episodes=1, max_steps=5)
    result = cli("data", "combine", "cartpole/a-v0", "cartpole/b-v0", "--dataset-id", "cartpole/ab-v0")
    assert result.exit_code == 0, result.output
    ds = minari.load_dataset("cartpole/ab-v0")
    a, b = minari.load_dataset("cartpole/a-v0"), minari.load_dataset("cartpole/b-v0")
    assert ds.total_episodes == 5 and ds.total_steps == a.total_steps + b.total_steps
    meta = ds.storage.metadata
    assert meta["combined_from"] == ["cartpole/a-v0", "cartpole/b-v0"]
    assert (meta["ref_min_score"], meta["ref_max_score"]) == (22.1, 500.0)
    result = cli("data", "combine", "cartpole/a-v0", "pendulum/c-v0", "--dataset-id", "cartpole/ac-v0")
    assert result.exit_code == 2 and "share one env" in result.output
    assert not (minari_source.datasets_root() / "cartpole" / "ac-v0").exists()
    result = cli("data", "combine", "cartpole/a-v0", "cartpole/b-v0", "--dataset-id", "cartpole/ab-v0")
    assert result.exit_code == 2 and "already exists" in result.output


def test_overwrite_keeps_a_minari_folder_holding_a_users_file(cli, tmp_path):
    """A Minari dataset rlft collected lists its files; a file a user put in it keeps the dataset on --overwrite."""
    from rlft.sources.minari_source import datasets_root

    _collect(cli, "--env", "CartPole-v1", "--episodes", "2", "--dataset-id", "cartpole/notes-v0")
    folder = datasets_root() / "cartpole/notes-v0"
    assert (folder / ".rlft_manifest.json").is_file()
    _collect(cli, "--env", "CartPole-v1", "--episodes", "3", "--dataset-id", "cartpole/notes-v0", "--overwrite")
    (folder / "notes.txt").write_text("mine")
    result = cli("data", "collect", "--env", "CartPole-v1", "--episodes", "4", "--dataset-id", "cartpole/notes-v0",
                 "--overwrite")
    assert result.exit_code == 2 and "notes.txt" in result.output
    assert (folder / "notes.txt").read_text() == "mine"
    assert minari.load_dataset("cartpole/notes-v0").total_episodes == 3


def test_a_refused_collect_is_its_error_line_first(cli, tmp_path):
    """The bar is opened after the checks: a refusal printed a blank line before its error (hostile pass 11)."""
    result = cli("data", "collect", "--env", "CartPole-v1", "--episodes", "1", "--dataset-id", "a/b-v0",
                 "--data-path", tmp_path)
    assert result.exit_code == 2 and result.output.startswith("Error: dataset id 'a/b-v0'"), repr(result.output)


def test_a_dataset_link_that_loops_is_named_as_such(cli, tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    result = cli("train", "sft", "--dataset", tmp_path / "a", "--model", "m", "--out", tmp_path / "run")
    assert result.exit_code == 2 and "symbolic link that leads nowhere" in " ".join(result.output.split())
    assert not (tmp_path / "run").exists()
