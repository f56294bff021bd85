"""The CLI shell (help, version, lazy imports) and the YAML pipeline runner."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from rlft import __version__
from rlft.cli.pipeline_spec import args_to_argv, load_pipeline
from rlft.core.errors import InvalidInputError


def test_help_and_version(cli):
    result = cli("--help")
    assert result.exit_code == 0
    for sub in ("data", "expert", "model", "train", "eval", "pipeline"):
        assert sub in result.output
    assert cli("--version").output.strip() == f"rlft {__version__}"


def test_cli_import_is_light():
    """`rlft --help` stays instant because no heavy library is imported with the CLI."""
    code = (
        "import sys, rlft.cli.main; heavy = {'torch', 'transformers', 'trl', 'gymnasium', 'datasets', 'minari',"
        " 'stable_baselines3', 'numpy', 'pandas', 'pyarrow'}; print(sorted(heavy & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_rlft_command_freezes_the_collector_as_its_last_exit_handler():
    """The installed ``rlft`` is ``run``: the first exit handler it registers is ``gc.freeze``, and exit handlers
    still run after it (here one registered earlier, so run later; its line reaches stdout)."""
    from importlib.metadata import entry_points

    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "rlft"]
    assert script.value == "rlft.cli.main:run"
    code = ("import atexit, gc, sys\nfrom rlft.cli import main\nseen = []\nreal = atexit.register\n"
            "atexit.register = lambda f, *a: (seen.append(f), real(f, *a))[1]\n"
            "real(lambda: print('later handler ran, first registered:', seen[0] is gc.freeze, flush=True))\n"
            "sys.argv = ['rlft', '--version']\nmain.run()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"rlft {__version__}", "later handler ran, first registered: True"]


def test_args_to_argv():
    argv = args_to_argv({"map": "4x4", "slippery": False, "dry_run": True, "csv": None, "tag": ["a", "b"]})
    assert argv == ["--map", "4x4", "--no-slippery", "--dry-run", "--tag", "a", "--tag", "b"]
    assert args_to_argv({"slippery": "true"}) == ["--slippery"]


def test_pipeline_variables_and_overrides(tmp_path):
    spec, runs = load_pipeline(
        __import__("pathlib").Path("pipelines/frozenlake-q.yaml"), tmp_path / "o", True, ["episodes=7"]
    )
    label, argv = runs[0]
    assert label == ""
    assert argv[:3] == ["data", "export-q", "frozenlake"]
    assert argv[argv.index("--episodes") + 1] == "7"
    assert argv[argv.index("--out") + 1] == str(tmp_path / "o")
    assert "--overwrite" in argv and "--slippery" in argv
    with pytest.raises(InvalidInputError, match="no variable"):
        load_pipeline(__import__("pathlib").Path("pipelines/frozenlake-q.yaml"), tmp_path, False, ["nope=1"])


def test_make_dataset_pipeline_end_to_end(cli, tmp_path):
    out = tmp_path / "frozenlake-q"
    result = cli("pipeline", "run", "pipelines/frozenlake-q.yaml", "--out", out, "--set", "episodes=20")
    assert result.exit_code == 0, result.output
    assert "Why this dataset" in (out / "README.md").read_text()  # the datasets_cards/ prose is in the card
    # the CSV beside it holds the same Q-values as the dataset, one row per decision state
    import datasets
    import pandas as pd

    csv = pd.read_csv(tmp_path / "frozenlake-q.csv")
    train = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "hf"))["train"]
    q_by_state = {row["state"]: row["q_values"] for row in train}
    assert sorted(csv["state"]) == sorted(q_by_state)
    columns = ["q_value_left", "q_value_down", "q_value_right", "q_value_up"]
    names = ["LEFT", "DOWN", "RIGHT", "UP"]
    for row in csv.itertuples():
        assert [getattr(row, c) for c in columns] == pytest.approx(q_by_state[row.state], abs=1e-12)
        assert row.action_text == names[row.action] and row.action_text in row.optimal_actions.split()


def test_pipeline_step_error_propagates_exit_code(cli, tmp_path):
    out = tmp_path / "o"
    result = cli("pipeline", "run", "pipelines/frozenlake-q.yaml", "--out", out, "--set", "gamma=2")
    assert result.exit_code == 2
    assert not out.exists()


def test_pipeline_enabled_skip_and_force(tmp_path):
    import yaml

    existing = tmp_path / "expert.zip"
    existing.write_text("x")
    spec = {
        "vars": {"retrain": False, "collect": True, "expert": str(existing)},
        "steps": [
            {"command": "expert train", "args": {"out": "{expert}"}, "skip_if_exists": "{expert}",
             "force": "{retrain}"},
            {"command": "data collect", "enabled": "{collect}"},
        ],
    }
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(spec))
    _, runs = load_pipeline(path, tmp_path / "o", False, [])
    assert [argv[:2] for _, argv in runs] == [["data", "collect"]]
    _, runs = load_pipeline(path, tmp_path / "o", False, ["retrain=true", "collect=false"])
    assert [argv[:2] for _, argv in runs] == [["expert", "train"]]


def test_experiment_recipes_run_steps_per_seed_then_final_steps(tmp_path):
    import yaml

    from rlft.cli.pipeline_spec import parse_seeds

    spec = {
        "vars": {"seed": 0, "reproduce": "make experiment NAME=x SEEDS={seed}"},
        "seeds": [0, 2],
        "steps": [{"command": "results record x", "args": {"seed": "{seed}", "report": ["a={out}/a.json"],
                                                           "reproduce": "{reproduce}"}}],
        "final": [{"command": "results summarize x", "args": {"reproduce": "seeds {seeds} in {out}"}}],
    }
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump(spec))
    _, runs = load_pipeline(path, tmp_path / "o", False, [])
    assert [label for label, _ in runs] == ["seed 0", "seed 2", "final"]
    first, second, final = (argv for _, argv in runs)
    assert first[first.index("--seed") + 1] == "0" and second[second.index("--seed") + 1] == "2"
    assert second[second.index("--report") + 1] == f"a={tmp_path / 'o'}/seed-2/a.json"
    assert second[second.index("--reproduce") + 1] == "make experiment NAME=x SEEDS=2"
    assert final[final.index("--reproduce") + 1] == f"seeds 0,2 in {tmp_path / 'o'}"
    _, runs = load_pipeline(path, tmp_path / "o", False, [], seeds="5")  # --seeds replaces the file's list
    assert [label for label, _ in runs] == ["seed 5", "final"]
    assert parse_seeds("0-2,5,1") == [0, 1, 2, 5]
    for bad in ("x", "-1", "3-a"):
        with pytest.raises(InvalidInputError, match="--seeds"):
            parse_seeds(bad)
    path.write_text(yaml.safe_dump({**spec, "seeds": ["a"]}))
    with pytest.raises(InvalidInputError, match="must be a list of distinct integers"):
        load_pipeline(path, tmp_path / "o", False, [])


def test_bad_yaml_files_are_one_line_errors(cli, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("steps: [unclosed\n")
    result = cli("pipeline", "run", bad, "--out", tmp_path / "o")
    assert result.exit_code == 2 and "is not valid YAML" in result.output
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n- b\n")
    result = cli("pipeline", "run", listed, "--out", tmp_path / "o")
    assert result.exit_code == 2 and "must hold a pipeline mapping" in result.output


def test_help_never_cuts_option_names_on_a_narrow_terminal():
    import subprocess
    import sys

    env = {**__import__("os").environ, "COLUMNS": "80", "TERMINAL_WIDTH": ""}
    text = subprocess.run([sys.executable, "-m", "rlft.cli.main", "train", "grpo", "--help"], env=env,
                          capture_output=True, text=True, check=True).stdout  # noqa: S603
    cut = [line for line in text.splitlines() if re.match(r"^│ --[\w-]*…", line)]
    assert not cut  # an option's own name never ends in an ellipsis
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if "--gradient-accum" in line)
    pieces = [lines[i].split()[1] for i in (at, at + 1)]  # the first cell of the line and of the next one
    assert "".join(pieces) == "--gradient-accumulation-steps"  # folded onto the next line, whole
