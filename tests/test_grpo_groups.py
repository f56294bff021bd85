"""GRPO that learns from a task-naive start (issue #27): every valid answer in each group (``--group actions``), the
policy's exact distribution over the answers, the warning of a run without signal, and the defaults resolved from
the data (rewards) and the model (learning rate, LoRA)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rlft.core.errors import InvalidInputError


@pytest.fixture(scope="module")
def lake_model(tmp_path_factory):
    from typer.testing import CliRunner

    from rlft.cli.main import app

    root = tmp_path_factory.mktemp("grpo-groups")
    for args in (["data", "export-q", "frozenlake", "--out", root / "fl", "--episodes", "10"],
                 ["model", "init", "--dataset", root / "fl", "--out", root / "tiny"]):
        result = CliRunner().invoke(app, [str(a) for a in args])
        assert result.exit_code == 0, result.output
    return root / "fl", root / "tiny"


@pytest.fixture(scope="module")
def choices(lake_model):
    from rlft.codecs.base import load_codec
    from rlft.datasets.loading import load_dataset_dict
    from rlft.models.run import load_policy_model
    from rlft.policy.action_scores import ActionChoices

    lake, tiny = lake_model
    model, tokenizer, _ = load_policy_model(tiny)
    codec = load_codec(lake)
    prompts = list(load_dataset_dict(lake)["train"]["prompt"])
    return ActionChoices(codec, tokenizer, model), model, codec, prompts


def test_every_valid_answer_is_scored_as_the_codec_writes_it(choices):
    from rlft.policy.action_scores import action_distribution

    answers, model, codec, prompts = choices
    assert answers.actions == [0, 1, 2, 3]
    for ids, action in zip(answers.completion_ids(prompts[0]), answers.actions, strict=True):
        assert ids[-1] == answers.eos  # the answer ends the turn, as SFT trains it to
        assert codec.decode_action(answers.tokenizer.decode(ids, skip_special_tokens=True)) == action
    scores = answers.log_likelihoods(model, prompts[:3])
    assert scores.shape == (3, 4) and np.all(np.isfinite(scores)) and np.all(scores < 0)
    probs = action_distribution(scores)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0)
    # scoring one prompt alone or in a padded batch gives the same likelihoods
    np.testing.assert_allclose(answers.log_likelihoods(model, prompts[1:2]), scores[1:2], rtol=1e-4, atol=1e-4)


def test_the_decisive_tokens_are_the_action_between_the_shared_format(choices):
    """Answers share <answer>, </answer> and end-of-turn; only the action's own tokens are a choice, and the
    decisive likelihood is what constrained greedy decoding follows (the next-token distribution after <answer>)."""
    import torch

    answers, model, _, prompts = choices
    spans = answers.decisive_spans(prompts[0])
    full = answers.completion_ids(prompts[0])
    for (start, end), ids in zip(spans, full, strict=True):
        assert answers.tokenizer.decode(ids[:start]) == "<answer>" and 0 < start < end < len(ids)
        assert answers.tokenizer.decode(ids[end:], skip_special_tokens=True) == "</answer>"
    scores = answers.log_likelihoods(model, prompts[:1], decisive=True)
    head = answers.prompt_ids(prompts[0]) + full[0][: spans[0][0]]
    with torch.no_grad():
        next_token = model(input_ids=torch.tensor([head])).logits[0, -1].log_softmax(-1)
    if all(end - start == 1 for start, end in spans):  # one token per action: exactly the next-token choice
        expected = [float(next_token[ids[s]]) for (s, _), ids in zip(spans, full, strict=True)]
        np.testing.assert_allclose(scores[0], expected, rtol=1e-4, atol=1e-4)


def test_each_group_holds_every_answer_equally_often(choices):
    from rlft.train.grpo.sampling import ActionSetRollout

    answers, _, codec, prompts = choices
    rollout = ActionSetRollout(answers, num_generations=8)
    batch = [prompts[0]] * 8 + [prompts[1]] * 8
    out = rollout(batch, trainer=None)
    played = [codec.decode_action(answers.tokenizer.decode(ids, skip_special_tokens=True))
              for ids in out["completion_ids"]]
    assert played == [0, 1, 2, 3] * 4
    assert out["prompt_ids"][0] == answers.prompt_ids(prompts[0]) and out["logprobs"] is None
    with pytest.raises(InvalidInputError, match="multiple of 4"):
        ActionSetRollout(answers, num_generations=6)


def test_policy_signals_read_entropy_and_the_probability_of_the_right_actions():
    from rlft.policy.action_scores import policy_signals

    probs = np.array([[0.25, 0.25, 0.25, 0.25], [0.0, 1.0, 0.0, 0.0]])
    signals = policy_signals(probs, [{0, 1}, {2}], [0, 1, 2, 3])
    assert signals["policy_entropy"] == pytest.approx(np.log(4) / 2, abs=1e-6)
    assert signals["policy_correct_prob"] == pytest.approx(0.25) and signals["policy_correct_prob_min"] == 0.0


@pytest.mark.slow
def test_grpo_with_defaults_learns_frozenlake_from_an_untrained_model(cli, lake_model, tmp_path):
    """The user's own command, defaults otherwise: rewards from the data's columns, every answer in each group,
    full fine-tuning and a from-scratch learning rate for a tiny model; the policy's probability of the optimal
    actions rises."""
    lake, tiny = lake_model
    out = tmp_path / "r"
    result = cli("train", "grpo", "--dataset", lake, "--model", tiny, "--out", out, "--max-steps", "120",
                 "--check-steps", "40", "--seed", "3")
    assert result.exit_code == 0, result.output
    info = json.loads((out / "rlft_run.json").read_text())
    assert [r["name"] for r in info["rewards"]] == ["format", "q-advantage"] and info["group"] == "actions"
    assert info["lora"] is False and info["config"]["learning_rate"] == 3e-4
    metrics = info["metrics"]
    assert metrics["parse_rate_last"] == 1.0 and metrics["frac_reward_zero_std_last"] < 1.0
    signals = metrics["criterion"]["signal_history"]
    assert len(signals) == 4 and signals[-1][2] > signals[0][2] + 0.1, signals
    assert "no learning signal" not in result.output


@pytest.mark.slow
def test_a_run_without_signal_warns_and_names_the_flags_that_fix_it(cli, lake_model, tmp_path):
    """Sampled groups from a model that never writes the answer format: every reward equal, nothing to learn."""
    lake, tiny = lake_model
    out = tmp_path / "r"
    result = cli("train", "grpo", "--dataset", lake, "--model", tiny, "--out", out, "--group", "sampled",
                 "--max-steps", "4", "--logging-steps", "1", "--stall-steps", "3", "--max-completion-length", "8")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "no learning signal for 3 steps" in text and "--group actions" in text and "--constrained" in text
    metrics = json.loads((out / "rlft_run.json").read_text())["metrics"]
    assert metrics["stall_warned_at_step"] == 3 and metrics["stall_steps_longest"] == 4


def test_bad_group_settings_are_refused_before_anything_is_written(cli, lake_model, tmp_path):
    lake, tiny = lake_model
    result = cli("train", "grpo", "--dataset", lake, "--model", tiny, "--out", tmp_path / "r", "--group", "all")
    assert result.exit_code == 2 and "--group must be one of" in result.output
    result = cli("train", "grpo", "--dataset", lake, "--model", tiny, "--out", tmp_path / "r", "--group", "actions",
                 "--num-generations", "6", "--batch-size", "12")
    assert result.exit_code == 2 and "multiple of 4" in result.output
    result = cli("train", "grpo", "--dataset", lake, "--model", tiny, "--out", tmp_path / "r", "--stall-steps", "-1")
    assert result.exit_code == 2 and "--stall-steps" in result.output
    assert not (tmp_path / "r").exists()


def test_only_the_tokens_that_write_the_action_are_chosen(choices):
    """Constrained samples keep the loss on the action's tokens: the format around it, in whichever tokenization the
    grammar allowed, and end-of-turn are forced (rlft.train.grpo.sampling.chosen_tokens)."""
    from rlft.train.grpo.sampling import chosen_tokens

    answers, _, codec, prompts = choices
    tokenizer = answers.tokenizer
    canonical = answers.completion_ids(prompts[0])[2]  # <answer>RIGHT</answer> then end-of-turn
    marks = chosen_tokens(tokenizer, codec, canonical)
    assert tokenizer.decode([t for t, m in zip(canonical, marks, strict=True) if m]) == "RIGHT"
    pieces = [i for part in ("<", "answer", ">", "RIGHT", "</", "answer", ">")
              for i in tokenizer(part, add_special_tokens=False)["input_ids"]] + [answers.eos]
    marks = chosen_tokens(tokenizer, codec, pieces)
    assert tokenizer.decode([t for t, m in zip(pieces, marks, strict=True) if m]) == "RIGHT"
