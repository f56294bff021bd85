"""The closed-loop check while training: episodes played by the model being trained, logged beside the decision
accuracy, scored as `rlft eval` scores them, and a stop on their return."""

from __future__ import annotations

import json

import pytest

from rlft.train.closed_loop import CHECK_SEED_OFFSET


@pytest.fixture(scope="module")
def cli_module():
    from typer.testing import CliRunner

    from rlft.cli.main import app

    return lambda *args: CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def lake(tmp_path_factory, cli_module):
    out = tmp_path_factory.mktemp("closed-loop") / "fl4"
    assert cli_module("data", "export-q", "frozenlake", "--out", out, "--episodes", "10").exit_code == 0
    return out


@pytest.fixture(scope="module")
def tiny(lake, cli_module):
    out = lake.parent / "tiny"
    assert cli_module("model", "init", "--dataset", lake, "--out", out, "--seed", "0").exit_code == 0
    return out


@pytest.mark.slow
def test_check_episodes_are_logged_and_play_as_rlft_eval_plays(lake, tiny, cli_module, tmp_path):
    run = tmp_path / "sft"
    result = cli_module("train", "sft", "--config", "pipelines/sft.yaml", "--dataset", lake, "--model", tiny,
                        "--out", run, "--no-lora", "--eval-split", "none", "--max-steps", "60", "--check-steps", "30",
                        "--check-episodes", "12", "--seed", "3", "--save-steps", "1000")
    assert result.exit_code == 0, result.output
    record = json.loads((run / "summary.json").read_text())["criterion"]
    episodes = record["episodes"]
    assert episodes["episodes"] == 12 and episodes["first_seed"] == CHECK_SEED_OFFSET + 3000
    assert [h[0] for h in episodes["history"]] == [0, 30, 60]
    assert all(0.0 <= mean <= 1.0 and low in (0.0, 1.0) for _, mean, low, _ in episodes["history"])
    assert record["final_return"] > 0.0  # trained: some episodes reach the goal
    assert "closed loop at step 60: return" in " ".join(result.output.split())
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logged = EventAccumulator(str(run / "logs")).Reload().Scalars("train/check_return")
    assert [(e.step, pytest.approx(e.value, abs=1e-4)) for e in logged] == [(s, m) for s, m, _, _ in
                                                                            episodes["history"][1:]]
    # the final check's episodes, replayed by rlft eval on the same seeds with the saved model: the same return
    report = tmp_path / "eval.json"
    result = cli_module("eval", "--policy", f"llm:{run}", "--episodes", "12", "--num-envs", "4", "--constrained",
                        "--seed", episodes["first_seed"], "--out", report)
    assert result.exit_code == 0, result.output
    assert json.loads(report.read_text())["return_mean"] == pytest.approx(record["final_return"], abs=1e-9)


@pytest.mark.slow
def test_training_stops_once_the_check_return_reaches_its_target(tmp_path_factory, tmp_path, capsys):
    from eval_factories import minari_dataset_folder, tiny_model
    from rlft.core.console import console
    from rlft.train.sft import run_sft
    from rlft.train.sft_config import SFTStageConfig

    data = minari_dataset_folder(tmp_path_factory, "Pendulum-v1", "binned", episodes=4, max_steps=20, bins=16)
    model = tiny_model(tmp_path_factory, data, "closed-loop-pendulum")
    # Pendulum's reward is at least -16.3 a step: 10 steps return more than -200, so the first check passes
    config = SFTStageConfig.of(dataset=str(data), model=str(model), out=tmp_path / "run", lora=False, max_steps=20,
                            check_steps=5, check_episodes=3, check_max_episode_steps=10, stop_at_return=-200.0,
                            eval_split="none", save_steps=1000)
    with console.capture() as captured:
        info = run_sft(config)
    record = info["metrics"]["criterion"]
    assert record["reached"] and record["reached_at_step"] == 0
    assert info["metrics"]["global_step"] < 20
    step, mean, low, score = record["episodes"]["history"][0]
    assert step == 0 and -200.0 <= low <= mean < 0.0
    assert score is None  # references are for whole episodes, not ones cut at 10 steps
    assert "return target -200 reached at step 0" in captured.get()


@pytest.mark.parametrize("flags,message", [
    (["--check-episodes", "2"], "play episodes every --check-steps N"),
    (["--check-steps", "5", "--stop-at-return", "1"], "need --check-episodes N"),
    (["--check-steps", "5", "--check-max-episode-steps", "10"], "need --check-episodes N"),
    (["--check-steps", "5", "--keep-best-check"], "need --check-episodes N"),
    (["--check-steps", "5", "--check-episodes", "-1"], "Invalid value for '--check-episodes'"),
    (["--check-steps", "5", "--check-episodes", "2", "--stop-at-return", "nan"], "must be a finite number"),
])
def test_bad_closed_loop_settings_fail_before_anything_is_written(lake, tiny, cli_module, tmp_path, flags, message):
    run = tmp_path / "run"
    result = cli_module("train", "sft", "--dataset", lake, "--model", tiny, "--out", run, "--no-lora", *flags)
    assert result.exit_code == 2
    assert message in result.output
    assert not run.exists()


@pytest.mark.slow
def test_a_run_whose_checked_return_falls_below_its_start_warns(lake, tiny, cli_module, tmp_path):
    """A trained policy continued with a learning rate that wrecks it: the first check whose return falls below the
    start's by more than the noise is warned about and recorded; a run that keeps its level is not."""
    start = tmp_path / "start"
    common = ("--dataset", lake, "--no-lora", "--eval-split", "none", "--seed", "3", "--save-steps", "1000",
              "--check-episodes", "12")
    assert cli_module("train", "sft", "--config", "pipelines/sft.yaml", "--model", tiny, "--out", start,
                      "--max-steps", "60", "--check-steps", "60", *common).exit_code == 0
    assert json.loads((start / "summary.json").read_text())["criterion"]["final_return"] > 0.3
    wrecked = tmp_path / "wrecked"
    result = cli_module("train", "sft", "--model", start, "--out", wrecked, "--max-steps", "10", "--check-steps",
                        "5", "--learning-rate", "5.0", *common)
    assert result.exit_code == 0, result.output
    episodes = json.loads((wrecked / "summary.json").read_text())["criterion"]["episodes"]
    assert episodes["fell_below_start_at_step"] in (5, 10)
    assert "fell below the start's" in " ".join(result.output.split())
    kept = tmp_path / "kept"
    result = cli_module("train", "sft", "--model", start, "--out", kept, "--max-steps", "10", "--check-steps", "5",
                        "--learning-rate", "1e-6", *common)
    assert result.exit_code == 0, result.output
    assert json.loads((kept / "summary.json").read_text())["criterion"]["episodes"]["fell_below_start_at_step"] is None
    assert "fell below the start's" not in " ".join(result.output.split())


@pytest.mark.slow
def test_keep_best_check_saves_the_best_checked_model(lake, tiny, cli_module, tmp_path):
    """The wrecking run of the test above with --keep-best-check: the start's check stays the best, so the saved
    model is the start's, weight for weight."""
    from safetensors.torch import load_file

    start = tmp_path / "start"
    common = ("--dataset", lake, "--no-lora", "--eval-split", "none", "--seed", "3", "--save-steps", "1000",
              "--check-episodes", "12")
    assert cli_module("train", "sft", "--config", "pipelines/sft.yaml", "--model", tiny, "--out", start,
                      "--max-steps", "60", "--check-steps", "60", *common).exit_code == 0
    kept = tmp_path / "kept"
    result = cli_module("train", "sft", "--model", start, "--out", kept, "--max-steps", "10", "--check-steps", "5",
                        "--learning-rate", "5.0", "--keep-best-check", *common)
    assert result.exit_code == 0, result.output
    episodes = json.loads((kept / "summary.json").read_text())["criterion"]["episodes"]
    assert episodes["kept_step"] == 0 and episodes["kept_return"] == pytest.approx(episodes["history"][0][1], abs=1e-4)
    assert "kept the check of step 0" in " ".join(result.output.split())
    before, after = load_file(start / "model.safetensors"), load_file(kept / "model.safetensors")
    assert before.keys() == after.keys() and all((before[k] == after[k]).all() for k in before)
    result = cli_module("train", "sft", "--model", start, "--out", tmp_path / "x", "--max-steps", "2",
                        "--keep-best-check", "--dataset", lake, "--no-lora")
    assert result.exit_code == 2 and "--keep-best-check play episodes every --check-steps N" in result.output


def test_a_later_check_replaces_the_kept_one_only_beyond_the_noise_of_their_paired_difference():
    """Row 11e seed 2 kept a check whose mean over 10 episodes was 12 higher than the start's, one lucky episode,
    and it was worse on the 50 reported episodes: the kept check is replaced only by a paired, clear improvement."""
    import numpy as np

    from rlft.train.closed_loop import ReturnCheck

    start = np.array([-150.0, -120.0, -300.0, -130.0, -125.0, -140.0, -128.0, -135.0, -260.0, -132.0])
    lucky = start.copy()
    lucky[2] += 124.0  # one episode swung up earlier: the mean rises 12.4
    assert lucky.mean() > start.mean() and not ReturnCheck.beats(start, lucky)
    steady = start + np.linspace(3.0, 5.0, len(start))  # every episode a little better
    assert ReturnCheck.beats(start, steady) and not ReturnCheck.beats(steady, start)
    assert ReturnCheck.beats(np.array([1.0]), np.array([2.0])) and not ReturnCheck.beats(start, start)
