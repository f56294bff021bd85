"""Training to a criterion: the decision-state check grades like evaluation (ties count, unparsable output is
wrong), SFT stops once every FrozenLake state is optimal, and a run that misses says so."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rlft.codecs.base import load_codec
from rlft.core.errors import InvalidInputError


@pytest.fixture(scope="module")
def lake(tmp_path_factory, cli_module):
    out = tmp_path_factory.mktemp("criterion") / "fl4"
    result = cli_module("data", "export-q", "frozenlake", "--out", out, "--episodes", "10")
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def cli_module():
    from typer.testing import CliRunner

    from rlft.cli.main import app

    return lambda *args: CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def tiny(lake, cli_module):
    out = lake.parent / "tiny"
    result = cli_module("model", "init", "--dataset", lake, "--out", out, "--seed", "0")
    assert result.exit_code == 0, result.output
    return out


def _lake_rows(lake: Path):
    from rlft.datasets.folder import load_dataset_folder

    return load_dataset_folder(lake)["train"]


# ---------------------------------------------------------------------------------------------------------
# grading
# ---------------------------------------------------------------------------------------------------------
def test_check_grades_ties_as_right_and_garbage_as_wrong(lake):
    from rlft.train.criterion import decision_check

    codec = load_codec(lake)
    rows = _lake_rows(lake)
    check = decision_check(rows, codec, max_states=256, seed=0)
    assert len(check) == 11 and check.labels == rows["state"]
    # the dataset's prompts are exactly what evaluation builds through the codec for the same state
    assert check.prompts == [codec.build_prompt(s) for s in rows["state"]]
    tied = check.labels.index(6)
    assert check.correct[tied] == {0, 2}  # LEFT and RIGHT are both optimal in state 6
    names = codec.action_names
    texts = [f"<answer>{names[min(c)]}</answer>" for c in check.correct]
    ok, invalid = check.grade(texts)
    assert ok.all() and invalid == 0
    texts[tied] = "<answer>RIGHT</answer>"  # the other tied action: still optimal
    texts[0] = "I would go left"  # no answer block: unparsable, so wrong
    wrong = next(i for i, c in enumerate(check.correct) if i > 0 and 3 not in c)
    texts[wrong] = "<answer>UP</answer>"
    ok, invalid = check.grade(texts)
    assert invalid == 1
    assert ok.tolist() == [i not in (0, wrong) for i in range(11)]


def test_check_samples_states_and_grades_continuous_within_tolerance(tmp_path):
    import datasets
    from gymnasium import spaces

    from rlft.codecs.raw import RawCodec
    from rlft.codecs.template import PromptTemplate
    from rlft.train.criterion import decision_check

    codec = RawCodec(spaces.Box(-1, 1, (2,)), spaces.Box(-2.0, 2.0, (2,)), PromptTemplate(), precision=2)
    actions = np.linspace(-1.5, 1.5, 40).reshape(20, 2)
    rows = datasets.Dataset.from_dict({"prompt": [f"<observation>{i}</observation>" for i in range(20)],
                                       "action": actions.tolist()})
    check = decision_check(rows, codec, max_states=5, seed=3, tolerance=0.05)
    assert len(check) == 5 and len(set(check.labels)) == 5
    assert check.labels == sorted(check.labels)
    again = decision_check(rows, codec, max_states=5, seed=3)
    assert again.labels == check.labels  # seeded
    target = check.correct[0]
    # range 4 per dimension: within 0.05 * 4 = 0.2 is right, beyond is wrong
    near = codec.build_completion(target + np.array([0.19, -0.19]))
    far = codec.build_completion(target + np.array([0.0, 0.25]))
    ok, invalid = check.grade([near, far, "nonsense", near, near])
    assert ok[:3].tolist() == [True, False, False] and invalid == 1
    with pytest.raises(InvalidInputError, match="needs an 'action' column"):
        decision_check(rows.remove_columns("action"), codec, 5, 0)


# ---------------------------------------------------------------------------------------------------------
# training to the criterion
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_sft_stops_once_every_state_is_optimal_and_evaluation_agrees(lake, tiny, cli_module, tmp_path):
    run = tmp_path / "sft"
    result = cli_module("train", "sft", "--config", "pipelines/sft.yaml", "--dataset", lake, "--model", tiny,
                        "--out", run, "--no-lora", "--eval-split", "train", "--max-steps", "400",
                        "--check-steps", "10", "--stop-at-accuracy", "1.0", "--seed", "0")
    assert result.exit_code == 0, result.output
    summary = json.loads((run / "summary.json").read_text())
    record = summary["criterion"]
    assert record["reached"] and record["target"] == 1.0 and record["states"] == 11
    assert summary["global_step"] == record["reached_at_step"] < 400  # stopped early, at the check that passed
    assert record["history"][0][0] == 0 and record["history"][-1] == [record["reached_at_step"], 1.0]
    assert all(acc < 1.0 for _, acc in record["history"][:-1])
    assert "criterion reached at step" in result.output
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run / "logs")).Reload()
    logged = [(e.step, e.value) for e in events.Scalars("train/decision_accuracy")]
    assert logged == [(step, pytest.approx(acc, abs=1e-6)) for step, acc in record["history"][1:]]
    report = tmp_path / "llm.json"
    result = cli_module("eval", "--policy", f"llm:{run}", "--episodes", "30", "--num-envs", "8", "--constrained",
                        "--out", report)
    assert result.exit_code == 0, result.output
    data = json.loads(report.read_text())
    assert data["expert_agreement"] == 1.0 and data["invalid_action_rate"] == 0.0
    assert data["optimal_success_exact"] == pytest.approx(0.7401649, abs=1e-6)


@pytest.mark.slow
def test_a_run_that_misses_the_criterion_says_so(lake, tiny, tmp_path, capsys):
    from rlft.core.console import console
    from rlft.train.sft import run_sft
    from rlft.train.sft_config import SFTStageConfig

    config = SFTStageConfig.of(dataset=str(lake), model=str(tiny), out=tmp_path / "short", lora=False, max_steps=4,
                            check_steps=2, stop_at_accuracy=1.0, eval_split="none", learning_rate=1e-3,
                            save_steps=1000)
    with console.capture() as captured:
        info = run_sft(config)
    record = info["metrics"]["criterion"]
    assert record["reached"] is False and record["reached_at_step"] is None
    assert info["metrics"]["global_step"] == 4
    assert [step for step, _ in record["history"]] == [0, 2, 4]
    assert record["final_accuracy"] < 1.0 and record["wrong_states"]
    assert "criterion NOT reached" in captured.get()


@pytest.mark.slow
def test_grpo_logs_decision_accuracy(lake, tiny, tmp_path):
    from rlft.core.console import console
    from rlft.train.grpo.config import GRPOStageConfig
    from rlft.train.grpo.run import run_grpo

    config = GRPOStageConfig.of(dataset=str(lake), model=str(tiny), out=tmp_path / "grpo", lora=False, max_steps=2,
                             per_device_train_batch_size=4, num_generations=2, check_steps=1,
                             rewards=["format", "q-advantage"], save_steps=1000)
    with console.capture():
        info = run_grpo(config)
    record = info["metrics"]["criterion"]
    assert record["target"] is None and record["reached"] is False
    assert [step for step, _ in record["history"]] == [0, 1, 2]


@pytest.mark.parametrize("flags,message", [
    (["--stop-at-accuracy", "1.5"], "--stop-at-accuracy must be in"),
    (["--check-steps", "-1"], "--check-steps must be at least 0"),
    (["--check-steps", "5", "--check-states", "0"], "--check-states must be at least 1"),
])
def test_bad_criterion_settings_fail_before_anything_is_written(lake, tiny, cli_module, tmp_path, flags, message):
    run = tmp_path / "run"
    result = cli_module("train", "sft", "--dataset", lake, "--model", tiny, "--out", run, "--no-lora", *flags)
    assert result.exit_code == 2
    assert message in result.output
    assert not run.exists()


def test_tiny_models_start_with_unit_variance_logits(lake, tiny):
    """hidden ** -0.5: the std that keeps tiny models off the marginal-distribution plateau (models.py)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny)
    info = json.loads((tiny / "rlft_model.json").read_text())
    assert info["init_std"] == pytest.approx(64 ** -0.5)
    q = model.model.layers[0].self_attn.q_proj.weight
    assert float(q.detach().std()) == pytest.approx(64 ** -0.5, rel=0.05)


# ---------------------------------------------------------------------------------------------------------
# continuous actions: the action error
# ---------------------------------------------------------------------------------------------------------
def test_action_error_against_a_hand_computed_case():
    from rlft.policy.action_metrics import action_errors, error_summary

    recorded = np.array([[0.0, 1.0], [0.5, -1.0], [1.0, 0.0], [0.0, 0.0]])
    actions = [np.array([0.2, 1.0]), np.array([0.5, 0.0]), None, np.array([0.0, 0.0])]
    errors = action_errors(actions, recorded, scale=np.array([2.0, 4.0]))
    # |0.2|/2 = 0.1, 0; 0, |1|/4 = 0.25; unparsable: 1, 1; exact: 0, 0
    assert errors.tolist() == [[0.1, 0.0], [0.0, 0.25], [1.0, 1.0], [0.0, 0.0]]
    summary = error_summary(errors)
    assert summary["action_error"] == pytest.approx((0.05 + 0.125 + 1.0 + 0.0) / 4)
    assert summary["action_error_worst10"] == pytest.approx(1.0)  # the worst tenth of 4 states is one state
    assert summary["action_error_per_dim"] == [pytest.approx(0.275), pytest.approx(0.3125)]


def test_stop_at_accuracy_is_refused_on_continuous_actions():
    import datasets
    from gymnasium import spaces

    from rlft.codecs.raw import RawCodec
    from rlft.codecs.template import PromptTemplate
    from rlft.train.criterion import CriterionCallback, decision_check

    codec = RawCodec(spaces.Box(-1, 1, (2,)), spaces.Box(-2.0, 2.0, (1,)), PromptTemplate(), precision=2)
    rows = datasets.Dataset.from_dict({"prompt": ["<observation>0</observation>"] * 4, "action": [[0.5]] * 4})
    check = decision_check(rows, codec, max_states=4, seed=0)
    with pytest.raises(InvalidInputError, match="--stop-at-accuracy is for discrete actions"):
        CriterionCallback(check, 10, target=0.9)
    with pytest.raises(InvalidInputError, match="must be in"):
        CriterionCallback(check, 10, error_target=1.5)
    assert CriterionCallback(check, 10, error_target=0.05).error_target == 0.05


@pytest.mark.slow
def test_sft_on_continuous_actions_reports_the_held_out_action_error(tmp_path_factory, tmp_path, capsys):
    from eval_factories import minari_dataset_folder, tiny_model
    from rlft.core.console import console
    from rlft.train.sft import run_sft
    from rlft.train.sft_config import SFTStageConfig

    data = minari_dataset_folder(tmp_path_factory, "Pendulum-v1", "binned", episodes=6, max_steps=30, bins=16)
    model = tiny_model(tmp_path_factory, data, "criterion-pendulum-binned")
    config = SFTStageConfig.of(dataset=str(data), model=str(model), out=tmp_path / "run", lora=False, max_steps=30,
                            check_steps=10, stop_at_action_error=0.001, eval_split="none", learning_rate=3e-3,
                            per_device_train_batch_size=32, save_steps=1000)
    with console.capture() as captured:
        info = run_sft(config)
    record = info["metrics"]["criterion"]
    assert record["split"] == "validation" and record["decoding"] == "bins (mean)"
    assert 0.0 < record["action_error"] < 1.0 and record["action_error_worst10"] >= record["action_error"]
    assert len(record["action_error_per_dim"]) == 1
    assert [h[0] for h in record["error_history"]] == [0, 10, 20, 30]
    # the random policy's actions are uniform over [-2, 2]: no model predicts them, its error stays near a quarter
    assert all(0.1 < error < 0.5 for _, error, _ in record["error_history"])
    assert not record["reached"] and "criterion NOT reached (action error <= 0.001)" in captured.get()
