"""Training stages on tiny models built here: config precedence, SFT, GRPO, the RUN folder, merge, resume and
the errors of bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from rlft.core.errors import InvalidInputError
from rlft.train.config_values import read_yaml_config
from rlft.train.configs import build_config, merge_config
from rlft.train.grpo.config import GRPOStageConfig
from rlft.train.sft_config import SFTStageConfig

REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------------------------------------
# session fixtures: the FrozenLake dataset, a tiny model and one SFT run, built once
# ------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def session_env(tmp_path_factory):
    root = tmp_path_factory.mktemp("train-session")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_DATASETS_CACHE", str(root / "hf-datasets"))
        yield root


def _invoke(*args):
    from typer.testing import CliRunner

    from rlft.cli.main import app

    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="session")
def lake(session_env):
    out = session_env / "frozenlake-q"
    result = _invoke("data", "export-q", "frozenlake", "--out", out, "--episodes", "10")
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="session")
def tiny_model(session_env, lake):
    out = session_env / "tiny"
    result = _invoke("model", "init", "--dataset", lake, "--out", out)
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="session")
def sft_run(session_env, lake, tiny_model):
    """Full fine-tuning of the tiny model on the 11 FrozenLake states (evaluated on them: there is no other)."""
    from rlft.train.sft import run_sft

    out = session_env / "runs" / "sft"
    config = SFTStageConfig.of(dataset=str(lake), model=str(tiny_model), out=out, lora=False, learning_rate=3e-3,
                            max_steps=60, eval_split="train", eval_steps=1000, logging_steps=20, save_steps=1000)
    info = run_sft(config)
    return out, info


def _drop_column(src: Path, dst: Path, column: str) -> Path:
    import pyarrow.parquet as pq

    shutil.copytree(src, dst)
    for shard in (dst / "data").glob("*.parquet"):
        table = pq.read_table(shard)
        pq.write_table(table.drop_columns([column]), shard)
    return dst


# ------------------------------------------------------------------------------------------------------------
# configs: dataclass defaults < YAML < command line
# ------------------------------------------------------------------------------------------------------------
def test_config_precedence_defaults_yaml_cli():
    yaml_values = {"learning_rate": "1e-4", "max_steps": 7, "lora_r": 8, "lora_target_modules": "q_proj,v_proj"}
    cli_values = {"learning_rate": 0.5, "lora_r": None, "out": "runs/x", "lora": False}
    config, sources = merge_config(SFTStageConfig, yaml_values, cli_values)
    assert config.learning_rate == 0.5 and sources["learning_rate"] == "cli"  # cli beats yaml
    assert config.max_steps == 7 and sources["max_steps"] == "yaml"  # yaml beats default
    assert config.lora_r == 8 and sources["lora_r"] == "yaml"  # a flag not given (None) leaves yaml
    assert config.lora_alpha == 32 and sources["lora_alpha"] == "default"
    assert config.lora is False and config.out == Path("runs/x")
    assert config.lora_target_modules == ["q_proj", "v_proj"]
    with pytest.raises(InvalidInputError, match="unknown key learnin_rate"):
        merge_config(SFTStageConfig, {"learnin_rate": 1.0})
    with pytest.raises(InvalidInputError, match="bad value for max_steps"):
        merge_config(SFTStageConfig, {"max_steps": "many"})
    with pytest.raises(InvalidInputError, match="bad value for lora"):
        merge_config(SFTStageConfig, {"lora": "maybe"})


def test_every_trl_field_is_a_yaml_key_and_a_flag(tmp_path):
    """Every key of TRL's config class, those the stage gives a default and the others, is held in ``config.trl``;
    flags too (TRL's parser); unknown or rlft-owned TRL keys are refused."""
    path = tmp_path / "c.yaml"
    path.write_text("sft: {weight_decay: 0.01, optim: adamw_torch, max_steps: 5}\nsteps: []\n")
    config, sources = build_config(SFTStageConfig, "sft", path, {})
    assert config.trl == {"weight_decay": 0.01, "optim": "adamw_torch", "max_steps": 5} and config.max_steps == 5
    assert sources["trl"] == "yaml"
    flags = ["--weight-decay", "0.02", "--per_device_train_batch_size", "4", "--no_dataloader_pin_memory"]
    config, sources = build_config(SFTStageConfig, "sft", path, {"max_steps": None}, flags)
    assert config.trl == {"weight_decay": 0.02, "optim": "adamw_torch", "max_steps": 5,
                          "per_device_train_batch_size": 4, "dataloader_pin_memory": False} and sources["trl"] == "cli"
    assert config.per_device_train_batch_size == 4 and config.max_steps == 5
    config, _ = build_config(GRPOStageConfig, "grpo", None, {}, ["--top-k", "5", "--max-grad-norm=0.3"])
    assert config.trl == {"top_k": 5, "max_grad_norm": 0.3}
    with pytest.raises(InvalidInputError, match="unknown option --weight-decy"):
        build_config(SFTStageConfig, "sft", None, {}, ["--weight-decy", "0.1"])  # no abbreviations, no typos
    with pytest.raises(InvalidInputError, match="unknown option --top-k"):
        build_config(SFTStageConfig, "sft", None, {}, ["--top-k", "5"])  # a GRPOConfig field, not SFTConfig's
    with pytest.raises(InvalidInputError, match="bad TRL option"):
        build_config(SFTStageConfig, "sft", None, {}, ["--weight-decay", "heavy"])
    with pytest.raises(InvalidInputError, match="trl: output_dir cannot be set"):
        build_config(SFTStageConfig, "sft", None, {}, ["--output-dir", "elsewhere"])
    with pytest.raises(InvalidInputError, match="trl: nope cannot be set"):
        merge_config(SFTStageConfig, {"trl": {"nope": 1}})
    with pytest.raises(InvalidInputError, match="and any field of trl.SFTConfig"):
        merge_config(SFTStageConfig, {"weight_decayy": 1})


def test_config_files_flat_and_pipeline_sections(tmp_path):
    flat = tmp_path / "flat.yaml"
    flat.write_text("rewards: [format, env]\nbeta: 0.04\nenv_bounds: [-1, 1]\n")
    config, _ = build_config(GRPOStageConfig, "grpo", flat, {"beta": None, "num_generations": 8})
    assert config.rewards == ["format", "env"] and config.beta == 0.04 and config.num_generations == 8
    assert config.env_bounds == [-1.0, 1.0]
    # the shipped files are both pipelines and stage configs
    for name, cls in (("sft", SFTStageConfig), ("grpo", GRPOStageConfig)):
        path = REPO / "pipelines" / f"{name}.yaml"
        values = read_yaml_config(path, name)
        config, sources = build_config(cls, name, path, {})
        assert all(sources[k] == "yaml" for k in values)
        assert yaml.safe_load(path.read_text())["steps"]
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text("steps: [{command: train sft}]\n")
    with pytest.raises(InvalidInputError, match="no 'sft:' section"):
        read_yaml_config(pipeline, "sft")
    with pytest.raises(InvalidInputError, match="config file .*missing.yaml does not exist"):
        read_yaml_config(tmp_path / "missing.yaml", "sft")
    listed = tmp_path / "listed.yaml"  # the section, written as a list (hostile pass 11, U5): not "unknown key sft"
    listed.write_text("sft: [1, 2]\n")
    with pytest.raises(InvalidInputError, match="'sft:' must hold a mapping of config fields, not list"):
        read_yaml_config(listed, "sft")


def test_cli_flags_override_the_config_file(cli, tmp_path, monkeypatch):
    seen = {}
    monkeypatch.setattr("rlft.train.sft.run_sft", lambda config: seen.setdefault("sft", config))
    monkeypatch.setattr("rlft.train.grpo.run.run_grpo", lambda config: seen.setdefault("grpo", config))
    path = tmp_path / "c.yaml"
    path.write_text("sft: {learning_rate: 0.1, max_steps: 7, lora: false}\n"
                    "grpo: {rewards: [format], reward_weights: [2.0], beta: 0.1}\nsteps: []\n")
    assert cli("train", "sft", "--config", path, "--dataset", "d", "--model", "m", "--out", "o",
               "--learning-rate", "0.5", "--lora").exit_code == 0
    sft = seen["sft"]
    assert (sft.learning_rate, sft.max_steps, sft.lora, sft.lora_r, sft.overwrite) == (0.5, 7, True, 16, False)
    assert cli("train", "grpo", "--config", path, "--dataset", "d", "--model", "m", "--out", "o",
               "--reward", "format,bc", "--reward-weights", "1,0.5").exit_code == 0
    grpo = seen["grpo"]
    assert grpo.rewards == ["format", "bc"] and grpo.reward_weights == [1.0, 0.5] and grpo.beta == 0.1


# ------------------------------------------------------------------------------------------------------------
# SFT, GRPO, RUN folder
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_sft_lowers_the_validation_loss_and_writes_the_run_folder(sft_run, lake, tiny_model):
    from rlft.models.run import load_policy_model

    out, info = sft_run
    metrics = info["metrics"]
    assert metrics["eval_loss_end"] < 0.5 * metrics["eval_loss_start"]
    assert metrics["global_step"] == 60 and metrics["trainable_parameters"] == metrics["total_parameters"]
    saved = json.loads((out / "rlft_run.json").read_text())
    assert saved["stage"] == "sft" and saved["status"] == "complete" and saved["lora"] is False
    assert saved["base_model"] == str(tiny_model.resolve()) and saved["dataset"] == str(lake.resolve())
    assert saved["config"]["learning_rate"] == 3e-3 and saved["rlft_version"]
    assert json.loads((out / "summary.json").read_text())["eval_loss_end"] == metrics["eval_loss_end"]
    assert (out / "rlft_codec.json").read_text() == (lake / "rlft_codec.json").read_text()
    assert (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()
    assert list((out / "logs").glob("events.out.tfevents.*"))
    model, tokenizer, codec = load_policy_model(out)
    assert codec is not None and codec.kind == "frozenlake-grid" and not model.training


@pytest.mark.slow
def test_grpo_runs_and_changes_every_lora_parameter(session_env, sft_run, lake):
    import torch
    from transformers import TrainerCallback

    from rlft.models.run import load_policy_model
    from rlft.train.grpo.run import run_grpo

    class Watch(TrainerCallback):
        def on_train_begin(self, args, state, control, model=None, **kwargs):
            self.before = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}

        def on_train_end(self, args, state, control, model=None, **kwargs):
            self.after = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}

    watch = Watch()
    out = session_env / "runs" / "grpo"
    config = GRPOStageConfig.of(dataset=str(lake), model=str(sft_run[0]), out=out, rewards=["format", "q-advantage"],
                             learning_rate=5e-3, max_steps=4, logging_steps=1, max_completion_length=12, seed=1,
                             lora=True, group="sampled")
    info = run_grpo(config, callbacks=[watch])
    assert watch.before and set(watch.before) == set(watch.after)
    unchanged = [n for n in watch.before if torch.equal(watch.before[n], watch.after[n])]
    assert not unchanged, f"LoRA parameters that did not change: {unchanged}"
    metrics = info["metrics"]
    assert metrics["global_step"] == 4
    for key in ("rewards/format/mean_last", "rewards/q-advantage/mean_last", "parse_rate_last",
                "optimal_action_rate_last"):
        assert key in metrics and 0.0 <= metrics[key] <= 1.0
    # the logged total is the sum of the rewards (weights 1), and the format reward is the parse rate
    assert metrics["reward_last"] == pytest.approx(
        metrics["rewards/format/mean_last"] + metrics["rewards/q-advantage/mean_last"], abs=1e-4)
    assert metrics["parse_rate_last"] == pytest.approx(metrics["rewards/format/mean_last"], abs=1e-4)
    saved = json.loads((out / "rlft_run.json").read_text())
    assert saved["stage"] == "grpo" and saved["lora"] is True and saved["base_model"] == str(sft_run[0].resolve())
    assert [r["name"] for r in saved["rewards"]] == ["format", "q-advantage"]
    assert (out / "adapter_config.json").is_file() and (out / "adapter_model.safetensors").is_file()
    adapter = json.loads((out / "adapter_config.json").read_text())
    assert adapter["base_model_name_or_path"] == saved["base_model"]
    # a RUN on top of a RUN loads recursively: tiny model <- SFT run <- GRPO adapter
    model, tokenizer, codec = load_policy_model(out)
    assert codec.kind == "frozenlake-grid" and tokenizer.eos_token == "<|im_end|>"


@pytest.mark.slow
def test_lora_sft_merge_and_resume(cli, session_env, lake, tiny_model):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlft.models.run import load_policy_model

    run = session_env / "runs" / "lora"
    args = ("train", "sft", "--dataset", lake, "--model", tiny_model, "--out", run, "--lora", "--learning-rate", "1e-2",
            "--save-steps", "3", "--logging-steps", "3", "--eval-split", "none")
    # TRL fields rlft does not declare are flags too, parsed by TRL's parser and handed to SFTConfig
    result = cli(*args, "--max-steps", "6", "--weight-decay", "0.05", "--max_grad_norm", "0.5")
    assert result.exit_code == 0, result.output
    assert (run / "adapter_config.json").is_file() and (run / "adapter_model.safetensors").is_file()
    assert json.loads((run / "rlft_run.json").read_text())["config"]["trl"] == {"weight_decay": 0.05,
                                                                             "max_grad_norm": 0.5}
    used = torch.load(run / "checkpoints" / "checkpoint-6" / "training_args.bin", weights_only=False)
    assert (used.weight_decay, used.max_grad_norm) == (0.05, 0.5)
    assert json.loads((run / "rlft_run.json").read_text())["lora"] is True
    merged = session_env / "merged"
    result = cli("model", "merge", run, "--out", merged)
    assert result.exit_code == 0, result.output
    plain = AutoModelForCausalLM.from_pretrained(merged)
    tok = AutoTokenizer.from_pretrained(merged)
    ids = tok("<answer>LEFT</answer>", return_tensors="pt")
    policy, _, codec = load_policy_model(run)
    with torch.no_grad():
        torch.testing.assert_close(plain(**ids).logits, policy(**ids).logits, rtol=1e-4, atol=1e-4)
    assert codec is not None and (merged / "rlft_codec.json").is_file()
    base = AutoModelForCausalLM.from_pretrained(tiny_model)
    with torch.no_grad():
        assert not torch.allclose(base(**ids).logits, plain(**ids).logits)
    # --out holding this run: refused, unless --resume (same run) continues from its last checkpoint
    result = cli(*args, "--max-steps", "8")
    assert result.exit_code == 2 and "already holds a run (stage sft" in result.output
    # a save killed halfway (SIGKILL, full disk) left a newer checkpoint without trainer_state.json: skipped
    partial = run / "checkpoints" / "checkpoint-7"
    partial.mkdir()
    (partial / "adapter_model.safetensors").write_bytes(b"\x00" * 10)
    result = cli(*args, "--max-steps", "8", "--resume")
    assert result.exit_code == 0, result.output
    assert "checkpoint-7" in result.output and "did not finish saving" in " ".join(result.output.split())
    info = json.loads((run / "rlft_run.json").read_text())
    assert info["metrics"]["global_step"] == 8 and info["resumed_from"].endswith("checkpoint-6")
    result = cli("model", "merge", tiny_model, "--out", session_env / "m2")
    assert result.exit_code == 2 and "no LoRA adapter" in result.output


# ------------------------------------------------------------------------------------------------------------
# bad input: one-line errors, exit code 2, nothing trained
# ------------------------------------------------------------------------------------------------------------
def test_bad_inputs_are_refused_with_exit_code_2(cli, tmp_path, lake, tiny_model):
    no_completion = _drop_column(lake, tmp_path / "no-completion", "completion")
    result = cli("train", "sft", "--dataset", no_completion, "--model", tiny_model, "--out", tmp_path / "r")
    assert result.exit_code == 2 and "lacks column completion needed by sft" in result.output
    no_q = _drop_column(lake, tmp_path / "no-q", "q_values")
    result = cli("train", "grpo", "--dataset", no_q, "--model", tiny_model, "--out", tmp_path / "r",
                 "--reward", "format,q-advantage")
    assert result.exit_code == 2 and "reward 'q-advantage' needs column q_values" in result.output
    result = cli("train", "sft", "--dataset", lake, "--model", tmp_path / "no-model", "--out", tmp_path / "r")
    assert result.exit_code == 2 and "does not exist" in result.output
    result = cli("train", "sft", "--dataset", tmp_path / "no-data", "--model", tiny_model, "--out", tmp_path / "r")
    assert result.exit_code == 2 and "does not exist" in result.output
    result = cli("train", "sft", "--model", tiny_model, "--out", tmp_path / "r")
    assert result.exit_code == 2 and "missing --dataset" in result.output
    result = cli("train", "grpo", "--dataset", lake, "--model", tiny_model, "--out", tmp_path / "r",
                 "--reward", "format,bc", "--reward-weights", "1")
    assert result.exit_code == 2 and "--reward-weights has 1 values for 2 rewards" in result.output
    result = cli("train", "grpo", "--dataset", lake, "--model", tiny_model, "--out", tmp_path / "r",
                 "--num-generations", "3")
    assert result.exit_code == 2 and "multiple of --num-generations" in result.output
    result = cli("train", "grpo", "--dataset", lake, "--model", tiny_model, "--out", tmp_path / "r",
                 "--resume")
    assert result.exit_code == 2 and "no run to resume" in result.output
    assert not (tmp_path / "r").exists()
    other = tmp_path / "other"
    other.mkdir()
    (other / "rlft_run.json").write_text(json.dumps({"stage": "sft", "base_model": "x", "dataset": "y"}))
    result = cli("train", "grpo", "--dataset", lake, "--model", tiny_model, "--out", other)
    assert result.exit_code == 2 and "already holds a run" in result.output and "--overwrite" in result.output
    result = cli("train", "grpo", "--dataset", lake, "--model", tiny_model, "--out", other, "--resume")
    assert result.exit_code == 2 and "holds a different run (stage" in result.output


def test_use_vllm_without_vllm_is_a_clear_error(cli, tmp_path, lake, tiny_model):
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed here")
    result = cli("train", "grpo", "--dataset", lake, "--model", tiny_model, "--out", tmp_path / "r", "--use-vllm")
    assert result.exit_code == 2 and "vllm" in result.output and "pip install" in result.output


@pytest.mark.slow
def test_constrained_grpo_gives_a_format_naive_model_valid_answers_only(tmp_path, lake, tiny_model):
    """A model that has never seen the answer format (the untrained tiny model) samples only valid answers with
    --constrained, so the task rewards separate the completions from the first step."""
    import torch

    from rlft.models.run import load_policy_model
    from rlft.train.grpo.run import run_grpo

    out = tmp_path / "grpo"
    config = GRPOStageConfig.of(dataset=str(lake), model=str(tiny_model), out=out, rewards=["format", "q-advantage"],
                             constrained=True, group="sampled", lora=False, learning_rate=1e-3, max_steps=3,
                             logging_steps=1,
                             num_generations=4, per_device_train_batch_size=8, seed=2)
    info = run_grpo(config)
    metrics = info["metrics"]
    assert metrics["global_step"] == 3
    assert metrics["parse_rate_first"] == 1.0 and metrics["parse_rate_last"] == 1.0
    assert metrics["sampling_seconds"] > 0
    assert json.loads((out / "rlft_run.json").read_text())["constrained_sampling"] is True
    trained, _, _ = load_policy_model(out)
    start, _, _ = load_policy_model(tiny_model)
    changed = [n for n, p in trained.named_parameters() if not torch.equal(p, dict(start.named_parameters())[n])]
    assert changed, "constrained GRPO did not update the model"


def test_constrained_sampling_with_vllm_is_refused(cli, tmp_path, lake, tiny_model):
    result = cli("train", "grpo", "--dataset", lake, "--model", tiny_model, "--out", tmp_path / "r", "--use-vllm",
                 "--constrained")
    assert result.exit_code == 2 and "--constrained" in result.output and not (tmp_path / "r").exists()


def test_an_interrupted_overwrite_gives_the_old_run_back(cli, tmp_path, lake, tiny_model, monkeypatch):
    import trl

    from rlft.core.manifest import write_manifest

    old = tmp_path / "run"
    old.mkdir()
    (old / "rlft_run.json").write_text(json.dumps({"stage": "sft", "status": "complete"}))
    (old / "model.safetensors").write_bytes(b"the old weights")
    write_manifest(old)  # a run rlft completed lists its files

    def interrupted(*args, **kwargs):
        assert not (old / "model.safetensors").exists()  # the new run is under way in an emptied folder
        raise KeyboardInterrupt

    real = trl.SFTTrainer.train
    monkeypatch.setattr(trl.SFTTrainer, "train", interrupted)
    result = cli("train", "sft", "--dataset", lake, "--model", tiny_model, "--out", old, "--overwrite",
                 "--max-steps", "2", "--no-lora")
    assert result.exit_code == 130 and "was put back" in result.output
    assert (old / "model.safetensors").read_bytes() == b"the old weights"
    assert json.loads((old / "rlft_run.json").read_text())["status"] == "complete"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # nothing set aside is left behind
    monkeypatch.setattr(trl.SFTTrainer, "train", real)  # not undo(): that would drop the isolated data path
    result = cli("train", "sft", "--dataset", lake, "--model", tiny_model, "--out", old, "--overwrite",
                 "--max-steps", "2", "--no-lora")
    assert result.exit_code == 0, result.output
    assert (old / "model.safetensors").read_bytes() != b"the old weights"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_a_model_that_cannot_read_the_dataset_is_refused_before_training(cli, tmp_path, lake):
    """A tokenizer made for another dataset (most of FrozenLake's text is <unk> to a CartPole tokenizer) and a
    model with fewer positions than the rows are errors naming the override; nothing is written."""
    from factories import make_cartpole_text_model

    _, cartpole_model = make_cartpole_text_model(tmp_path / "cartpole")
    result = cli("train", "sft", "--dataset", lake, "--model", cartpole_model, "--out", tmp_path / "r")
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "of the dataset's tokens to '<|unk|>'" in text
    assert "--allow-tokenizer-mismatch" in text
    short = tmp_path / "short"
    result = cli("model", "init", "--dataset", lake, "--out", short, "--max-positions", "32")
    assert result.exit_code == 2 and "shorter than the dataset's longest example" in result.output
    assert cli("model", "init", "--dataset", lake, "--out", short).exit_code == 0
    config = json.loads((short / "config.json").read_text())  # a model made elsewhere, with a short context
    (short / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 32}))
    result = cli("train", "grpo", "--dataset", lake, "--model", short, "--out", tmp_path / "r")
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "but" in text and "has 32 positions" in text and "--max-positions" in text
    assert not (tmp_path / "r").exists()
    result = cli("train", "sft", "--dataset", lake, "--model", short, "--out", tmp_path / "r", "--max-steps", "1",
                 "--allow-tokenizer-mismatch", "--eval-split", "none", "--no-lora")
    assert result.exit_code == 0, result.output  # the user's call: trained anyway


@pytest.mark.slow
def test_rlfts_own_metrics_reach_the_trackers_report_to_names(cli, tmp_path, lake, tiny_model):
    """A tracker named by --report-to (TensorBoard here, through transformers' integration: the same path W&B and
    trackio take) records decision_accuracy, which rlft's criterion adds to the logs; a comma list is taken."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = tmp_path / "run"
    result = cli("train", "sft", "--dataset", lake, "--model", tiny_model, "--out", run, "--no-lora", "--max-steps",
                 "4", "--check-steps", "2", "--eval-split", "none", "--report-to", "tensorboard,tensorboard")
    assert result.exit_code == 0, result.output
    # rlft's own TensorBoard writes RUN/logs; the tracker report_to adds writes elsewhere in the run
    events = [p.parent for p in run.rglob("events.out.tfevents.*") if "logs" not in p.relative_to(run).parts[:1]]
    assert events, "the tracker wrote nothing"
    tags = set().union(*(EventAccumulator(str(e)).Reload().Tags()["scalars"] for e in events))
    assert "train/decision_accuracy" in tags, sorted(tags)


@pytest.mark.slow
def test_rlfts_own_metrics_reach_weights_and_biases_offline(cli, tmp_path, lake, tiny_model, monkeypatch):
    """W&B in offline mode (no account, no network): the run file it records holds rlft's decision_accuracy, which
    rlft's criterion adds to the logs (the key is looked for in W&B's own record file, a LevelDB-style log of
    protobuf records: wandb 0.31 ships no reader of its own; code saving is off so this source is not in it)."""
    pytest.importorskip("wandb")
    for name, value in {"WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path), "WANDB_SILENT": "true",
                        "WANDB_DISABLE_CODE": "true"}.items():
        monkeypatch.setenv(name, value)
    run = tmp_path / "run"
    result = cli("train", "sft", "--dataset", lake, "--model", tiny_model, "--out", run, "--no-lora", "--max-steps",
                 "4", "--check-steps", "2", "--eval-split", "none", "--report-to", "wandb")
    assert result.exit_code == 0, result.output
    import wandb

    wandb.teardown()  # what the process's exit does: W&B's service writes its last records (a loaded CPU lags)
    records = [p.read_bytes() for p in (tmp_path / "wandb").glob("offline-run-*/run-*.wandb")]
    assert len(records) == 1, "W&B recorded no run"
    key = "/".join(("train", "decision" + "_accuracy")).encode()
    assert records[0].count(key) >= 2  # one history row a check (steps 2 and 4)
    assert not any(run.rglob("*.wandb")), "W&B wrote into the run folder"
