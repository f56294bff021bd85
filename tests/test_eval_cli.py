"""``rlft eval`` and ``rlft eval compare``: report files and schema, and one-line errors for bad input."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from eval_factories import frozenlake_dataset

REPORT_TYPES = {
    "rlft_report_version": int,
    "created": str,
    "env_id": str,
    "env_kwargs": dict,
    "policy": str,
    "policy_kind": str,
    "policy_info": dict,
    "episodes": int,
    "num_envs": int,
    "num_envs_requested": int,
    "seed": int,
    "action_scale": float,
    "seeds": list,
    "returns": list,
    "lengths": list,
    "terminated": list,
    "return_mean": float,
    "return_std": float,
    "return_min": float,
    "return_max": float,
    "return_stderr": float,
    "length_mean": float,
    "length_min": int,
    "length_max": int,
    "decisions": int,
    "invalid_actions": int,
    "invalid_examples": list,
    "invalid_reasons": dict,
    "expert_agreement_steps": int,
    "env_steps": int,
    "wall_seconds": float,
    "policy_seconds": float,
    "env_seconds": float,
    "env_steps_per_second": float,
    "constrained": bool,
    "notes": list,
    "videos": list,
    "versions": dict,
    "files": dict,
}
OPTIONAL = {  # None when not applicable
    "success_rate": float,
    "optimal_success_exact": float,
    "cache_hits": int,
    "policy_map": dict,
    "normalized_score": float,
    "reference_scores": dict,
    "invalid_action_rate": float,
    "expert_agreement": float,
    "expert_agreement_kind": str,
    "expert_mean_abs_diff": float,
    "generate_calls": int,
    "new_tokens": int,
    "codec": str,
    "codec_source": str,
    "constrained_precompute": dict,
    "max_episode_steps": int,
}


def check_schema(report: dict) -> None:
    assert set(report) == set(REPORT_TYPES) | set(OPTIONAL), set(report) ^ (set(REPORT_TYPES) | set(OPTIONAL))
    for key, tp in REPORT_TYPES.items():
        assert isinstance(report[key], tp) and not (tp is int and isinstance(report[key], bool)), key
    for key, tp in OPTIONAL.items():
        assert report[key] is None or isinstance(report[key], tp), key
    n = report["episodes"]
    assert len(report["returns"]) == len(report["lengths"]) == len(report["seeds"]) == n
    assert report["seeds"] == [report["seed"] + i for i in range(n)]
    assert all(isinstance(r, float) for r in report["returns"]) and all(isinstance(x, int) for x in report["lengths"])


def test_report_files_schema_and_compare(cli, tmp_path, tmp_path_factory):
    data = frozenlake_dataset(tmp_path_factory)
    q = tmp_path / "reports" / "q.json"
    result = cli("eval", "--policy", "q-greedy", "--codec", data, "--episodes", "20", "--num-envs", "4", "--seed",
                 "5", "--out", q)
    assert result.exit_code == 0, result.output
    assert "success rate" in result.output and "Evaluation" in result.output
    report = json.loads(q.read_text())
    check_schema(report)
    assert report["codec"] == "frozenlake-grid (4x4)" and report["seed"] == 5
    # success is reaching the goal (return 1) in each of the 20 episodes the report lists
    assert report["success_rate"] == pytest.approx(sum(r > 0 for r in report["returns"]) / 20)
    assert report["optimal_success_exact"] == pytest.approx(0.7401649, abs=1e-6)  # from the dataset's exact solve
    # FrozenLake reports carry the policy on the grid: every visited state's actions, every state's optimal set
    pm = report["policy_map"]
    assert pm["rows"] == ["SFFF", "FHFH", "FFFH", "HFFG"]
    assert pm["optimal"]["6"] == [0, 2] and set(pm["optimal"]) == {str(s) for s in (0, 1, 2, 3, 4, 6, 8, 9, 10, 13, 14)}
    assert "0" in pm["taken"] and sum(sum(c.values()) for c in pm["taken"].values()) == report["env_steps"]
    for state, counts in pm["taken"].items():  # q-greedy takes one optimal action in each state it visits
        assert len(counts) == 1 and int(next(iter(counts))) in pm["optimal"][state]
    short = tmp_path / "reports" / "short.json"  # another step limit: the exact rate (100 steps) does not apply
    result = cli("eval", "--policy", "q-greedy", "--codec", data, "--episodes", "4", "--max-episode-steps", "20",
                 "--out", short)
    assert result.exit_code == 0, result.output
    assert json.loads(short.read_text())["optimal_success_exact"] is None
    assert q.with_suffix(".png").stat().st_size > 1000
    tb = q.with_name("q_tb")
    assert any(p.name.startswith("events.out.tfevents") for p in tb.iterdir())
    assert report["files"] == {"json": str(q), "png": str(q.with_suffix(".png")), "tensorboard": str(tb)}

    r = tmp_path / "reports" / "random.json"
    result = cli("eval", "--env", "CartPole-v1", "--policy", "random", "--episodes", "30", "--num-envs", "50",
                 "--out", r)
    assert result.exit_code == 0, result.output
    assert "using 30 environments" in result.output  # K > N: capped, and said so
    report = json.loads(r.read_text())
    check_schema(report)
    assert report["num_envs"] == 30 and report["num_envs_requested"] == 50 and report["success_rate"] is None
    assert report["optimal_success_exact"] is None and report["policy_map"] is None
    assert report["normalized_score"] is not None and report["notes"]

    result = cli("eval", "compare", q, r, "--png", tmp_path / "reports" / "compare.png")
    assert result.exit_code == 0, result.output
    assert "q-greedy" in result.output and "random" in result.output and "different environments" in result.output
    assert (tmp_path / "reports" / "compare.png").stat().st_size > 1000
    result = cli("eval", "compare", q, r, "--png", tmp_path / "reports" / "compare.jpg")
    assert result.exit_code == 2 and "--png must name a .png file" in result.output
    assert "q-greedy" not in result.output  # refused before the table is printed

    # the same seed gives the same report numbers; an existing report is not overwritten silently
    result = cli("eval", "--env", "CartPole-v1", "--policy", "random", "--episodes", "30", "--out", r)
    assert result.exit_code == 2 and "already exists" in result.output
    result = cli("eval", "--env", "CartPole-v1", "--policy", "random", "--episodes", "30", "--out", r, "--overwrite")
    assert result.exit_code == 0 and json.loads(r.read_text())["returns"] == report["returns"]


@pytest.mark.parametrize(("args", "message"), [
    (["--policy", "q-greedy", "--env", "CartPole-v1"], "needs --codec"),
    (["--policy", "random"], "no environment"),
    (["--policy", "random", "--env", "CartPol-v1"], "unknown environment id"),
    (["--policy", "sarsa", "--env", "CartPole-v1"], "unknown policy"),
    (["--policy", "expert", "--env", "CartPole-v1"], "needs a file"),
    (["--policy", "expert:/no/such.zip", "--env", "CartPole-v1"], "does not exist"),
    (["--policy", "bc:/no/such.pt", "--env", "CartPole-v1"], "does not exist"),
    (["--policy", "llm:/no/such/model", "--env", "CartPole-v1"], "does not exist"),
    (["--policy", "random", "--env", "CartPole-v1", "--episodes", "0"], "at least 1"),
    (["--policy", "random", "--env", "CartPole-v1", "--out", "report.txt"], ".json"),
    (["--policy", "random", "--env", "CartPole-v1", "--backend", "vllm"], "--backend must be"),
    (["--policy", "random", "--env", "CartPole-v1", "--backend", "openai"], "for llm policies"),
    (["--policy", "random", "--env", "CartPole-v1", "--temperature", "-1"], "--temperature must be >= 0"),
    (["--policy", "random", "--env", "CartPole-v1", "--top-p", "0"], "--top-p must be in (0, 1]"),
    (["--policy", "online", "--env", "CartPole-v1"], "needs a file"),
    (["--policy", "online:/no/such/run", "--env", "CartPole-v1"], "not an online RUN folder"),
])
def test_bad_input_is_a_one_line_error(cli, args, message):
    result = cli("eval", *args)
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


def test_codec_that_does_not_match_the_env_says_what_differs(cli, tmp_path_factory):
    data = frozenlake_dataset(tmp_path_factory)
    result = cli("eval", "--policy", "q-greedy", "--codec", data, "--env", "CartPole-v1", "--episodes", "1")
    assert result.exit_code == 2
    assert "does not match CartPole-v1" in result.output
    assert "observation space Discrete(16) vs Box(4,)" in result.output
    import gymnasium as gym

    taxi = "Taxi-v4" if "Taxi-v4" in gym.registry else "Taxi-v3"  # gymnasium 1.1 (the declared minimum) has v3
    result = cli("eval", "--policy", "q-greedy", "--codec", data, "--env", taxi, "--episodes", "1")
    assert result.exit_code == 2 and "Discrete(16) (start 0) vs Discrete(500)" in result.output
    assert "action space Discrete(4) (start 0) vs Discrete(6)" in result.output


def test_no_arguments_prints_help_and_compare_checks_files(cli, tmp_path):
    result = cli("eval")
    assert result.exit_code == 0 and "--policy" in result.output and "compare" in result.output
    result = cli("eval", "compare", tmp_path / "missing.json")
    assert result.exit_code == 2 and "does not exist" in result.output
    (tmp_path / "other.json").write_text("{}")
    result = cli("eval", "compare", tmp_path / "other.json")
    assert result.exit_code == 2 and "not an rlft eval report" in result.output


def test_video_without_moviepy_is_a_one_line_error(cli, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "moviepy", None)  # as if the video extra were not installed
    result = cli("eval", "--env", "CartPole-v1", "--policy", "random", "--episodes", "2", "--video",
                 tmp_path / "videos")
    assert result.exit_code == 2 and "moviepy" in result.output and "pip install" in result.output
    assert not (tmp_path / "videos").exists()


def test_video_records_the_first_episodes_frame_by_frame(cli, tmp_path):
    """CartPole rendered to rgb_array (the video extra is in the test extra, so CI runs this for real)."""
    pytest.importorskip("moviepy")
    imageio = pytest.importorskip("imageio.v2")
    out = tmp_path / "r.json"
    result = cli("eval", "--env", "CartPole-v1", "--policy", "random", "--episodes", "4", "--num-envs", "2",
                 "--seed", "5", "--video", tmp_path / "videos", "--video-episodes", "2", "--out", out)
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    names = sorted(p.name for p in (tmp_path / "videos").iterdir())
    assert names == ["episode-0000-seed-5.mp4", "episode-0001-seed-6.mp4"]  # only the first 2 episodes
    assert [Path(v).name for v in report["videos"]] == names
    for name, length in zip(names, report["lengths"][:2], strict=True):
        with imageio.get_reader(tmp_path / "videos" / name, "ffmpeg") as reader:
            frames = [frame for frame in reader]
        # the reset frame and one per step (the MP4 encoder may repeat the last frame once)
        assert length + 1 <= len(frames) <= length + 2, (name, length, len(frames))
        assert frames[0].shape == (400, 600, 3)
        assert not np.array_equal(frames[0], frames[length])  # the cart and pole moved
