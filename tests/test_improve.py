"""``rlft data improve``: Q-improved labels from real HalfCheetah states, the committed SAC expert continuing."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

from eval_factories import minari_dataset_folder
from rlft.codecs.base import load_codec
from rlft.core.errors import InvalidInputError, OutputExistsError
from rlft.datasets.improve import ImproveConfig, improve_dataset, improved_action, label_consistency, relabel
from rlft.envs.state import lookahead_values, perturbation_values, step_from_state
from rlft.results.record import dataset_record

EXPERT = Path(__file__).resolve().parents[1] / "pipelines" / "experts" / "halfcheetah-medium-sac.zip"


@pytest.fixture(scope="module")
def cheetah_data(tmp_path_factory):
    return minari_dataset_folder(tmp_path_factory, "HalfCheetah-v5", fmt="binned", episodes=2, max_steps=12, bins=8)


def _split(folder: Path, split: str) -> pd.DataFrame:
    return pd.concat([pd.read_parquet(p) for p in sorted((folder / "data").glob(f"{split}-*.parquet"))])


def test_improved_action_best_and_soft_against_hand_computed_weights():
    candidates = np.array([[0.0, 0.0], [1.0, -1.0], [0.5, 0.5]])
    values = np.array([1.0, 3.0, 2.0])
    assert improved_action(values, candidates, "best").tolist() == [1.0, -1.0]
    # soft: weights exp((v - 3) / std(v)), std = sqrt(2/3)
    w = np.exp((values - 3.0) / np.sqrt(2.0 / 3.0))
    expected = (w[:, None] * candidates).sum(0) / w.sum()
    assert np.allclose(improved_action(values, candidates, "soft"), expected)
    assert np.allclose(improved_action(np.ones(3), candidates, "soft"), candidates.mean(0))  # all tied: the mean


def test_relabel_keeps_a_saturated_action_at_its_bound():
    # a label at the upper bound, its perturbations both sides of it; beyond the bound the env plays the bound, so
    # the first three tie. Averaging the clipped actions would give (1 + 1 + 1 + 0.8) / 4 = 0.95: an inward pull
    label, proposals = np.array([1.0]), np.array([[1.0], [1.2], [1.1], [0.8]])
    values = np.array([5.0, 5.0, 5.0, 5.0])
    assert relabel(values, proposals, -1.0, 1.0, "soft").tolist() == [1.0]
    values = np.array([5.0, 5.0, 5.0, 1.0])  # the inside one is worse: the label stays at the bound
    assert relabel(values, proposals, -1.0, 1.0, "soft").tolist() == [1.0]
    assert relabel(values, proposals, -1.0, 1.0, "best").tolist() == label.tolist()


def test_relabel_step_scales_the_change_from_the_recorded_action():
    proposals, values = np.array([[0.2], [0.4], [0.0]]), np.array([1.0, 2.0, 0.0])
    once = relabel(values, proposals, -1.0, 1.0, "best")
    assert once.tolist() == [0.4]
    assert np.allclose(relabel(values, proposals, -1.0, 1.0, "best", step=2.5), [0.2 + 2.5 * 0.2])
    assert relabel(values, proposals, -1.0, 1.0, "best", step=5.0).tolist() == [1.0]  # clipped last


def test_lookahead_values_match_stepping_each_candidate_alone():
    env = gym.make("HalfCheetah-v5")
    obs, _ = env.reset(seed=4)
    for _ in range(5):
        obs, *_ = env.step(env.action_space.sample())
    candidates = np.random.default_rng(0).uniform(-1, 1, (3, 6)).astype(np.float32)
    zero = np.zeros(6, dtype=np.float32)
    envs = [gym.make("HalfCheetah-v5") for _ in candidates]
    values = lookahead_values(envs, obs, candidates, lambda batch: np.zeros((len(batch), 6), np.float32), 4, 0.9)
    alone = [step_from_state(env, obs, c, horizon=4, policy=lambda o: zero, gamma=0.9).reward for c in candidates]
    assert np.allclose(values, alone, atol=1e-6)
    assert len(set(np.round(values, 6))) == 3  # the candidates really differ


def test_mirrored_perturbations_come_in_opposite_pairs_around_the_action():
    env = gym.make("HalfCheetah-v5")
    obs, _ = env.reset(seed=1)
    action = np.full(6, 0.3, dtype=np.float32)
    envs = [gym.make("HalfCheetah-v5") for _ in range(5)]
    zero = lambda batch: np.zeros((len(batch), 6), np.float32)  # noqa: E731
    proposals, values = perturbation_values(envs, obs, action, np.random.default_rng(0), 0.5, -1.0, 1.0, zero, 2,
                                            0.99, mirrored=True)
    assert proposals.shape == (5, 6) and values.shape == (5,)
    assert np.allclose(proposals[1:3] - action, action - proposals[3:5])  # d and -d
    assert np.allclose(proposals.mean(0), action, atol=1e-6)  # all tied, the soft label stays put
    plain, _ = perturbation_values(envs, obs, action, np.random.default_rng(0), 0.5, -1.0, 1.0, zero, 2, 0.99)
    assert not np.allclose(plain.mean(0), action, atol=1e-3)
    with pytest.raises(InvalidInputError, match="odd number of candidates"):  # the shared function checks too
        perturbation_values(envs[:4], obs, action, np.random.default_rng(0), 0.5, -1.0, 1.0, zero, 2, 0.99,
                            mirrored=True)


def test_label_consistency_is_the_cosine_of_two_draws():
    change = np.array([[0.1, -0.2], [0.0, 0.3]])
    assert label_consistency(change, change) == pytest.approx(1.0)
    assert label_consistency(change, -change) == pytest.approx(-1.0)
    assert label_consistency(change, np.array([[0.2, 0.1], [0.0, 0.0]])) == pytest.approx(0.0)
    assert label_consistency(change, np.zeros_like(change)) is None


def test_improve_writes_relabelled_rows_and_keeps_the_rest(cheetah_data, tmp_path):
    out = tmp_path / "improved"
    summary = improve_dataset(ImproveConfig(dataset=cheetah_data, expert=EXPERT, out=out, rows=6, horizon=3,
                                            candidates=4, weighting="best", consistency_rows=4))
    train, source = _split(out, "train"), _split(cheetah_data, "train").iloc[:6]
    assert len(train) == 6 and summary["rows"] == 6
    assert summary["mean_best_gain"] >= 0.0  # the recorded action is a candidate: the best is never worse
    assert np.allclose(np.stack(train["original_action"]), np.stack(source["action"]))
    codec = load_codec(out)
    for completion, action in zip(train["completion"], train["action"], strict=True):
        assert completion == codec.build_completion(np.asarray(action, dtype=np.float32))
        assert np.all(np.abs(action) <= 1.0)
    assert not np.allclose(np.stack(train["action"]), np.stack(source["action"]))  # some label moved
    pd.testing.assert_frame_equal(_split(out, "validation"), _split(cheetah_data, "validation"))
    info = json.loads((out / "rlft_info.json").read_text())
    assert info["improved"]["weighting"] == "best" and info["improved"]["horizon"] == 3
    assert info["improved"]["consistency_rows"] == 4 and -1.0 <= info["improved"]["label_consistency"] <= 1.0
    kept = dataset_record(info)["improved"]  # a results record keeps how the labels were made and what they hold
    assert kept["label_consistency"] == info["improved"]["label_consistency"] and kept["weighting"] == "best"
    assert "improved" not in dataset_record({k: v for k, v in info.items() if k != "improved"})
    assert "Q-improved labels" in (out / "README.md").read_text()
    assert f"{info['improved']['label_consistency']:.3f}" in (out / "README.md").read_text()
    with pytest.raises(OutputExistsError, match="not empty"):  # refused up front; the finished folder stays
        improve_dataset(ImproveConfig(dataset=cheetah_data, expert=EXPERT, out=out, rows=2, horizon=2))
    assert len(_split(out, "train")) == 6


def test_improve_refuses_discrete_actions_and_bad_settings(tmp_path_factory, tmp_path):
    cartpole = minari_dataset_folder(tmp_path_factory, "CartPole-v1", episodes=2, max_steps=5)
    with pytest.raises(InvalidInputError, match="discrete"):
        improve_dataset(ImproveConfig(dataset=cartpole, expert=EXPERT, out=tmp_path / "x"))
    with pytest.raises(InvalidInputError, match="weighting"):
        ImproveConfig(dataset=cartpole, expert=EXPERT, out=tmp_path / "x", weighting="mean").check()
    with pytest.raises(InvalidInputError, match="--step"):
        ImproveConfig(dataset=cartpole, expert=EXPERT, out=tmp_path / "x", step=0.0).check()
    with pytest.raises(InvalidInputError, match="must be odd"):
        ImproveConfig(dataset=cartpole, expert=EXPERT, out=tmp_path / "x", candidates=8, mirrored=True).check()
    with pytest.raises(InvalidInputError, match=r"--candidates must be within \[2, 4096\]"):
        ImproveConfig(dataset=cartpole, expert=EXPERT, out=tmp_path / "x", candidates=1).check()
    assert not (tmp_path / "x").exists()
