"""What the ninth independent hostile pass found, each now refused in one line with nothing of the user's lost or
leaked: a push that followed a link out of the dataset or took a user's file along, an --overwrite that reached a
user's file through --csv or --png, a token in a results file's command, a file-size limit while saving weights,
a codec's map too large to build, damaged reference scores, non-finite rewards and observations, imported values
outside the environment's spaces, NaN in a TRL flag, and repeated action names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from factories import one_line
from rlft.datasets import push as push_mod


@pytest.fixture
def lake(cli, tmp_path) -> Path:
    out = tmp_path / "fl"
    result = cli("data", "export-q", "frozenlake", "--out", out, "--episodes", "10")
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture
def fake_hub(monkeypatch):
    from test_push import FakeHfApi

    fake = FakeHfApi()
    monkeypatch.setattr(push_mod, "hf_api", lambda token: fake)
    monkeypatch.setattr(push_mod, "check_hub_online", lambda *a, **k: None)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    return fake


def test_a_push_never_follows_a_link_out_of_the_dataset(cli, lake, fake_hub, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("hf_NEVERUPLOADED")
    (lake / "data" / "linked.txt").symlink_to(secret)
    one_line(cli("data", "push", lake, "--repo-id", "me/x"), 2, "data/linked.txt", "nothing was pushed")
    assert fake_hub.uploaded == {} and fake_hub.calls == []


def test_a_push_leaves_a_file_rlft_did_not_write_behind_and_names_it(cli, lake, fake_hub):
    (lake / "my_notes.txt").write_text("HF_TOKEN=hf_NOTES")
    result = cli("data", "push", lake, "--repo-id", "me/x")
    assert result.exit_code == 0, result.output
    assert "my_notes.txt" in " ".join(result.output.split()) and "my_notes.txt" not in fake_hub.uploaded
    assert {"README.md", "rlft_codec.json"} <= set(fake_hub.uploaded)


def test_csv_overwrite_replaces_only_a_csv_rlft_wrote(cli, lake, tmp_path):
    profile = tmp_path / "profile"
    profile.write_text("export PATH=/opt/bin:$PATH\n")
    for target in (profile, lake / "README.md"):  # a user's file; a file of another rlft output
        before = target.read_bytes()
        result = cli("data", "export-q", "frozenlake", "--out", tmp_path / "q2", "--episodes", "10", "--csv", target,
                     "--overwrite")
        one_line(result, 2, str(target.name))
        assert target.read_bytes() == before and not (tmp_path / "q2").exists()
    csv = tmp_path / "q.csv"
    for _ in range(2):  # rlft's own CSV is replaced
        result = cli("data", "export-q", "frozenlake", "--out", tmp_path / "q3", "--episodes", "10", "--csv", csv,
                     "--overwrite")
        assert result.exit_code == 0, result.output
    assert csv.read_text().startswith("state,state_str,action,q_value_left")


def test_compare_png_never_replaces_a_file_unasked_nor_a_user_file(cli, lake, tmp_path):
    reports = []
    for policy in ("random", "q-greedy"):
        reports.append(tmp_path / f"{policy}.json")
        result = cli("eval", "--policy", policy, "--codec", lake, "--episodes", "4", "--num-envs", "2", "--out",
                     reports[-1])
        assert result.exit_code == 0, result.output
    user = tmp_path / "mine.png"
    user.write_bytes(b"not an image of rlft's")
    one_line(cli("eval", "compare", *reports, "--png", user), 2, "already exists")
    one_line(cli("eval", "compare", *reports, "--png", user, "--overwrite"), 2, "does not look like")
    assert user.read_bytes() == b"not an image of rlft's"
    plot = tmp_path / "plot.png"
    for flags in ([], ["--overwrite"]):
        result = cli("eval", "compare", *reports, "--png", plot, *flags)
        assert result.exit_code == 0, result.output
    assert plot.read_bytes()[:4] == b"\x89PNG"


def test_a_token_set_in_the_environment_of_a_reproduce_command_is_never_written(cli, tmp_path):
    token = "hf_PASS9ENVSECRET0123456789"
    report = tmp_path / "r.json"
    one_line(cli("eval", "--policy", "random", "--env", "CartPole-v1", "--episodes", "1", "--quiet", "--out",
                  report), 0)
    for command in (f"HF_TOKEN={token} make experiment NAME=t", f"make experiment NAME=t SECRET={token}x",
                    f"rlft data push x --note {token}"):  # by the variable's name, and by a token's own shape
        one_line(cli("results", "record", "t", "--seed", "0", "--report", f"r={report}", "--reproduce", command,
                      "--results-dir", tmp_path / "res"), 0)
        one_line(cli("results", "summarize", "t", "--reproduce", command, "--results-dir", tmp_path / "res"), 0)
        for written in (tmp_path / "res" / "t").iterdir():
            assert token not in written.read_bytes().decode("utf-8", "replace"), (command, written)
    assert "push x --note" in (tmp_path / "res" / "t" / "summary.json").read_text()  # the rest of it stays


@pytest.mark.slow
def test_a_file_size_limit_while_saving_the_weights_is_one_line_and_a_failed_run(tmp_path):
    """``ulimit -f``: the weights' writer (safetensors) reports EFBIG in its own words; rlft says it in one line and
    the run at --out says it failed (as on a full disk: --resume once the limit is raised)."""
    import resource
    import subprocess
    import sys

    from factories import make_lake_q_model

    data, model = make_lake_q_model(tmp_path)
    weights = max(p.stat().st_size for p in model.rglob("*.safetensors"))

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (weights // 2, weights // 2))

    rlft = str(Path(sys.executable).with_name("rlft"))
    result = subprocess.run([rlft, "train", "sft", "--dataset", str(data), "--model", str(model), "--out",
                             str(tmp_path / "run"), "--no-lora", "--max-steps", "2", "--eval-split", "none"],
                            capture_output=True, text=True, preexec_fn=limit, timeout=600)
    assert result.returncode in (1, 2), result.stderr[-2000:]
    assert "Traceback" not in result.stderr and "size limit" in " ".join(result.stderr.split()), result.stderr[-2000:]
    assert json.loads((tmp_path / "run" / "rlft_run.json").read_text())["status"] == "failed"


def test_a_codec_whose_map_is_too_large_or_malformed_is_refused_before_any_env_is_built(cli, lake):
    codec_file = lake / "rlft_codec.json"
    codec = json.loads(codec_file.read_text())
    assert codec["env_kwargs"].get("desc")  # the map the dataset was made on
    for desc, words in ((["S" + "F" * 2998 + "G"] * 3000, "cells"), ("SFFG", "list of grid rows")):
        codec_file.write_text(json.dumps({**codec, "env_kwargs": {**codec["env_kwargs"], "desc": desc}}))
        one_line(cli("eval", "--policy", "random", "--codec", lake, "--episodes", "1"), 2, words)


BROKEN_ENVS = '''
import gymnasium as gym
import numpy as np


class Broken(gym.Env):
    """CartPole's shapes; a NaN reward (reward=True) or a NaN observation (obs=True) at the third step."""

    def __init__(self, reward=False, obs=False):
        self.observation_space = gym.spaces.Box(-5.0, 5.0, (4,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.bad_reward, self.bad_obs, self.t = reward, obs, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(4, np.float32), {}

    def step(self, action):
        self.t += 1
        obs = np.full(4, np.nan if self.bad_obs and self.t >= 3 else 0.1 * self.t, np.float32)
        reward = float("nan") if self.bad_reward and self.t == 3 else 1.0
        return obs, reward, self.t >= 20, False, {}


gym.register("NanReward-v0", entry_point=Broken, kwargs={"reward": True})
gym.register("NanObs-v0", entry_point=Broken, kwargs={"obs": True})
'''


@pytest.fixture
def broken_envs(tmp_path, monkeypatch):
    import sys

    import gymnasium as gym

    (tmp_path / "broken_envs.py").write_text(BROKEN_ENVS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("RLFT_ENV_MODULES", "broken_envs")
    yield
    sys.modules.pop("broken_envs", None)
    for name in ("NanReward-v0", "NanObs-v0"):
        gym.registry.pop(name, None)


def test_an_environment_with_a_nan_reward_is_named_in_one_line_and_nothing_is_written(cli, broken_envs, tmp_path):
    report = tmp_path / "r.json"
    one_line(cli("eval", "--policy", "random", "--env", "NanReward-v0", "--episodes", "2", "--out", report), 2,
              "non-finite reward")
    assert not report.exists() and not report.with_suffix(".png").exists()


def test_an_expert_trained_on_nan_observations_isone_line(cli, broken_envs, tmp_path):
    result = cli("expert", "train", "--env", "NanObs-v0", "--algo", "ppo", "--timesteps", "256", "--out",
                 tmp_path / "e.zip")
    one_line(result, 2, "non-finite")
    assert not (tmp_path / "e.zip").exists()


def test_a_non_finite_trl_flag_is_refused_before_training(cli, lake, tmp_path):
    for value in ("nan", "inf"):
        one_line(cli("train", "sft", "--dataset", lake, "--model", tmp_path / "none", "--out", tmp_path / "run",
                      "--weight-decay", value), 2, "--weight-decay must be a finite number")
    assert not (tmp_path / "run").exists()


def test_a_codec_with_repeated_action_names_is_refused(cli, lake):
    codec_file = lake / "rlft_codec.json"
    codec = json.loads(codec_file.read_text())
    codec["params"]["action_names"] = ["LEFT"] * 4
    codec_file.write_text(json.dumps(codec))
    one_line(cli("eval", "--policy", "random", "--codec", lake, "--episodes", "1"), 2, "action_names must be distinct")


def test_an_imported_observation_outside_the_environments_space_is_refused(cli, tmp_path):
    rows = [{"observation": f"<observation>{x},0.0,0.0,0.0</observation>", "action": "<action>1</action>"}
            for x in (0.1, 99.0, -0.2)]  # CartPole's cart position lies within +-4.8
    source = tmp_path / "cartpole.json"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    one_line(cli("data", "import", "rlft4rl", source, "--env", "CartPole-v1", "--out", tmp_path / "imp"), 2,
             "1 of the file's observations lie outside", "line 2")
    assert not (tmp_path / "imp").exists()


def test_a_file_that_is_not_a_bc_policy_is_one_line(cli, tmp_path):
    notes = tmp_path / "README.md"
    notes.write_text("# notes\n")
    one_line(cli("eval", "--policy", f"bc:{notes}", "--env", "CartPole-v1", "--episodes", "1"), 2,
             "is not a behaviour-cloning policy file", max_lines=3)
