"""Results: the README's tables are what `rlft results render` makes from the committed `results/`; seed records
aggregate into mean and spread; stale or missing results are reported."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rlft.core.errors import InvalidInputError
from rlft.results.render import BLOCK, pages, render_text

REPO = Path(__file__).resolve().parents[1]


def test_readme_and_docs_equal_the_rendering_of_the_committed_results():
    names = []
    for page in pages(REPO):
        text = page.read_text(encoding="utf-8")
        names += [m.group("name") for m in BLOCK.finditer(text)]
        rendered, changed = render_text(text, REPO / "results", page.parent)
        assert changed == [], f"{page.name} blocks differ from results/: {changed} (run: rlft results render)"
        assert rendered == text
    assert {"overview", "demo", "benchmarks/serialize"} <= set(names)
    # every experiment with a summary is shown somewhere
    summaries = {p.parent.name for p in (REPO / "results").glob("*/summary.json")}
    assert summaries <= set(names), f"results without a page block: {sorted(summaries - set(names))}"


def test_docs_pages_link_plots_through_the_results_folder_beside_them(tmp_path):
    results = tmp_path / "results"
    (results / "toy").mkdir(parents=True)
    (results / "toy" / "summary.json").write_text(json.dumps({"title": "Toy", "tables": [], "plot": "summary.png"}))
    docs = tmp_path / "docs"
    docs.mkdir()
    page = "<!-- results:toy -->\n<!-- /results:toy -->\n"
    assert "](../results/toy/summary.png)" in render_text(page, results, docs)[0]  # no link beside the page
    (docs / "results").symlink_to("../results")
    assert "](results/toy/summary.png)" in render_text(page, results, docs)[0]  # the site carries the plot
    assert "](results/toy/summary.png)" in render_text(page, results, tmp_path)[0]


def _report(path: Path, policy: str, kind: str, success: float, agreement: float, seed: int) -> Path:
    report = {"rlft_report_version": 1, "env_id": "FrozenLake-v1", "policy": policy, "policy_kind": kind,
              "episodes": 10, "seed": seed, "seeds": list(range(seed, seed + 10)), "success_rate": success,
              "return_mean": success, "optimal_success_exact": 0.74, "expert_agreement": agreement,
              "invalid_action_rate": 0.0 if kind == "llm" else None, "wall_seconds": 1.5}
    path.write_text(json.dumps(report))
    return path


def _run(folder: Path, steps: int, reached: bool) -> Path:
    folder.mkdir(parents=True)
    summary = {"stage": "sft", "global_step": steps, "train_runtime_s": steps / 10.0,
               "criterion": {"target": 1.0, "reached": reached, "reached_at_step": steps if reached else None,
                             "final_accuracy": 1.0 if reached else 0.5, "states": 11,
                             "history": [[0, 0.2], [steps, 1.0 if reached else 0.5]]}}
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def test_seed_records_summarize_into_mean_and_spread_and_render(tmp_path):
    from rlft.results.record import write_seed_record
    from rlft.results.render import render_readme
    from rlft.results.summary import summarize

    results = tmp_path / "results"
    for seed, (success, steps, reached) in enumerate([(0.6, 40, True), (0.8, 60, True), (0.7, 500, False)]):
        work = tmp_path / f"seed-{seed}"
        work.mkdir()
        write_seed_record("toy", seed, {"llm": _report(work / "llm.json", "llm:x", "llm", success, 1.0, seed),
                                        "q-greedy": _report(work / "q.json", "q-greedy", "q-greedy", 0.7, 1.0, seed)},
                          {"sft": _run(work / "run", steps, reached)}, results, f"make experiment SEEDS={seed}")
    record = json.loads((results / "toy" / "seed-1.json").read_text())
    assert record["seed"] == 1 and record["reports"]["llm"]["episode_seeds"] == [1, 10]
    verdict = record["reports"]["llm"]["verdict"]
    assert verdict["matched"] is True and verdict["reference"] == 0.7  # q-greedy on the same episodes
    assert record["reports"]["q-greedy"]["verdict"] is None
    assert record["machine"]["cores"] and record["versions"]["python"]
    summary = summarize("toy", results, title="Toy", command="make experiment NAME=toy")
    assert summary["seeds"] == [0, 1, 2]
    policies, runs = summary["tables"]
    llm = policies["rows"][0]["cells"]["success_rate"]
    assert llm["mean"] == pytest.approx(0.7) and llm["std"] == pytest.approx(0.1)
    assert (llm["min"], llm["max"], llm["n"]) == (0.6, 0.8, 3)
    assert "return_mean" not in [c["key"] for c in policies["columns"]]  # FrozenLake: the return is the success
    assert runs["rows"][0]["cells"]["reached"] == {"count": 2, "n": 3, "values": [True, True, False]}
    assert (results / "toy" / "summary.png").stat().st_size > 1000
    assert "on 3 of 3 seeds" in summary["notes"][0] and "q-greedy's on the same episodes" in summary["notes"][0]

    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- results:toy -->\nstale\n<!-- /results:toy -->\nend\n")
    assert render_readme(readme, results, check=True) == ["toy"]
    assert "stale" in readme.read_text()  # --check writes nothing
    assert render_readme(readme, results) == ["toy"]
    text = readme.read_text()
    assert "| llm | 0.700 ± 0.100 (0.600–0.800) | 0.740 (all 3) |" in text
    assert "| sft | 2/3 | 50 ± 14 (40–60) |" in text
    assert "![Toy](results/toy/summary.png)" in text
    assert "3 seeds (0, 1, 2)" in text and "reproduce: `make experiment NAME=toy`" in text
    assert text.startswith("intro\n") and text.endswith("<!-- /results:toy -->\nend\n")
    assert render_readme(readme, results) == []  # rendering again changes nothing


def test_render_check_exit_code_and_missing_results(cli, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("<!-- results:nothing-here -->\n<!-- /results:nothing-here -->\n")
    (tmp_path / "results").mkdir()
    result = cli("results", "render", "--readme", readme, "--results-dir", tmp_path / "results")
    assert result.exit_code == 2 and "has no file" in result.output
    readme.write_text("no blocks\n")
    with pytest.raises(InvalidInputError, match="no <!-- results:NAME --> blocks"):
        from rlft.results.render import render_readme

        render_readme(readme, tmp_path)
    (tmp_path / "results" / "b.json").write_text(json.dumps({"title": "B", "tables": [
        {"label_header": "k", "columns": [{"key": "v", "label": "v", "format": "x"}],
         "rows": [{"label": "one", "cells": {"v": 2.0}}]}]}))
    readme.write_text("<!-- results:b -->\nold\n<!-- /results:b -->\n")
    result = cli("results", "render", "--readme", readme, "--results-dir", tmp_path / "results", "--check")
    assert result.exit_code == 1 and "differ from" in result.output
    result = cli("results", "render", "--readme", readme, "--results-dir", tmp_path / "results")
    assert result.exit_code == 0 and "| one | 2.0x |" in readme.read_text()
    # a block opened and never closed is named with its line, not skipped or called "no blocks"
    readme.write_text("<!-- results:b -->\nold\n<!-- /results:b -->\n\n<!-- results:ghost -->\n")
    result = cli("results", "render", "--readme", readme, "--results-dir", tmp_path / "results")
    assert result.exit_code == 2 and "results:ghost opened at line 5" in result.output
    assert readme.read_text().endswith("<!-- results:ghost -->\n")


def test_integer_columns_format_means():
    from rlft.results.render import format_cell

    assert format_cell({"mean": 11.0, "std": 0.0, "min": 11.0, "max": 11.0, "n": 3}, "d") == "11 (all 3)"
    assert format_cell({"mean": 1500.5, "std": 0.7, "min": 1500.0, "max": 1501.0, "n": 2}, ",d") == \
        "1,500.5 ± 0.7 (1,500–1,501)"
    assert format_cell(7, "d") == "7" and format_cell(None, "d") == "-"


def test_record_refuses_bad_labels_and_missing_files(tmp_path):
    from rlft.results.record import parse_labelled, write_seed_record

    with pytest.raises(InvalidInputError, match="is not LABEL=PATH"):
        parse_labelled(["nolabel"], "report")
    with pytest.raises(InvalidInputError, match="given twice"):
        parse_labelled(["a=x", "a=y"], "report")
    with pytest.raises(InvalidInputError, match="does not exist"):
        write_seed_record("x", 0, {}, {"sft": tmp_path / "missing"}, tmp_path, "cmd")
    with pytest.raises(InvalidInputError, match="plain folder name"):
        write_seed_record("../x", 0, {}, {}, tmp_path, "cmd")
    assert not list(tmp_path.rglob("seed-*.json"))


def test_overview_renders_every_planned_row_with_its_headline_or_why_not(tmp_path):
    from rlft.results.record import write_seed_record
    from rlft.results.summary import summarize

    results = tmp_path / "results"
    for seed, success in enumerate([0.7, 0.8]):
        work = tmp_path / f"s{seed}"
        work.mkdir()
        write_seed_record("toy", seed, {"llm-sft": _report(work / "l.json", "llm:x", "llm", success, 1.0, seed),
                                        "random": _report(work / "r.json", "random", "random", 0.0, 0.2, seed)},
                          {"sft": _run(work / "run", 40, True)}, results, "cmd")
    summarize("toy", results, title="Toy")
    work = tmp_path / "probe"
    work.mkdir()
    write_seed_record("probe", 0, {"random": _report(work / "r.json", "random", "random", 0.0, 0.2, 0)}, {},
                      results, "cmd")
    summarize("probe", results, title="A diagnosis without an LLM")
    (results / "rows.yaml").write_text(
        "rows:\n"
        "  - {id: '1', task: Lake, method: tiny SFT, recipe: toy}\n"
        "  - {id: '2', task: Lake, method: GPU run, not_run: no GPU here}\n"
        "  - {id: '3', task: Pole, method: later, recipe: missing}\n"
        "  - {id: '4', task: Lake, method: baselines only, recipe: probe}\n")
    readme = tmp_path / "README.md"
    readme.write_text("<!-- results:overview -->\n<!-- /results:overview -->\n")
    from rlft.results.render import render_readme

    assert render_readme(readme, results) == ["overview"]
    lines = readme.read_text().splitlines()
    assert lines[1].startswith("| row | task | method | LLM |")
    assert lines[3] == ("| 1 | Lake | tiny SFT | success: llm-sft 0.750 ± 0.071 (0.700–0.800) "
                        "(agreement 1.000 (all 2)) | random 0.000 (all 2) | 2 | sft 40 (all 2) steps, 4 (all 2) s "
                        "| `make experiment NAME=toy` |")
    assert lines[4] == "| 2 | Lake | GPU run | not run: no GPU here | | | | |"
    assert lines[5] == "| 3 | Pole | later | not run: no results yet | | | | |"
    assert lines[6].startswith("| 4 | Lake | baselines only | success: no LLM in this row | random 0.000 | 1 |")
    # a miss is marked as one; the README's headline block holds the rows marked headline, with their short name
    (results / "rows.yaml").write_text(
        "rows:\n"
        "  - {id: '1', task: Lake, method: tiny SFT, recipe: toy, headline: true, short: the demo}\n"
        "  - {id: '4', task: Lake, method: baselines only, recipe: probe, miss: no LLM was trained}\n")
    readme.write_text("<!-- results:overview -->\n<!-- /results:overview -->\n"
                      "<!-- results:headlines -->\n<!-- /results:headlines -->\n")
    assert render_readme(readme, results) == ["overview", "headlines"]
    text = readme.read_text()
    assert "| 4 | Lake | **miss**: no LLM was trained. baselines only | success:" in text
    headlines = text.split("<!-- results:headlines -->\n")[1].splitlines()
    assert headlines[0] == "| row | task | what | LLM | baselines (same episodes) | seeds |"
    assert headlines[2].startswith("| 1 | Lake | the demo | success: llm-sft 0.750") and headlines[3].startswith("<!--")


def test_the_readme_is_a_front_door():
    """At most 120 lines and 10,000 characters: what it is, the two commands, the headline results, where things
    live; the whole results table lives on the results page."""
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 120 and len(readme) <= 10_000
    assert "make test" in readme and "make demo" in readme and "<!-- results:headlines -->" in readme


def test_scores_between_random_and_the_expert_on_the_same_episodes():
    from rlft.results.record import report_records

    def report(ret, kind, seed=0):
        return {"env_id": "Pendulum-v1", "return_mean": ret, "episodes": 10, "seed": seed, "seeds": [0, 9],
                "policy_kind": kind}

    records = report_records({"llm": report(-400.0, "llm"), "expert": report(-150.0, "expert"),
                              "random": report(-1150.0, "random"), "bc-mlp": report(-160.0, "bc"),
                              "elsewhere": report(-300.0, "llm", seed=5)})
    assert records["llm"]["expert_normalized_score"] == pytest.approx(75.0)
    assert records["bc-mlp"]["expert_normalized_score"] == pytest.approx(99.0)
    assert records["expert"]["expert_normalized_score"] == 100.0 and records["random"]["expert_normalized_score"] == 0
    assert records["elsewhere"]["expert_normalized_score"] is None  # other episodes: not on this scale
    assert "expert_normalized_score" not in report_records({"llm": report(-400.0, "llm")})["llm"]  # no anchors


def test_eval_compare_scores_any_env_between_random_and_the_expert(cli, tmp_path):
    def report(name, ret, kind):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"rlft_report_version": 1, "env_id": "Pendulum-v1", "policy": name,
                                    "policy_kind": kind, "episodes": 10, "seed": 0, "return_mean": ret}))
        return path

    result = cli("eval", "compare", report("llm", -400.0, "llm"), report("expert", -150.0, "expert"),
                 report("random", -1150.0, "random"))
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if "score (random" in line)
    assert "75" in row and "100" in row and "│ 0 " in row


def test_dirty_means_changed_code_not_changed_results(tmp_path):
    import subprocess

    from rlft.results.environment import git_commit

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "results").mkdir()
    for name in ("code.py", "README.md", "results/seed-0.json"):
        (tmp_path / name).write_text("a\n")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    clean = git_commit(tmp_path)
    assert clean and not clean.endswith("+dirty")
    (tmp_path / "results" / "seed-0.json").write_text("b\n")
    (tmp_path / "README.md").write_text("b\n")
    assert git_commit(tmp_path) == clean  # a recorded result and its rendering are not code
    (tmp_path / "code.py").write_text("b\n")
    assert git_commit(tmp_path) == clean + "+dirty"


def test_a_copied_tree_names_the_commit_it_was_copied_at(tmp_path, monkeypatch):
    from rlft.results.environment import git_commit

    assert git_commit(tmp_path) is None  # no checkout, nobody says
    monkeypatch.setenv("RLFT_SOURCE_COMMIT", "e325a76a358f")
    # wins over a .git the copy may carry (a stale one said another commit, +dirty)
    assert git_commit(tmp_path) == git_commit() == "e325a76a358f (copied tree)"


def test_a_record_written_long_after_its_runs_says_so(tmp_path):
    import time

    from rlft.results.record import recorded_after

    run = tmp_path / "run"
    run.mkdir()
    (run / "rlft_run.json").write_text(json.dumps({"finished": "2026-01-01T10:00:00"}))
    finished = time.mktime(time.strptime("2026-01-01T10:00:00", "%Y-%m-%dT%H:%M:%S"))
    assert recorded_after([run], finished + 60) == {"runs_finished": "2026-01-01T10:00:00"}
    assert recorded_after([run], finished + 7200)["recorded_later"] is True
    assert recorded_after([tmp_path / "missing"], finished) == {}


def test_paired_differences_on_the_same_episodes(tmp_path):
    """--paired A,B: A minus B episode by episode, in return and normalized points, with its standard error and
    the share of episodes won; reports of other episodes are refused; the summary aggregates the seeds."""
    from rlft.core.errors import InvalidInputError
    from rlft.results.record import write_seed_record
    from rlft.results.summary import summarize

    def report(path, returns, seeds):
        path.write_text(json.dumps({"rlft_report_version": 1, "env_id": "HalfCheetah-v5", "policy": "x",
                                    "policy_kind": "llm", "episodes": len(returns), "seed": seeds[0],
                                    "seeds": seeds, "returns": returns, "return_mean": sum(returns) / len(returns),
                                    "reference_scores": {"random": -280.0, "expert": 12135.0}}))
        return path

    for seed in (0, 1):
        a = report(tmp_path / f"a{seed}.json", [110.0, 220.0, 330.0, 400.0], [0, 1, 2, 3])
        b = report(tmp_path / f"b{seed}.json", [100.0, 200.0, 300.0, 440.0], [0, 1, 2, 3])
        path = write_seed_record("toy", seed, {"a": a, "b": b}, {}, tmp_path, "cmd", paired=[("a", "b")])
    pair = json.loads(path.read_text())["paired"]["a - b"]
    assert pair["return_diff"] == pytest.approx(5.0) and pair["wins"] == 0.75 and pair["episodes"] == 4
    assert pair["normalized_diff"] == pytest.approx(5.0 * 100 / (12135.0 + 280.0))
    assert pair["return_diff_stderr"] == pytest.approx(np.std([10, 20, 30, -40], ddof=1) / 2)
    other = report(tmp_path / "c.json", [1.0, 2.0, 3.0, 4.0], [4, 5, 6, 7])
    with pytest.raises(InvalidInputError, match="not played on the same episodes"):
        write_seed_record("toy2", 0, {"a": a, "c": other}, {}, tmp_path, "cmd", paired=[("a", "c")])
    table = next(t for t in summarize("toy", tmp_path)["tables"] if t["kind"] == "paired")
    assert table["rows"][0]["label"] == "a - b" and table["rows"][0]["cells"]["wins"]["mean"] == 0.75


def test_prediction_interval_is_students_for_one_more_seed_and_a_rate_stays_a_rate():
    from rlft.results.reproduce import expected_range, prediction_interval

    low, high = prediction_interval([1.0, 2.0, 3.0])  # mean 2, std 1: t(0.975, 2) = 4.303, times sqrt(1 + 1/3)
    assert (low, high) == pytest.approx((2 - 4.9683, 2 + 4.9683), abs=1e-3)
    assert prediction_interval([1.0, 2.0]) is None  # two seeds: no range to reproduce into
    assert expected_range([0.9, 1.0, 0.95], "success_rate")[1] == 1.0
    assert expected_range([0.9, 1.0, 0.95], "normalized_score")[1] > 1.0


def test_results_check_says_whether_a_new_seed_lands_in_the_committed_seeds_range(cli, tmp_path):
    from rlft.results.record import write_seed_record

    results = tmp_path / "results"

    def seed_record(folder: Path, seed: int, success: float) -> Path:
        work = tmp_path / f"work-{folder.name}-{seed}"
        work.mkdir()
        return write_seed_record("toy", seed, {"llm": _report(work / "llm.json", "llm:x", "llm", success, 1.0, seed)},
                                 {}, folder, "make experiment NAME=toy")

    for seed, success in enumerate([0.6, 0.7, 0.8, 0.7]):
        seed_record(results, seed, success)
    elsewhere = tmp_path / "fresh-clone"
    inside = cli("results", "check", "toy", "--record", seed_record(elsewhere, 9, 0.75), "--results-dir", results)
    assert inside.exit_code == 0, inside.output
    assert "seed 9 reproduces toy" in inside.output and "0.75" in inside.output
    outside = cli("results", "check", "toy", "--record", seed_record(elsewhere, 8, 0.2), "--results-dir", results)
    assert outside.exit_code == 1 and "outside the expected range: llm" in outside.output
    # a committed seed is checked against the others, never against itself
    again = cli("results", "check", "toy", "--record", results / "toy" / "seed-3.json", "--results-dir", results)
    assert again.exit_code == 0 and "against seeds [0, 1, 2]" in again.output.replace("\n", "")
    few = cli("results", "check", "toy", "--record", results / "toy" / "seed-3.json", "--results-dir",
              tmp_path / "none")
    assert few.exit_code == 2
    (tmp_path / "bad.json").write_text("[1]")
    bad = cli("results", "check", "toy", "--record", tmp_path / "bad.json", "--results-dir", results)
    assert bad.exit_code == 2 and "JSON object" in bad.output


def test_results_check_names_a_new_seed_trained_on_another_build_of_the_data(cli, tmp_path):
    """Seed 5 of halfcheetah-offline-replay missed because its clone built other data (an expert trained on another
    CPU stops at another step): the check says so beside the verdict instead of leaving it to be found."""
    import json

    from rlft.results.record import write_seed_record

    results = tmp_path / "results"

    def seed_record(folder: Path, seed: int, success: float, episodes: int) -> Path:
        work = tmp_path / f"work-{folder.name}-{seed}"
        work.mkdir()
        path = write_seed_record("toy", seed, {"llm": _report(work / "llm.json", "llm:x", "llm", success, 1.0, seed)},
                                 {}, folder, "make experiment NAME=toy")
        record = json.loads(path.read_text())
        record["datasets"] = {"toy data": {"episodes": episodes, "steps": episodes * 10, "return_mean": 2220.79}}
        path.write_text(json.dumps(record))
        return path

    for seed, success in enumerate([0.6, 0.7, 0.8]):
        seed_record(results, seed, success, 130)
    same = cli("results", "check", "toy", "--record", seed_record(tmp_path / "a", 9, 0.75, 130),
               "--results-dir", results)
    assert same.exit_code == 0 and "another build" not in same.output
    other = cli("results", "check", "toy", "--record", seed_record(tmp_path / "b", 8, 0.75, 110),
                "--results-dir", results)
    text = " ".join(other.output.split())
    assert other.exit_code == 0, other.output  # the verdict is the scores'; the build is said beside it
    assert "seed 8 trained on another build of toy data (110 episodes, 1100 steps" in text
    assert "the committed seeds': 130 episodes, 1300 steps" in text


@pytest.mark.parametrize("words", [["summarize", "x"], ["record", "x", "--seed", "0"]])
def test_a_reproduce_command_with_a_recipes_variable_left_in_is_refused(cli, tmp_path, words):
    """A committed summary read `make experiment NAME={experiment}`: not a command a reader can run."""
    result = cli("results", *words, "--reproduce", "make experiment NAME={experiment}", "--results-dir", tmp_path)
    assert result.exit_code == 2 and "holds the unfilled variable {experiment}" in result.output, result.output
    assert not any(tmp_path.iterdir())


def test_record_and_summarize_never_replace_a_users_file_of_their_names(tmp_path):
    """A user's seed-0.json, summary.json or summary.png in the results folder was silently replaced (hostile pass
    12, B8): refused, the file kept; rlft's own files are replaced as before."""
    from rlft.core.errors import OutputExistsError
    from rlft.results.record import write_seed_record
    from rlft.results.summary import summarize

    results, work = tmp_path / "results", tmp_path / "work"
    work.mkdir()
    reports = {"llm": _report(work / "llm.json", "llm:x", "llm", 0.6, 1.0, 0)}
    write_seed_record("toy", 0, reports, {}, results, "make x")
    write_seed_record("toy", 0, reports, {}, results, "make x")  # its own record: replaced
    summarize("toy", results)
    summarize("toy", results)
    for name, text in (("seed-1.json", '{"my": "notes"}'), ("summary.json", "[1, 2]"), ("summary.png", "mine")):
        mine = results / "toy" / name
        if mine.exists():
            mine.unlink()
        mine.write_text(text)
        with pytest.raises(OutputExistsError, match="does not look like a file rlft writes there"):
            write_seed_record("toy", 1, reports, {}, results, "make x") if name.startswith("seed") \
                else summarize("toy", results)
        assert mine.read_text() == text
        mine.unlink()
