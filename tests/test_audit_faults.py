"""What the end-of-issue audit (#28) found, as a hostile but fair user: each case now gives one clear line with the
right exit code (2: fix the command; 1: the run failed), no traceback, and nothing half-written."""

from __future__ import annotations

import json
import shutil

import pytest

from factories import one_line


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from eval_factories import frozenlake_dataset, small_ppo, tiny_model

    lake = frozenlake_dataset(tmp_path_factory)
    return {"lake": lake, "tiny": tiny_model(tmp_path_factory, lake, "audit"), "ppo": small_ppo(tmp_path_factory)}


def _expert_copy(world, tmp_path, **metadata):
    expert = tmp_path / "e.zip"
    shutil.copy(world["ppo"], expert)
    meta = json.loads(world["ppo"].with_suffix(".json").read_text())
    expert.with_suffix(".json").write_text(json.dumps({**meta, **metadata}))
    return expert


def test_experts_that_cannot_be_read_or_do_not_fit_the_env(cli, world, tmp_path):
    one_line(cli("expert", "eval", tmp_path), 2, "is a folder, not an SB3 checkpoint")
    expert = _expert_copy(world, tmp_path, env_id="MountainCar-v0")
    one_line(cli("expert", "eval", expert, "--episodes", "1"), 2, "does not match MountainCar-v0")
    expert.with_suffix(".json").unlink()  # a checkpoint made for CartPole, played on Acrobot
    one_line(cli("data", "collect", "--env", "Acrobot-v1", "--policy", expert, "--episodes", "1", "--dataset-id",
                  "me/a-v0", "--data-path", tmp_path / "minari"), 2, "does not match Acrobot-v1")
    expert.with_suffix(".json").write_text('{"algo": "ppo", "env_')  # truncated metadata
    for args in (["expert", "eval", expert], ["eval", "--policy", f"expert:{expert}", "--env", "CartPole-v1"]):
        one_line(cli(*args, "--episodes", "1"), 2, "e.json")
    (tmp_path / "afile").write_text("x")
    one_line(cli("data", "collect", "--env", "CartPole-v1", "--episodes", "1", "--dataset-id", "me/c-v0",
                  "--data-path", tmp_path / "afile"), 2, "is a file, not a folder")


def test_hyperparameters_an_algorithm_does_not_take(cli, tmp_path):
    hyper = tmp_path / "hp.yaml"
    hyper.write_text("CartPole-v1:\n  n_stepz: 32\n")
    for args in (["expert", "train", "--env", "CartPole-v1", "--out", tmp_path / "e.zip"],
                 ["train", "online", "--env", "CartPole-v1", "--out", tmp_path / "on"]):
        one_line(cli(*args, "--timesteps", "64", "--hyperparams", hyper), 2, "PPO takes no n_stepz")
    assert not (tmp_path / "e.zip").exists() and not (tmp_path / "on").exists()


def test_training_settings_refused_before_a_run_folder_exists(cli, world, tmp_path):
    base = ["train", "sft", "--dataset", world["lake"], "--model", world["tiny"], "--out", tmp_path / "r",
            "--max-steps", "2"]
    one_line(cli(*base, "--lora", "--lora-target-modules", "foo_proj"), 2, "no such linear module", "q_proj")
    one_line(cli(*base, "--no-lora", "--lr-scheduler-type", "cosinee"), 2, "invalid SFT settings")
    one_line(cli(*base, "--no-lora", "--optim", "adamm"), 2, "bad TRL option in --optim adamm", "invalid choice")
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def _overflowing_copy(model, out):
    """The tiny model with its embeddings near float32's largest value: its first forward pass overflows, the way a
    run diverges (the learning rate is bounded at 10 since #45, too little to blow up 3 steps of a tiny model)."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(model, out)
    weights = out / "model.safetensors"
    tensors = load_file(weights)
    name = next(key for key in tensors if "embed" in key)
    tensors[name] = tensors[name].sign() * 3e38
    save_file(tensors, weights, metadata={"format": "pt"})
    return out


def test_a_diverged_run_fails_and_saves_nothing(cli, world, tmp_path):
    model = _overflowing_copy(world["tiny"], tmp_path / "overflowing")
    one_line(cli("train", "sft", "--dataset", world["lake"], "--model", model, "--out", tmp_path / "r",
                  "--no-lora", "--max-steps", "3"), 1, "training diverged", "NaN")
    assert not (tmp_path / "r" / "model.safetensors").exists()
    assert json.loads((tmp_path / "r" / "rlft_run.json").read_text())["status"] == "failed"
    one_line(cli("train", "bc", "--dataset", world["lake"], "--out", tmp_path / "bc.pt", "--learning-rate", "1e30",
                  "--epochs", "2"), 1, "behaviour cloning diverged")
    assert not (tmp_path / "bc.pt").exists()


@pytest.mark.slow
def test_continuing_a_lora_run_and_damaged_runs(cli, world, tmp_path):
    lora = tmp_path / "lora"
    assert cli("train", "sft", "--dataset", world["lake"], "--model", world["tiny"], "--out", lora, "--lora",
               "--max-steps", "2", "--save-steps", "1").exit_code == 0
    # a LoRA run as the model, LoRA left to its default (off for a tiny model): its merged weights train
    result = cli("train", "sft", "--dataset", world["lake"], "--model", lora, "--out", tmp_path / "more",
                 "--max-steps", "2")
    assert result.exit_code == 0, result.output
    # a checkpoint damaged after its save is passed over by --resume
    weights = next((lora / "checkpoints").glob("checkpoint-2/*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:100])
    result = cli("train", "sft", "--dataset", world["lake"], "--model", world["tiny"], "--out", lora, "--lora",
                 "--max-steps", "3", "--save-steps", "1", "--resume")
    assert result.exit_code == 0 and "checkpoint-2" in result.output and "resuming from checkpoint-1" in result.output
    # so is one whose trainer_state.json was cut short (transformers reads it first and raised a JSON traceback)
    newest = max((lora / "checkpoints").glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    (newest / "trainer_state.json").write_text('{"global_step": 3, "log_hi')
    result = cli("train", "sft", "--dataset", world["lake"], "--model", world["tiny"], "--out", lora, "--lora",
                 "--max-steps", "4", "--save-steps", "1", "--resume")
    assert result.exit_code == 0, result.output
    assert newest.name in result.output and "resuming from checkpoint-" in result.output
    # a run whose rlft_run.json does not read back is said, not ignored
    full = tmp_path / "more"
    (full / "rlft_run.json").write_text('{"stage": "sf')
    one_line(cli("eval", "--policy", f"llm:{full}", "--episodes", "1"), 2, "rlft_run.json")


def test_damaged_results_and_online_runs(cli, tmp_path):
    one_line(cli("results", "render", "--results-dir", tmp_path / "none"), 2, "is not a folder of results")
    (tmp_path / "res" / "x").mkdir(parents=True)
    (tmp_path / "res" / "rows.yaml").write_text("rows:\n  - {id: '1', task: t, method: m, recipe: x}\n")
    (tmp_path / "res" / "x" / "summary.json").write_text('{"title": ')
    page = tmp_path / "page.md"
    page.write_text("<!-- results:overview -->\n<!-- /results:overview -->\n")
    one_line(cli("results", "render", page, "--results-dir", tmp_path / "res"), 2, "summary.json")
    (tmp_path / "on").mkdir()
    (tmp_path / "on" / "rlft_online.json").write_text(json.dumps({"algo": "ppo", "backbone": "mlp",
                                                                  "env_id": "CartPole-v1"}))
    (tmp_path / "on" / "online.zip").write_bytes(b"PK\x03\x04 truncated")
    one_line(cli("eval", "--policy", f"online:{tmp_path / 'on'}", "--episodes", "1"), 2, "cannot read")


def test_inputs_that_would_make_a_useless_dataset_or_model(cli, world, tmp_path):
    rows = [{"observation": "<observation>0.10000,0.20000,0.30000</observation>", "action": f"<action>{a}</action>"}
            for a in (0.5, 5.0, -1.0)]
    source = tmp_path / "pendulum.json"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    one_line(cli("data", "import", "rlft4rl", source, "--env", "Pendulum-v1", "--out", tmp_path / "imp"), 2,
              "1 of the file's actions lie outside", "line 2")
    (tmp_path / "walled.txt").write_text("SH\nHG\n")
    one_line(cli("data", "export-q", "frozenlake", "--map", tmp_path / "walled.txt", "--out", tmp_path / "fl",
                  "--episodes", "2"), 2, "the goal cannot be reached")
    one_line(cli("model", "init", "--dataset", world["lake"], "--out", tmp_path / "t", "--max-positions", "16"), 2,
              "--max-positions 16 is shorter than the dataset's longest example")
    big = cli("model", "init", "--dataset", world["lake"], "--out", tmp_path / "t", "--max-positions", "1000000000000")
    assert big.exit_code == 2 and "max-positions" in big.output and not (tmp_path / "t").exists()
    one_line(cli("eval", "--policy", "random", "--env", "CartPole-v1", "--episodes", "1", "--bin-decoding",
                  "median"), 2, "--bin-decoding must be one of")
    one_line(cli("pipeline", "run", "pipelines/demo.yaml", "--out", tmp_path / "p", "--seeds", "3-1"), 2,
              "runs backwards")
    assert not any((tmp_path / name).exists() for name in ("imp", "fl", "t", "p"))


def test_maze_envs_leave_no_model_file_in_the_temp_folder(cli, tmp_path):
    import tempfile
    from pathlib import Path

    pytest.importorskip("gymnasium_robotics")
    before = set(Path(tempfile.gettempdir()).glob("ant_maze*.xml"))
    result = cli("data", "collect", "--env", "PointMaze_UMaze-v3", "--episodes", "1", "--max-episode-steps", "20",
                 "--dataset-id", "me/pm-v0", "--data-path", tmp_path / "minari")
    assert result.exit_code == 0, result.output
    assert set(Path(tempfile.gettempdir()).glob("ant_maze*.xml")) == before


# -- sizes bounded before work starts (issue #45) --------------------------------------------------------------------
def test_sizes_a_user_passes_are_bounded_before_work(cli, tmp_path):
    from rlft.cli.pipeline_spec import parse_seeds
    from rlft.core.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="more than 1,000 seeds"):
        parse_seeds("0-1000000000")
    with pytest.raises(InvalidInputError, match="more than 1,000 seeds"):  # past 2**63: no OverflowError
        parse_seeds("0-9999999999999999999")
    assert parse_seeds("0-999") == list(range(1000))
    result = cli("eval", "--policy", "random", "--env", "CartPole-v1", "--episodes", "5", "--num-envs", "1000000")
    assert result.exit_code == 2 and "--num-envs must be from 1 to 1024" in result.output
    bomb = tmp_path / "bomb.yaml"
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    bomb.write_text("\n".join(lines) + "\nsteps: [{command: eval}]\n")
    result = cli("pipeline", "run", bomb, "--out", tmp_path / "o")
    assert result.exit_code == 2 and "more than 100,000 values once its aliases" in result.output


def test_a_self_including_pipeline_and_a_card_file_that_never_ends_are_refused(cli, tmp_path):
    import os

    loop = tmp_path / "loop.yaml"
    loop.write_text(f"name: loop\nsteps:\n  - command: pipeline run {loop}\n    args: {{out: '{{out}}/x'}}\n")
    result = cli("pipeline", "run", loop, "--out", tmp_path / "o")
    assert result.exit_code == 2 and "runs itself" in result.output
    fifo = tmp_path / "card.md"
    os.mkfifo(fifo)  # reading it would wait for a writer forever
    result = cli("data", "export-q", "frozenlake", "--episodes", "10", "--out", tmp_path / "d", "--card-extra", fifo)
    assert result.exit_code == 2 and "not a regular file" in result.output
    big = tmp_path / "big.md"
    big.write_bytes(b"x" * (16 * 2**20 + 1))
    result = cli("data", "export-q", "frozenlake", "--episodes", "10", "--out", tmp_path / "d", "--card-extra", big)
    assert result.exit_code == 2 and "larger than 16 MiB" in result.output


@pytest.mark.parametrize("case", ["long-name", "link-loop"])
def test_paths_the_file_system_refuses_areone_line(cli, tmp_path, case):
    """A 300-character file name and a symlink loop as --out: one line, exit 2, nothing written."""
    import os

    if case == "long-name":
        out = tmp_path / ("x" * 300)
    else:
        os.symlink(tmp_path / "b", tmp_path / "a")
        os.symlink(tmp_path / "a", tmp_path / "b")
        out = tmp_path / "a" / "ds"
    result = cli("data", "export-q", "frozenlake", "--episodes", "5", "--out", out)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) <= 2
    assert ("name is too long" in result.output) or ("loops" in result.output)


def test_an_ipv6_typo_in_the_api_url_isone_line(cli, tmp_path):
    from rlft.policy.openai_backend import api_base

    with pytest.raises(Exception, match="is not a valid URL"):
        api_base("http://[::1:8000/v1")
    assert api_base("http://[::1]:8000") == "http://[::1]:8000/v1"


def test_a_number_where_text_is_expected_isone_line(cli, tmp_path):
    """A dataset whose completion column holds integers (made by hand): SFT refuses it before loading a model."""
    import datasets

    from factories import make_lake_q_model

    data, model = make_lake_q_model(tmp_path)
    table = datasets.load_dataset("parquet", data_files=str(data / "data" / "*.parquet"), split="train")
    broken = tmp_path / "broken"
    shutil.copytree(data, broken)
    for f in (broken / "data").glob("*.parquet"):
        f.unlink()
    table.remove_columns(["completion"]).add_column("completion", list(range(len(table)))).to_parquet(
        broken / "data" / "train-00000-of-00001.parquet")
    result = cli("train", "sft", "--dataset", broken, "--model", model, "--out", tmp_path / "run")
    assert result.exit_code == 2 and "column 'completion'" in result.output and "int64 values" in result.output
    assert not (tmp_path / "run").exists()


def test_a_full_disk_deep_inside_a_command_isone_line(cli, monkeypatch):
    """ENOSPC raised where no nearer handler names it (inside Minari's writer, here): one line naming the file,
    exit 1 (the machine's fault), no traceback."""
    import errno

    from rlft.sources import collect

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", "/data/minari/main_data.hdf5")

    monkeypatch.setattr(collect, "_record", full)
    result = cli("data", "collect", "--env", "CartPole-v1", "--episodes", "2", "--dataset-id", "cp/full-v0")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "the disk is full: /data/minari/main_data.hdf5" in " ".join(result.output.split())
