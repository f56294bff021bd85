"""``rlft model add-bins``: a pretrained tokenizer that writes numbers digit by digit gets one token per bin index.

The "pretrained" model here is a tiny model whose tokenizer was trained on a raw-codec dataset: it writes every
digit and every space as its own token, as SmolLM2's does, so a bin index such as ``" 12"`` starts as three tokens.
"""

from __future__ import annotations

import json

import pytest

from rlft.core.errors import InvalidInputError


@pytest.fixture(scope="module")
def digit_model_and_bins(tmp_path_factory):
    from eval_factories import minari_dataset_folder, tiny_model

    raw = minari_dataset_folder(tmp_path_factory, "Pendulum-v1", "raw", episodes=2, max_steps=20)
    binned = minari_dataset_folder(tmp_path_factory, "Pendulum-v1", "binned", episodes=3, max_steps=40, bins=16)
    return tiny_model(tmp_path_factory, raw, "pendulum-raw-digits", seed=1), binned


def _add(model_dir, data, out, init="smooth"):
    from rlft.core.console import console
    from rlft.models.bins import AddBinsConfig, add_bins

    with console.capture():
        return add_bins(AddBinsConfig(model=str(model_dir), dataset=str(data), out=out, init=init))


def test_every_bin_index_becomes_one_token_and_text_round_trips(digit_model_and_bins, tmp_path):
    from rlft.datasets.loading import load_dataset_codec, load_dataset_dict
    from rlft.models.run import load_policy_model
    from rlft.policy.bins import bin_token_ids, resolve_bin_decoding

    model_dir, data = digit_model_and_bins
    before, tokenizer_before, _ = load_policy_model(str(model_dir))
    codec = load_dataset_codec(str(data))
    assert bin_token_ids(codec, tokenizer_before) is None  # " 12" is " ", "1", "2" before
    info = _add(model_dir, data, tmp_path / "m")
    # 16 bins x 3 separators: the single digits 0-9 were one token already and are reused
    assert (info["added"], info["reused"]) == (38, 10) and info["vocab_size"] == info["vocab_size_before"] + 38
    model, tokenizer, _ = load_policy_model(str(tmp_path / "m"))
    assert model.get_input_embeddings().weight.shape[0] == len(tokenizer)
    for k in range(16):
        for piece in (str(k), f" {k}", f",{k}"):
            assert len(tokenizer(piece, add_special_tokens=False)["input_ids"]) == 1, piece
    row = load_dataset_dict(str(data))["train"][0]
    text = row["prompt"] + row["completion"]
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == text  # the codec's text is unchanged, only cut differently
    assert len(ids) < len(tokenizer_before(text, add_special_tokens=False)["input_ids"])
    assert [len(i) for i in bin_token_ids(codec, tokenizer)] == [16]
    assert resolve_bin_decoding("auto", codec, tokenizer) == "mean"  # per-dimension bin decoding now works
    # the pretrained weights are kept: a token that is no bin keeps its embedding
    tag = tokenizer.convert_tokens_to_ids("<action>")
    assert tag == tokenizer_before.convert_tokens_to_ids("<action>")
    assert (model.get_input_embeddings().weight[tag] == before.get_input_embeddings().weight[tag]).all()
    assert json.loads((tmp_path / "m" / "rlft_model.json").read_text())["kind"] == "pretrained+bins"


def test_smooth_and_subword_initialisations(digit_model_and_bins, tmp_path):
    import torch

    from rlft.models.run import load_policy_model

    model_dir, data = digit_model_and_bins
    base, base_tok, _ = load_policy_model(str(model_dir))
    old = base.get_input_embeddings().weight
    _add(model_dir, data, tmp_path / "smooth", init="smooth")
    _add(model_dir, data, tmp_path / "subwords", init="subwords")

    def embedding(name, piece):
        model, tokenizer, _ = load_policy_model(str(tmp_path / name))
        return model.get_input_embeddings().weight[tokenizer.convert_tokens_to_ids(piece)]

    cos = torch.nn.functional.cosine_similarity
    assert cos(embedding("smooth", " 7"), embedding("smooth", " 8"), dim=0) > 0.8
    assert abs(cos(embedding("smooth", " 0"), embedding("smooth", " 15"), dim=0)) < 0.5
    pieces = base_tok(" 12", add_special_tokens=False)["input_ids"]
    assert len(pieces) == 3
    assert torch.allclose(embedding("subwords", " 12"), old[pieces].mean(0))


def test_add_bins_refusals_leave_nothing(digit_model_and_bins, tmp_path_factory, tmp_path):
    from eval_factories import minari_dataset_folder

    model_dir, data = digit_model_and_bins
    raw = minari_dataset_folder(tmp_path_factory, "Pendulum-v1", "raw", episodes=2, max_steps=20)
    with pytest.raises(InvalidInputError, match="--format binned"):
        _add(model_dir, raw, tmp_path / "a")
    with pytest.raises(InvalidInputError, match="--init must be one of"):
        _add(model_dir, data, tmp_path / "b", init="zeros")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_eval_device_option(digit_model_and_bins):
    from rlft.evaluate.setup import _place
    from rlft.models.run import load_policy_model

    model, _, _ = load_policy_model(str(digit_model_and_bins[0]))
    assert next(_place(model, "auto").parameters()).device.type in ("cpu", "cuda")
    assert next(_place(model, "cpu").parameters()).device.type == "cpu"
    with pytest.raises(InvalidInputError, match="not a device torch knows"):
        _place(model, "tpu:9")
