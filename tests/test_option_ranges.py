"""Options are range-checked when parsed, and algorithm/space compatibility before training (issue #28): each bad
value is one error naming the option, and nothing is written."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(("args", "message"), [
    (["expert", "train", "--env", "CartPole-v1", "--algo", "sac"], "--algo sac needs continuous"),
    (["expert", "train", "--env", "Pendulum-v1", "--algo", "dqn"], "--algo dqn needs Discrete"),
    (["expert", "train", "--env", "CartPole-v1", "--timesteps", "0"], "Invalid value for '--timesteps'"),
    (["expert", "train", "--env", "CartPole-v1", "--timesteps", "-5"], "Invalid value for '--timesteps'"),
    (["data", "collect", "--env", "CartPole-v1", "--policy", "random", "--dataset-id", "cp/r-v0", "--episodes", "2",
      "--max-episode-steps", "0"], "Invalid value for '--max-episode-steps'"),
    (["data", "collect", "--env", "CartPole-v1", "--policy", "random", "--dataset-id", "cp/r-v0", "--episodes", "2",
      "--max-episode-steps", "-1"], "Invalid value for '--max-episode-steps'"),
    # hostile pass 14 (B11): evaluation budgets and episode limits had no upper bound (a typo ran for years)
    (["data", "collect", "--env", "CartPole-v1", "--policy", "random", "--dataset-id", "cp/r-v0", "--episodes", "2",
      "--max-episode-steps", "100000000000"], "Invalid value for '--max-episode-steps'"),
    (["eval", "--policy", "random", "--env", "CartPole-v1", "--max-episode-steps", "100000000000"],
     "Invalid value for '--max-episode-steps'"),
    *[(["expert", "train", "--env", "CartPole-v1", flag, value], f"Invalid value for '{flag}'")
      for flag, value in [("--eval-episodes", "1000000000000"), ("--eval-freq-episodes", "1000000000000"),
                          ("--eval-freq", "-1"), ("--eval-episodes", "0")]],
    *[(["data", "improve", "none", "--expert", "none.zip", "--out", "never-written", flag, value],
       f"Invalid value for '{flag}'")
      for flag, value in [("--candidates", "100000000"), ("--horizon", "100000000000"), ("--rows", "10000000000000"),
                          ("--consistency-rows", "10000000000000")]],
    (["data", "collect", "--env", "CartPole-v1", "--policy", "random", "--dataset-id", "cp/r-v0", "--episodes", "2",
      "--noise", "nan"], "must be a finite number"),
    # hostile pass 11 (B4, B5): a trillion episodes ran until killed; bounded as rlft eval's are
    (["data", "collect", "--env", "CartPole-v1", "--policy", "random", "--dataset-id", "cp/r-v0", "--episodes",
      "1000000000000"], "Invalid value for '--episodes'"),
    (["data", "export-q", "frozenlake", "--out", "never-written", "--episodes", "1000000000000"],
     "Invalid value for '--episodes'"),
    # hostile pass 11 (U4): --history was capped, --turns, which puts as many steps in each prompt, was not
    (["data", "serialize", "cp/none-v0", "--out", "never-written", "--turns", "1000000000"],
     "--turns must be from 0 to 1000, got 1000000000"),
    # hostile pass 12 (B3, B4): a trillion tokens filled the memory at model init; a billion maps ran until killed
    (["data", "serialize", "cp/none-v0", "--out", "never-written", "--format", "tokenized", "--tokens",
      "1000000000000"], "--tokens must be from 2 to 100,000"),
    (["data", "serialize", "cp/none-v0", "--out", "never-written", "--format", "binned", "--bins", "1000000"],
     "--bins must be from 2 to 100,000"),
    (["data", "export-q", "frozenlake", "--map", "random4x4", "--maps", "1000000000", "--out", "never-written"],
     "Invalid value for '--maps'"),
    # hostile pass 12 (U4, U7): TRL's settings, rlft's own and those passed through to TRL, ran on or were a
    # traceback deep in the trainer
    *[(["train", stage, "--dataset", "none", "--model", "none", "--out", "never-written", "--max-steps", "1", *flag],
       message) for stage in ("sft", "grpo") for flag, message in [
        (["--dataloader-num-workers", "1000"], "--dataloader-num-workers must be within [0, 64], got 1000"),
        (["--gradient-accumulation-steps", "100000000"], "Invalid value for '--gradient-accumulation-steps'"),
        (["--data-seed", "99999999999999"], "--data-seed must be within [0, 4294967295]"),
        (["--num-train-epochs", "1e300"], "Invalid value for '--num-train-epochs'"),
        (["--learning-rate", "-1"], "Invalid value for '--learning-rate'")]],
    (["train", "sft", "--dataset", "none", "--model", "none", "--out", "never-written", "--eval-steps", "0"],
     "Invalid value for '--eval-steps'"),
    (["train", "sft", "--dataset", "none", "--model", "none", "--out", "never-written",
      "--per-device-eval-batch-size", "0"], "Invalid value for '--per-device-eval-batch-size'"),
])
def test_bad_values_are_refused_before_any_work(cli, tmp_path, args, message):
    out = ["--out", str(tmp_path / "expert.zip")] if args[0] == "expert" else []
    result = cli(*args, *out)
    assert result.exit_code == 2 and message in result.output, result.output
    # hostile pass 13 (U5): a range click checks was typer's boxed usage text; every refusal is one Error: line
    assert result.output.strip().startswith("Error:") and len(result.output.strip().splitlines()) == 1, result.output
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(("args", "message"), [
    (["eval", "--policy", "random", "--env", "CartPole-v1", "--seed", "18446744073709551615"], "'--seed'"),
    # click words it "No such option: --bogus" or "No such option '--bogus'" by version: the test checks both parts
    (["eval", "--policy", "random", "--env", "CartPole-v1", "--bogus"], ("No such option", "--bogus")),
    (["data", "push", "somewhere"], "Missing option '--repo-id'"),
    (["train", "sft", "--dataset"], "Option '--dataset' requires an argument"),  # click gives no command here
])
def test_usage_errors_click_finds_are_one_line_naming_the_help(cli, args, message):
    result = cli(*args)
    parts = message if isinstance(message, tuple) else (message,)
    assert result.exit_code == 2 and all(part in result.output for part in parts), result.output
    command = " ".join(["rlft", *[word for word in args[:2] if not word.startswith("-")]])
    command = "" if "requires an argument" in parts[0] else command + " "
    assert result.output.strip().splitlines() == [result.output.strip()], result.output
    assert "Usage:" not in result.output and f"`{command}--help` lists the options" in result.output, result.output


def test_bc_refuses_absurd_widths(cli, tmp_path, tmp_path_factory):
    from eval_factories import frozenlake_dataset

    result = cli("train", "bc", "--dataset", frozenlake_dataset(tmp_path_factory), "--out", tmp_path / "bc.pt",
                 "--hidden", "10000000")
    assert result.exit_code != 0 and "--hidden must be layer sizes from 1 to 65,536" in result.output
    assert not (tmp_path / "bc.pt").exists()


def test_bc_refuses_a_non_finite_observation_naming_the_row(cli, tmp_path, tmp_path_factory):
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    from eval_factories import minari_dataset_folder

    data = tmp_path / "cp"
    shutil.copytree(minari_dataset_folder(tmp_path_factory, "CartPole-v1", episodes=4), data)
    part = sorted((data / "data").glob("train-*.parquet"))[0]
    table = pq.read_table(part)
    obs = table.column("observation").to_pylist()
    obs[3] = [float("nan")] * len(obs[3])
    pq.write_table(table.set_column(table.schema.get_field_index("observation"), "observation",
                                    pa.array(obs, type=table.schema.field("observation").type)), part)
    result = cli("train", "bc", "--dataset", data, "--out", tmp_path / "bc.pt")
    assert result.exit_code == 2 and "non-finite observation (first: row 3" in result.output, result.output
    assert "--drop-nonfinite" in result.output and not (tmp_path / "bc.pt").exists()


def test_non_finite_q_values_are_refused_by_q_greedy_and_the_q_advantage_reward(cli, tmp_path, tmp_path_factory):
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    from eval_factories import frozenlake_dataset, tiny_model
    from rlft.core.errors import InvalidInputError
    from rlft.train.grpo.config import GRPOStageConfig
    from rlft.train.grpo.run import run_grpo

    data = tmp_path / "fl"
    shutil.copytree(frozenlake_dataset(tmp_path_factory), data)
    model = tiny_model(tmp_path_factory, frozenlake_dataset(tmp_path_factory), "fl-tiny")
    for part in (data / "data").glob("*.parquet"):
        table = pq.read_table(part)
        q = table.column("q_values").to_pylist()
        q[0] = [float("nan")] * len(q[0])
        pq.write_table(table.set_column(table.schema.get_field_index("q_values"), "q_values",
                                        pa.array(q, type=table.schema.field("q_values").type)), part)
    result = cli("eval", "--policy", "q-greedy", "--codec", data, "--episodes", "2")
    assert result.exit_code == 2 and "non-finite Q-values" in result.output, result.output
    with pytest.raises(InvalidInputError, match="non-finite q_values"):
        run_grpo(GRPOStageConfig.of(dataset=str(data), model=str(model), out=tmp_path / "r"))
    assert not (tmp_path / "r").exists()


def test_the_second_hostile_pass_is_refused(cli, tmp_path, tmp_path_factory):
    """Values the final audit found accepted or ending in a traceback: each one error line, exit 2, nothing
    written (a huge bin count or model width fails before anything is allocated)."""
    import yaml

    from eval_factories import frozenlake_dataset

    lake = frozenlake_dataset(tmp_path_factory)
    model = tmp_path / "tiny"
    assert cli("model", "init", "--dataset", lake, "--out", model, "--layers", "1", "--hidden", "16",
               "--heads", "2").exit_code == 0
    cases = [
        (["model", "init", "--dataset", lake, "--out", tmp_path / "huge", "--hidden", "65536"],
         "needs"),
        (["train", "bc", "--dataset", lake, "--out", tmp_path / "b.pt", "--weight-decay", "-1"], "--weight-decay"),
        (["train", "grpo", "--dataset", lake, "--model", model, "--out", tmp_path / "g", "--top-p", "1.5"],
         "--top-p"),
        (["train", "grpo", "--dataset", lake, "--model", model, "--out", tmp_path / "g", "--beta", "-1"],
         "--beta"),
        (["train", "online", "--env", "CartPole-v1", "--out", tmp_path / "o", "--codec", lake], "--backbone mlp"),
    ]
    config = tmp_path / "grpo.yaml"
    config.write_text(yaml.safe_dump({"grpo": {"beta": -1.0}}))  # a YAML value meets the same bound as the flag
    cases.append((["train", "grpo", "--config", config, "--dataset", lake, "--model", model, "--out", tmp_path / "g"],
                  "--beta must be >= 0"))
    for args, message in cases:
        result = cli(*args)
        assert result.exit_code == 2 and message in result.output, (args, result.output)
        assert "Traceback" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grpo.yaml", "tiny"]


def test_a_bin_count_no_model_could_use_is_refused_before_allocating():
    import numpy as np
    from gymnasium import spaces

    from rlft.codecs.binned import BinnedCodec
    from rlft.codecs.discretized import DiscretizedCodec
    from rlft.core.errors import InvalidInputError
    from rlft.envs.spaces import space_to_dict

    box = space_to_dict(spaces.Box(-1.0, 1.0, (3,), np.float32))
    data = np.zeros((4, 3), np.float32)
    for codec in (DiscretizedCodec, BinnedCodec):
        with pytest.raises(InvalidInputError, match="bins must be at most 65,536"):
            codec.fit_params(box, box, data, data, bins=1_000_000_000)


def test_a_trl_setting_from_a_config_file_is_held_to_the_same_bounds(cli, tmp_path):
    """A --config YAML reaches TRL's settings by their names: the bounds are checked there too (hostile pass 12,
    U4), for rlft's declared settings and those passed through to TRL alike."""
    config = tmp_path / "sft.yaml"
    for key, value, message in [("dataloader_num_workers", 1000, "--dataloader-num-workers must be within [0, 64]"),
                                ("gradient_accumulation_steps", 100000000,
                                 "--gradient-accumulation-steps must be within [1, 10000]")]:
        config.write_text(f"sft:\n  {key}: {value}\n")
        result = cli("train", "sft", "--config", config, "--dataset", "none", "--model", "none", "--out",
                     tmp_path / "run")
        assert result.exit_code == 2 and message in " ".join(result.output.split()), result.output
        assert not (tmp_path / "run").exists()
