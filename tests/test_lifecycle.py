"""Every training stage runs one lifecycle (``rlft.train.lifecycle``): check, load the data, seed, build the model,
learn; in that order, seeded once, and a refusal in the checks reads and writes nothing."""

from __future__ import annotations

import pytest

from rlft.train import lifecycle
from rlft.train.bc import BCConfig, BCStage
from rlft.train.grpo.run import GRPOStage
from rlft.train.lifecycle import Stage, TRLStage
from rlft.train.offline import OfflineStage
from rlft.train.online import OnlineStage
from rlft.train.sft import SFTStage

STEPS = ["check", "load_data", "seed", "build_model", "learn"]


@pytest.mark.parametrize("stage", [SFTStage, GRPOStage, BCStage, OfflineStage, OnlineStage])
def test_every_stage_keeps_the_lifecycles_order(stage):
    assert issubclass(stage, Stage) and stage.run is Stage.run  # the order is the base's, never a stage's own
    assert stage.seed is Stage.seed  # seeded in one place
    assert stage.name  # what its run records as its stage
    if issubclass(stage, TRLStage):
        assert stage.learn is TRLStage.learn  # the run folder's lifecycle is shared by every TRL stage


def _spied(monkeypatch, stage_class):
    calls = []
    for step in STEPS:
        original = getattr(stage_class, step)

        def spy(self, *args, _original=original, _step=step, **kwargs):
            calls.append(_step)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(stage_class, step, spy)
    seeds = []
    real_seed = lifecycle.seed_everything
    monkeypatch.setattr(lifecycle, "seed_everything", lambda seed: seeds.append(seed) or real_seed(seed))
    return calls, seeds


def test_a_stage_runs_its_steps_in_order_and_seeds_once(monkeypatch, tmp_path, tmp_path_factory):
    from eval_factories import frozenlake_dataset

    calls, seeds = _spied(monkeypatch, BCStage)
    info = BCStage(BCConfig(dataset=str(frozenlake_dataset(tmp_path_factory)), out=tmp_path / "bc.pt", epochs=2,
                            seed=7)).run()
    assert calls == STEPS and seeds == [7]
    assert (tmp_path / "bc.pt").is_file() and info["train_rows"] > 0


def test_a_refusal_in_the_checks_reads_and_writes_nothing(monkeypatch, tmp_path, tmp_path_factory):
    from eval_factories import frozenlake_dataset
    from rlft.core.claims import release_outputs
    from rlft.core.errors import InvalidInputError

    calls, seeds = _spied(monkeypatch, BCStage)
    with pytest.raises(InvalidInputError, match="--hidden must be layer sizes"):
        BCStage(BCConfig(dataset=str(frozenlake_dataset(tmp_path_factory)), out=tmp_path / "bc.pt",
                         hidden=[0])).run()
    release_outputs()  # the claim on --out (a lock beside it), as the command's exit releases it
    assert calls == ["check"] and seeds == [] and not any(tmp_path.iterdir())


def test_an_out_spelled_through_itself_is_replaced_like_any_other(cli, tmp_path, monkeypatch):
    """``run/../run --overwrite`` set the old run aside, then could not write through the missing ``run``: the
    command failed and the run was gone from --out (hostile pass 12, B5)."""
    from factories import make_lake_q_model

    (tmp_path / "inputs").mkdir()
    data, model = make_lake_q_model(tmp_path / "inputs")
    monkeypatch.chdir(tmp_path)
    base = ["train", "sft", "--dataset", data, "--model", model, "--no-lora", "--eval-split", "none",
            "--max-steps", "1"]
    assert cli(*base, "--out", "run").exit_code == 0
    first = (tmp_path / "run" / "rlft_run.json").read_text()
    result = cli(*base, "--out", "run/../run", "--overwrite", "--seed", "1")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "run" / "rlft_run.json").read_text() != first and (tmp_path / "run" / "config.json").is_file()
    assert not list(tmp_path.glob(".run.*"))  # nothing left aside
