"""The ``binned`` codec (one token per value, bins decoded to their data means) and per-dimension bin decoding."""

from __future__ import annotations

import json

import numpy as np
import pytest
from gymnasium import spaces

from rlft.codecs import ActionParseError, codec_from_dict, make_codec
from rlft.core.errors import InvalidInputError

BOX_SHAPES = [(1,), (3,), (2, 2), (17,)]


def _codec(obs_shape=(3,), act_shape=(2,), bins=8, rows=400, seed=0, **options):
    rng = np.random.default_rng(seed)
    obs_space = spaces.Box(-np.inf, np.inf, obs_shape, np.float32)
    act_space = spaces.Box(-1.0, 1.0, act_shape, np.float32)
    obs = rng.normal(size=(rows, *obs_shape))
    act = np.clip(rng.normal(scale=0.5, size=(rows, *act_shape)), -1, 1)
    return make_codec("binned", obs_space, act_space, observations=obs, actions=act, bins=bins, **options), obs, act


@pytest.mark.parametrize("obs_shape", BOX_SHAPES)
@pytest.mark.parametrize("act_shape", BOX_SHAPES)
def test_round_trip_on_every_box_shape(obs_shape, act_shape):
    codec, obs, act = _codec(obs_shape, act_shape)
    codec = codec_from_dict(codec.to_dict())  # what trainers and evaluation load
    for o, a in zip(obs[:20], act[:20], strict=True):
        text = codec.encode_observation(o)
        assert len(text.split()) == int(np.prod(obs_shape))
        back = codec.decode_observation(text)
        assert back.shape == obs_shape
        assert codec.encode_observation(back) == text  # a bin's mean lies in its bin
        action = codec.decode_action(codec.build_completion(a))
        assert action.shape == act_shape and action.dtype == np.float32
        assert codec.encode_action(action) == codec.encode_action(a)


def test_bins_decode_to_the_mean_of_their_data():
    obs_space = spaces.Box(-np.inf, np.inf, (1,), np.float32)
    act_space = spaces.Box(-10.0, 10.0, (1,), np.float32)
    actions = np.array([[0.0], [1.0], [2.0], [3.0], [4.0], [5.0], [6.0], [9.0]])
    codec = make_codec("binned", obs_space, act_space, observations=actions, actions=actions, bins=2)
    # quantile edges of 8 values in 2 bins: 0, 3, 9 -> bins [0, 3) and [3, 9]; means 1 and (3+4+5+6+9)/5 = 5.4
    assert codec.edges["action"][0].tolist() == [0.0, 3.0, 9.0]
    assert codec.means["action"][0].tolist() == pytest.approx([1.0, 5.4])
    assert codec.decode_action("<action>1</action>")[0] == pytest.approx(5.4)
    assert codec.decode_action("<action>0</action>")[0] == pytest.approx(1.0)


def test_a_few_valued_dimension_gets_one_bin_per_value():
    obs_space = spaces.Box(-np.inf, np.inf, (2,), np.float32)
    act_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
    rng = np.random.default_rng(1)
    act = np.stack([rng.uniform(-1, 1, 500), rng.choice([-1.0, 0.0, 0.5], 500)], axis=1)
    codec = make_codec("binned", obs_space, act_space, observations=act, actions=act, bins=16)
    assert codec.params()["action_bins_per_dimension"] == [16, 3]
    assert codec.means["action"][1].tolist() == [-1.0, 0.0, 0.5]
    for value in (-1.0, 0.0, 0.5):
        text = codec.encode_action([0.3, value])
        assert codec.decode_action(f"<action>{text}</action>")[1] == value  # exact, not a merged bin's mean
    assert "fewer bins in 1 action dims" in codec.describe()


def test_values_beyond_the_fitted_range_are_counted_not_silent():
    codec, _, _ = _codec(act_shape=(2,))
    assert codec.clipped == {"observation": 0, "action": 0}
    codec.encode_actions(np.array([[5.0, 0.0], [0.0, 0.0]]))  # 5 is beyond every fitted action
    codec.encode_observations(np.full((1, 3), 100.0))
    assert codec.clipped == {"observation": 3, "action": 1}
    assert codec.encode_action([5.0, 0.0]).split()[0] == str(len(codec.means["action"][0]) - 1)  # the end bin


def test_positions_between_bins_round_trip_to_values():
    codec, _, act = _codec(act_shape=(3,))
    means = codec.means["action"]
    values = np.array([(m[2] + m[3]) / 2 for m in means])  # halfway between two bins' means
    text = codec.position_text(values)
    assert text.split()[0] == "2.5000"
    assert np.allclose(codec.decode_action(f"<action>{text}</action>"), values, atol=1e-6)
    with pytest.raises(ActionParseError, match="out of range"):
        codec.decode_action(f"<action>0.5 1.5 {len(means[2]) - 0.5}</action>")
    with pytest.raises(ActionParseError, match="out of range"):
        codec.decode_action(f"<action>0 1 {len(means[2])}</action>")


def test_bad_input_is_one_clear_error():
    obs_space = spaces.Box(-np.inf, np.inf, (2,), np.float32)
    act_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
    with pytest.raises(InvalidInputError, match="binned codec is fitted on data: no observations"):
        make_codec("binned", obs_space, act_space, bins=8)
    with pytest.raises(InvalidInputError, match="NaN"):
        make_codec("binned", obs_space, act_space, observations=np.full((4, 2), np.nan), actions=np.zeros((4, 1)))
    codec, _, _ = _codec()
    data = codec.to_dict()
    data["params"]["action_means"] = [[0.0]] * 2
    with pytest.raises(InvalidInputError, match="one finite value per bin"):
        codec_from_dict(data)


def test_discrete_actions_are_written_as_they_are():
    obs_space = spaces.Box(-np.inf, np.inf, (4,), np.float32)
    codec = make_codec("binned", obs_space, spaces.Discrete(2), observations=np.random.default_rng(0).normal(
        size=(100, 4)), actions=np.arange(100) % 2, bins=8)
    assert codec.encode_action(1) == "1"
    assert codec.decode_action("<action>0</action>") == 0
    from rlft.models.tokenizer import train_tokenizer
    from rlft.policy.bins import resolve_bin_decoding

    tokenizer = train_tokenizer([codec.build_prompt(np.zeros(4)) + codec.build_completion(1)], codec)
    assert resolve_bin_decoding("auto", codec, tokenizer) == "off"  # no action bins: text generation
    with pytest.raises(InvalidInputError, match="needs a binned codec"):
        resolve_bin_decoding("mean", codec, tokenizer)


def test_the_tiny_tokenizer_writes_each_value_as_one_token():
    from rlft.models.tokenizer import train_tokenizer

    codec, obs, act = _codec(obs_shape=(17,), act_shape=(6,), bins=64, rows=2000)
    texts = [codec.build_prompt(o) + codec.build_completion(a) for o, a in zip(obs[:50], act[:50], strict=True)]
    tokenizer = train_tokenizer(texts, codec)
    ids = tokenizer(codec.build_prompt(obs[0]) + codec.build_completion(act[0]))["input_ids"]
    # bos, <observation>, 17 values, </observation>, newline, <action>, 6 values, </action>
    assert len(ids) == 1 + 1 + 17 + 1 + 1 + 1 + 6 + 1
    for k in range(64):  # every bin is a token, alone and after a separator, even those the texts never used
        for piece in (str(k), f" {k}"):
            assert len(tokenizer(piece, add_special_tokens=False)["input_ids"]) == 1


@pytest.fixture(scope="module")
def pendulum_binned(tmp_path_factory):
    from eval_factories import minari_dataset_folder, tiny_model

    data = minari_dataset_folder(tmp_path_factory, "Pendulum-v1", "binned", episodes=3, max_steps=40, bins=16)
    return data, tiny_model(tmp_path_factory, data, "pendulum-binned", seed=3)


def _loaded(pendulum_binned):
    from rlft.datasets.loading import load_dataset_codec
    from rlft.models.run import load_policy_model

    data, model_dir = pendulum_binned
    model, tokenizer, _ = load_policy_model(str(model_dir))
    return load_dataset_codec(str(data)), model, tokenizer


def test_bin_argmax_decoding_is_constrained_greedy_decoding(pendulum_binned):
    from rlft.policy.bins import BinBackend
    from rlft.policy.constrained import build_token_table
    from rlft.policy.generation import TransformersBackend, default_max_new_tokens

    codec, model, tokenizer = _loaded(pendulum_binned)
    rng = np.random.default_rng(0)
    prompts = [codec.build_prompt(o) for o in rng.uniform(-1, 1, (12, 3)) * [1, 1, 8]]
    table = build_token_table(codec, tokenizer, model)
    greedy = TransformersBackend(model, tokenizer, default_max_new_tokens(codec, table), token_table=table)
    bins = BinBackend(model, tokenizer, codec, "argmax")
    texts = bins.generate(prompts)
    assert texts == greedy.generate(prompts)
    for text in texts:  # a valid bin for every dimension
        inner = codec.template.extract_answer(text)
        assert 0 <= int(inner) < len(codec.means["action"][0])


def test_bin_mean_decoding_is_the_expectation_of_the_bin_distribution(pendulum_binned):
    import torch

    from rlft.policy.bins import BinBackend, bin_token_ids

    codec, model, tokenizer = _loaded(pendulum_binned)
    prompt = codec.build_prompt(np.array([0.5, -0.5, 2.0]))
    [text] = BinBackend(model, tokenizer, codec, "mean").generate([prompt])
    ids = tokenizer(prompt + codec.template.answer_prefix)["input_ids"]
    with torch.inference_mode():
        logits = model(torch.tensor([ids])).logits[0, -1].double()
    probs = logits[torch.as_tensor(bin_token_ids(codec, tokenizer)[0])].softmax(-1).numpy()
    expected = float(probs @ codec.means["action"][0])
    assert codec.decode_action(text)[0] == pytest.approx(expected, abs=1e-4 * np.ptp(codec.means["action"][0]))


def test_bin_trimmed_mean_leaves_out_the_thin_tail():
    import torch

    from rlft.policy.bins import BinBackend

    backend = BinBackend.__new__(BinBackend)  # _value needs only the mode and torch
    backend.torch, backend.mode = torch, "trimmed-mean"
    means = torch.tensor([-1.0, -0.5, 0.0, 0.5, 1.0], dtype=torch.float64)
    probs = torch.tensor([[0.004, 0.004, 0.002, 0.19, 0.80], [0.2, 0.2, 0.2, 0.2, 0.2]], dtype=torch.float64)
    best = probs.argmax(-1)
    trimmed = backend._value(probs, best, means)
    assert trimmed[0] == pytest.approx((0.19 * 0.5 + 0.80) / 0.99)  # the 1% tail on the far side is gone
    assert trimmed[1] == pytest.approx(0.0)  # nothing below the floor: the plain mean
    backend.mode = "mean"
    assert backend._value(probs, best, means)[0] < trimmed[0]  # the full mean is pulled inward by the tail
    flat = torch.full((1, 200), 1 / 200, dtype=torch.float64)  # every bin below the floor: the argmax bin stays
    backend.mode = "trimmed-mean"
    assert np.isfinite(backend._value(flat, flat.argmax(-1), torch.linspace(-1, 1, 200, dtype=torch.float64))).all()


def test_bin_decoding_auto_and_refusals(pendulum_binned):
    from rlft.policy.bins import resolve_bin_decoding

    codec, _, tokenizer = _loaded(pendulum_binned)
    assert resolve_bin_decoding("auto", codec, tokenizer) == "mean"
    assert resolve_bin_decoding("off", codec, tokenizer) == "off"
    raw, _, _ = (make_codec("raw", spaces.Box(-1, 1, (3,)), spaces.Box(-2, 2, (1,))), None, None)
    assert resolve_bin_decoding("auto", raw, tokenizer) == "off"
    with pytest.raises(InvalidInputError, match="needs a binned codec"):
        resolve_bin_decoding("mean", raw, tokenizer)
    with pytest.raises(InvalidInputError, match="must be one of"):
        resolve_bin_decoding("median", codec, tokenizer)


def test_eval_reports_the_held_out_action_error_of_any_policy(pendulum_binned, tmp_path):
    """The LLM (reading bins) and the BC MLP answer the same held-out rows; the constant policy's error is checked
    against the recorded actions by hand."""
    from rlft.datasets.dataset import RlftDataset
    from rlft.evaluate.actions import held_out_rows
    from rlft.evaluate.config import EvalConfig
    from rlft.evaluate.runner import run_evaluation
    from rlft.train.bc import BCConfig, train_bc

    data, model = pendulum_binned
    observations, recorded, split = held_out_rows(RlftDataset.open(str(data), require_codec=False), seed=0)
    assert split == "validation" and len(observations) == len(recorded) > 0
    train_bc(BCConfig(dataset=str(data), out=tmp_path / "bc.pt", epochs=2))
    reports = {}
    for name, spec in (("llm", f"llm:{model}"), ("bc", f"bc:{tmp_path / 'bc.pt'}"), ("constant", "constant:1.0")):
        reports[name] = run_evaluation(EvalConfig(policy=spec, env_id="Pendulum-v1", episodes=1, num_envs=1,
                                                  max_episode_steps=5, action_error=str(data), quiet=True,
                                                  codec=str(data) if name == "llm" else None))
    for report in reports.values():
        assert report["action_error_split"] == "validation" and report["action_error_rows"] == len(recorded)
        assert 0.0 <= report["action_error"] <= report["action_error_worst10"] <= 1.0
    assert reports["llm"]["action_error_invalid"] == 0
    # constant 1.0 on Pendulum's [-2, 2]: the error is |1 - recorded| / 4
    expected = float(np.mean(np.abs(1.0 - recorded.ravel()) / 4.0))
    assert reports["constant"]["action_error"] == pytest.approx(expected, rel=1e-6)
    assert reports["constant"]["action_mae_units_per_dim"] == [pytest.approx(4 * expected, abs=1e-4)]
    # |1.0| against the recorded mean |a|
    assert reports["constant"]["action_magnitude_ratio"] == pytest.approx(1.0 / np.mean(np.abs(recorded)), rel=1e-6)
    assert reports["constant"]["action_magnitude_ratio_per_dim"] == [
        pytest.approx(1.0 / np.mean(np.abs(recorded)), abs=1e-4)]


def test_action_error_refuses_discrete_datasets(tmp_path_factory):
    from eval_factories import frozenlake_dataset
    from rlft.datasets.dataset import RlftDataset
    from rlft.evaluate.actions import held_out_rows

    with pytest.raises(InvalidInputError, match="measures continuous actions"):
        held_out_rows(RlftDataset.open(str(frozenlake_dataset(tmp_path_factory)), require_codec=False), seed=0)


def test_bin_smoothing_targets_and_loss(pendulum_binned):
    import torch

    from rlft.policy.bins import bin_token_ids
    from rlft.train.bin_targets import BinTargets, gaussian_rows

    rows = gaussian_rows(5, 0.75)
    assert np.allclose(rows.sum(axis=1), 1.0) and rows[2].argmax() == 2 and rows[2, 1] == pytest.approx(rows[2, 3])
    codec, model, tokenizer = _loaded(pendulum_binned)
    ids = bin_token_ids(codec, tokenizer)[0]
    logits = torch.randn(2, 4, len(tokenizer))
    labels = torch.tensor([[-100, int(ids[3]), tokenizer.eos_token_id, -100], [-100, -100, int(ids[0]), -100]])
    hard = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, len(tokenizer)), labels[:, 1:].reshape(-1),
                                             ignore_index=-100)
    # a vanishing width is one-hot: plain cross-entropy
    assert BinTargets(codec, tokenizer, 1e-3).loss(logits, labels).item() == pytest.approx(hard.item(), rel=1e-5)
    # by hand: bin 3 of the first row against the Gaussian over its dimension's bins
    soft = BinTargets(codec, tokenizer, 1.0)
    logp = logits.log_softmax(-1)
    weights = torch.as_tensor(gaussian_rows(len(ids), 1.0)[3], dtype=torch.float32)
    expected = (-(weights * logp[0, 0, torch.as_tensor(ids)]).sum() - logp[0, 1, tokenizer.eos_token_id]
                - (torch.as_tensor(gaussian_rows(len(ids), 1.0)[0], dtype=torch.float32)
                   * logp[1, 1, torch.as_tensor(ids)]).sum()) / 3
    assert soft.loss(logits, labels).item() == pytest.approx(expected.item(), rel=1e-5)
    with pytest.raises(InvalidInputError, match="must be in"):
        BinTargets(codec, tokenizer, 0.0)


@pytest.mark.slow
def test_sft_with_bin_smoothing_trains(pendulum_binned, tmp_path):
    from rlft.core.console import console
    from rlft.train.sft import run_sft
    from rlft.train.sft_config import SFTStageConfig

    data, model = pendulum_binned
    with console.capture():
        info = run_sft(SFTStageConfig.of(dataset=str(data), model=str(model), out=tmp_path / "run", lora=False,
                                      max_steps=30, bin_smoothing=0.75, learning_rate=3e-3,
                                      per_device_train_batch_size=32, eval_split="validation", save_steps=1000))
    metrics = info["metrics"]
    assert info["config"]["bin_smoothing"] == 0.75
    assert metrics["train_loss_last"] < metrics["train_loss_first"]


def test_smooth_bin_embeddings_start_neighbouring_bins_alike(pendulum_binned, tmp_path_factory):
    import torch

    from eval_factories import tiny_model
    from rlft.models.run import load_policy_model

    data, random_dir = pendulum_binned
    smooth_dir = tiny_model(tmp_path_factory, data, "pendulum-binned-smooth", seed=3, bin_embeddings="smooth")
    info = json.loads((smooth_dir / "rlft_model.json").read_text())
    assert info["bin_embeddings"] == "smooth" and info["smooth_bin_tokens"] >= 3 * 16

    def similarity(model_dir, a, b):
        model, tokenizer, _ = load_policy_model(str(model_dir))
        emb = model.get_input_embeddings().weight
        vocab = tokenizer.get_vocab()
        return torch.cosine_similarity(emb[vocab[f" {a}"]], emb[vocab[f" {b}"]], dim=0).item()

    # neighbours alike, far bins not; random embeddings know no order. The same token after any separator
    # shares its bin's embedding, and the variance is the other weights'.
    assert similarity(smooth_dir, 7, 8) > 0.9 and abs(similarity(smooth_dir, 0, 15)) < 0.5
    assert abs(similarity(random_dir, 7, 8)) < 0.5
    model, tokenizer, _ = load_policy_model(str(smooth_dir))
    emb, vocab = model.get_input_embeddings().weight, tokenizer.get_vocab()
    assert torch.equal(emb[vocab["5"]], emb[vocab[" 5"]])
    assert emb[vocab[" 5"]].std().item() == pytest.approx(emb[vocab["<action>"]].std().item(), rel=0.5)


def test_smooth_bin_embeddings_need_a_binned_dataset(tmp_path_factory, tmp_path):
    from eval_factories import minari_dataset_folder
    from rlft.models.tiny import ModelInitConfig, init_model

    raw = minari_dataset_folder(tmp_path_factory, "Pendulum-v1", "raw", episodes=2, max_steps=20)
    with pytest.raises(InvalidInputError, match="--format binned"):
        init_model(ModelInitConfig(dataset=str(raw), out=tmp_path / "m", bin_embeddings="smooth"))
    assert not (tmp_path / "m").exists()
