"""``RlftDataset``: one object per dataset folder, opened once, read through by every command, on real folders."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from factories import make_bandit_dataset, make_minari_dataset, write_map
from rlft.core.errors import InvalidInputError
from rlft.datasets.dataset import RlftDataset, recorded_name
from rlft.datasets.loading import observations_actions, read_transitions, resolve_dataset


@pytest.fixture
def lake(cli, tmp_path):
    out = tmp_path / "lake"
    result = cli("data", "export-q", "frozenlake", "--map", write_map(tmp_path, ["SF", "FG"]), "--out", out,
                 "--episodes", "10", "--wording", "compact")
    assert result.exit_code == 0, result.output
    return out


def test_open_by_folder_reads_the_folders_files(lake):
    data = RlftDataset.open(str(lake))
    assert data.path == lake and data.given == str(lake)
    assert data.codec.to_dict() == json.loads((lake / "rlft_codec.json").read_text())
    assert data.info == json.loads((lake / "rlft_info.json").read_text())
    assert data.env_id == data.codec.env_id == "FrozenLake-v1"
    assert data.card_text == (lake / "README.md").read_text()
    assert data.split_names == list(data.splits()) == ["train"]
    assert data.has_split("train") and not data.has_split("validation")
    assert data.split("train").num_rows == data.table(["state"]).num_rows > 0
    assert data.has_q_values
    with pytest.raises(InvalidInputError, match=r"has no split 'test' \(its splits: train\)"):
        data.split("test")


def test_codec_info_and_splits_are_read_once(lake, monkeypatch):
    import rlft.datasets.dataset as module

    data = RlftDataset.open(lake)
    calls = []
    for name in ("load_codec", "dataset_info", "load_dataset_dict"):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, _real=real, _name=name: calls.append(_name) or _real(*a))
    assert data.codec is data.codec and data.info is data.info and data.splits() is data.splits()
    assert data.env_id and data.codec.kind
    assert sorted(calls) == ["dataset_info", "load_codec", "load_dataset_dict"]


def test_errors_are_those_of_resolve_dataset(tmp_path, monkeypatch):
    (tmp_path / "empty").mkdir()
    for name in (tmp_path / "empty", tmp_path / "no" / "such", "./relative/missing"):
        with pytest.raises(InvalidInputError) as before:
            resolve_dataset(str(name))
        with pytest.raises(InvalidInputError) as now:
            RlftDataset.open(str(name))
        assert str(now.value) == str(before.value) and "\n" not in str(now.value)
    with pytest.raises(InvalidInputError, match="not an rlft dataset folder"):
        RlftDataset.open(tmp_path / "empty")
    with pytest.raises(InvalidInputError, match="does not exist"):
        RlftDataset.open(str(tmp_path / "no" / "such"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(InvalidInputError, match="HF_HUB_OFFLINE"):
        RlftDataset.open("someone/some-dataset")


def test_a_folder_without_codec_opens_leniently_and_fails_on_its_codec(tmp_path):
    (tmp_path / "empty").mkdir()
    data = RlftDataset.open(tmp_path / "empty", require_codec=False)  # dataset_dir's rule (rlft eval, train bc)
    assert data.path == tmp_path / "empty" and data.info == {} and data.card_text is None
    with pytest.raises(InvalidInputError, match="codec file .*rlft_codec.json does not exist"):
        _ = data.codec
    with pytest.raises(InvalidInputError, match="does not exist"):
        RlftDataset.open(tmp_path / "missing", require_codec=False)


def test_recorded_is_the_absolute_folder_or_the_hub_id(lake, monkeypatch):
    monkeypatch.chdir(lake.parent)
    assert RlftDataset.open("lake").recorded == str(lake.resolve())
    assert RlftDataset("/some/cache/snapshot", "someone/data").recorded == "someone/data"
    assert recorded_name("~/nowhere-such") == "~/nowhere-such"
    assert recorded_name(os.path.relpath(lake)) == str(lake.resolve())


def test_rows_match_the_loading_functions(cli, tmp_path):
    folder = make_bandit_dataset(cli, tmp_path / "bandit", rows=40)
    data = RlftDataset.open(folder)
    assert data.env_id == "Pendulum-v1" and not data.has_q_values
    obs, actions = data.observations_actions("train", best_episodes=0.5)
    expected = observations_actions(folder, "train", 0.5)
    assert np.array_equal(obs, expected[0]) and np.array_equal(actions, expected[1])
    rows, expected = data.transitions("train", 7), read_transitions(folder, "train", 7)
    assert len(rows) == 7 and np.array_equal(rows.rewards, expected.rewards)
    assert data.reference_scores is None  # no scores in the source, none known for Pendulum


def test_reference_scores_come_from_the_source_else_the_env(cli, tmp_path):
    make_minari_dataset("cartpole/scored-v0", episodes=3, ref_scores=(10.0, 400.0))
    make_minari_dataset("cartpole/plain-v0", episodes=3)
    for name in ("scored", "plain"):
        assert cli("data", "serialize", f"cartpole/{name}-v0", "--out", tmp_path / name).exit_code == 0
    scored = RlftDataset.open(tmp_path / "scored").reference_scores
    assert (scored.random, scored.expert) == (10.0, 400.0)
    assert RlftDataset.open(tmp_path / "scored").card_text.count("random 10.0, expert 400.0") == 1
    plain = RlftDataset.open(tmp_path / "plain").reference_scores
    from rlft.envs.registry import reference_scores

    assert plain == reference_scores("CartPole-v1")
