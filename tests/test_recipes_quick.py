"""Every committed results recipe (pipelines/experiments/*.yaml) still runs at its quick preset: a toy-sized run of
every step, seed 0, that writes nothing outside its --out folder (its results records included, never results/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RECIPES = sorted((REPO / "pipelines" / "experiments").glob("*.yaml"))
IDS = [p.stem for p in RECIPES]


def _option(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, word in enumerate(argv[:-1]) if word == flag]


def _runs(path: Path, out: Path, sets: list[str], seeds: str | None = None, depth: int = 0) -> list[list[str]]:
    """The argv of every command a quick run would run, nested pipelines expanded (with the --set they are given);
    each nested pipeline that has a quick preset must be given quick=true, and a pipeline's results records and
    summary must share one folder."""
    from rlft.cli.pipeline_spec import load_pipeline, read_pipeline_spec

    assert depth < 4, f"{path}: pipelines nested too deep"
    runs = load_pipeline(path, out, True, sets, seeds=seeds)[1]
    folders = {(REPO / d).resolve() for _, a in runs if a[:2] in (["results", "record"], ["results", "summarize"])
               for d in _option(a, "--results-dir") or ["results"]}
    assert len(folders) <= 1, f"{path.name}: its records and summary go to different folders {folders}"
    argvs = []
    for _, argv in runs:
        argvs.append(argv)
        if argv[:2] == ["pipeline", "run"]:
            inner, inner_sets = REPO / argv[2], _option(argv, "--set")
            inner_seeds = (_option(argv, "--seeds") or [None])[0]
            inner_vars = read_pipeline_spec(inner).get("vars") or {}
            if "quick" in inner_vars:
                assert any(s.lower() == "quick=true" for s in inner_sets), f"{path.name} runs {argv[2]} without quick"
            argvs += _runs(inner, Path(_option(argv, "--out")[0]), inner_sets, inner_seeds, depth + 1)
    return argvs


def _under(path: str, out: Path) -> bool:
    return (REPO / path).resolve().is_relative_to(out.resolve())


@pytest.mark.parametrize("recipe", RECIPES, ids=IDS)
def test_every_recipe_has_a_quick_preset_that_writes_only_under_out(recipe, tmp_path, monkeypatch):
    """Read, not run: quick=true reaches every nested pipeline, and every output (--out, --results-dir) of every
    command, nested ones included, lies under the run's --out, so a quick run cannot replace committed results."""
    from rlft.cli.pipeline_spec import read_pipeline_spec

    monkeypatch.chdir(REPO)
    spec = read_pipeline_spec(recipe)
    assert "quick" in (spec.get("vars") or {}), f"{recipe.name}: no quick variable"
    out = tmp_path / "out"
    argvs = _runs(recipe, out, ["quick=true"], seeds="0")
    results = [a for a in argvs if a[:2] in (["results", "record"], ["results", "summarize"])]
    assert results, f"{recipe.name} records no results"
    for argv in argvs:
        if argv[:2] == ["results", "record"] or argv[:2] == ["results", "summarize"]:
            assert _option(argv, "--results-dir"), f"{recipe.name}: {' '.join(argv[:3])} writes to results/"
        for value in _option(argv, "--out") + _option(argv, "--results-dir"):
            assert _under(value, out), f"{recipe.name}: {' '.join(argv[:3])} writes to {value}, outside --out"
    assert not [a for a in argvs if a[:2] == ["model", "fetch"]], f"{recipe.name}: quick fetches a model"


def _tree(folder: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime for p in folder.rglob("*")} if folder.exists() else {}


@pytest.mark.slow
@pytest.mark.parametrize("recipe", RECIPES, ids=IDS)
def test_every_recipe_runs_at_its_quick_preset(cli, recipe, tmp_path, monkeypatch):
    from rlft.cli.pipeline_spec import load_pipeline

    monkeypatch.chdir(REPO)  # the recipes name pipelines/ and their data relative to the repository root
    out = tmp_path / "out"
    names = {a[2] for _, a in load_pipeline(recipe, out, True, ["quick=true"], seeds="0")[1]
             if a[:2] == ["results", "record"]}
    committed = {name: _tree(REPO / "results" / name) for name in names}
    result = cli("pipeline", "run", recipe.relative_to(REPO), "--out", out, "--overwrite", "--seeds", "0",
                 "--set", "quick=true")
    assert result.exit_code == 0, result.output
    for name in names:
        record = json.loads((out / "results" / name / "seed-0.json").read_text())
        assert record  # the seed's reports, read by results record
        assert (out / "results" / name / "summary.json").is_file()
        assert _tree(REPO / "results" / name) == committed[name], f"{name}: committed results changed"
    assert list(out.glob("seed-0/**/*.json")), "no reports under the seed's folder"
