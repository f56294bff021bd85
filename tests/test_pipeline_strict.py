"""Pipeline files are strict (issue #28): unknown keys, undefined variables and a list given to a one-value option
are errors naming the step and the key before any step runs; secrets never reach the printed step banner."""

from __future__ import annotations

import textwrap

import pytest

from rlft.cli.main import app as root
from rlft.cli.pipeline import mask_secrets, preflight
from rlft.cli.pipeline_spec import load_pipeline
from rlft.core.errors import InvalidInputError


def _pipeline(tmp_path, body: str):
    path = tmp_path / "p.yaml"
    path.write_text(textwrap.dedent(body))
    return path


def _runs(tmp_path, body: str):
    _, runs = load_pipeline(_pipeline(tmp_path, body), tmp_path / "out", False, [])
    preflight(runs, root)
    return runs


def test_a_misspelled_step_key_is_an_error_not_a_step_that_runs(tmp_path):
    with pytest.raises(InvalidInputError, match="step 1 .*data export-q frozenlake.*unknown key 'enabeld'"):
        _runs(tmp_path, """
            name: t
            steps:
              - command: data export-q frozenlake
                enabeld: false
                args: {out: "{out}/ds"}
        """)
    with pytest.raises(InvalidInputError, match="unknown key 'stpes'"):
        _runs(tmp_path, "name: t\nstpes: []\nsteps:\n  - command: data export-q frozenlake\n")


def test_an_undefined_variable_is_an_error_not_a_folder_name(tmp_path):
    with pytest.raises(InvalidInputError, match=r"undefined variable \{mapp\}"):
        _runs(tmp_path, """
            name: t
            vars: {map: 4x4}
            steps:
              - command: data export-q frozenlake
                args: {map: "{mapp}", out: "{out}/ds"}
        """)
    assert not (tmp_path / "out").exists()


def test_a_list_given_to_a_one_value_option_is_refused(tmp_path):
    with pytest.raises(InvalidInputError, match="--episodes takes one value"):
        _runs(tmp_path, """
            name: t
            steps:
              - command: data export-q frozenlake
                args: {episodes: [10, 20], out: "{out}/ds"}
        """)
    # a list where the option is repeatable stays a repeated flag
    runs = _runs(tmp_path, """
        name: t
        steps:
          - command: data export-q frozenlake
            args: {out: "{out}/ds"}
          - command: results record demo
            args: {seed: 0, reproduce: "make demo", run: ["a={out}/ds", "b={out}/ds"]}
    """)
    assert runs[1][1].count("--run") == 2


def test_secrets_are_masked_in_banners():
    argv = ["data", "push", "ds", "--repo-id", "me/ds", "--token", "hf_secret", "--api-key", "sk-1"]
    assert mask_secrets(argv) == ["data", "push", "ds", "--repo-id", "me/ds", "--token", "***", "--api-key", "***"]


def test_a_preset_sets_its_variables_unless_given(tmp_path):
    from rlft.cli.pipeline_spec import load_pipeline

    path = tmp_path / "p.yaml"
    path.write_text("name: p\nvars: {quick: false, steps_: 1000, episodes: 50}\n"
                    "presets:\n  quick: {steps_: 10, episodes: 5}\n"
                    "steps:\n  - command: train sft\n    args: {max_steps: '{steps_}', check_steps: '{episodes}'}\n")
    argv = lambda *sets: load_pipeline(path, tmp_path / "o", False, list(sets))[1][0][1]  # noqa: E731
    assert argv() == ["train", "sft", "--max-steps", "1000", "--check-steps", "50"]
    assert argv("quick=true") == ["train", "sft", "--max-steps", "10", "--check-steps", "5"]
    assert argv("quick=true", "episodes=7") == ["train", "sft", "--max-steps", "10", "--check-steps", "7"]
    path.write_text(path.read_text().replace("quick: {steps_: 10,", "quick: {nope: 1, steps_: 10,"))
    with pytest.raises(InvalidInputError, match="sets unknown variables"):
        argv("quick=true")


def test_variables_may_refer_to_variables_declared_in_any_order(tmp_path):
    body = """
        name: t
        vars:
          source: "{data_path}/{dataset_id}"
          data_path: "{out}/minari"
          dataset_id: "me/cartpole-seed{seed}-v0"
          seed: 0
        steps:
          - command: data export-q frozenlake
            args: {out: "{source}"}
        seeds: [3]
    """
    runs = _runs(tmp_path, body)
    argv = runs[0][1]
    assert argv[argv.index("--out") + 1] == f"{tmp_path}/out/seed-3/minari/me/cartpole-seed3-v0"
    with pytest.raises(InvalidInputError, match="refer to each other in a circle: a, b"):
        _runs(tmp_path, """
            name: t
            vars: {a: "x{b}", b: "y{a}"}
            steps:
              - command: data export-q frozenlake
                args: {out: "{out}/{a}"}
        """)


def test_a_step_may_not_write_over_the_pipeline_file_being_run(tmp_path):
    """An --out folder that holds the pipeline file: a step with overwrite replaced the folder, the YAML with it
    (exit 0). Refused before any step runs; nothing is deleted."""
    from typer.testing import CliRunner

    folder = tmp_path / "pipes"
    folder.mkdir()
    path = folder / "self.yaml"
    path.write_text(textwrap.dedent("""
        name: t
        steps:
          - command: data export-q frozenlake
            args: {episodes: 5, out: "{out}", overwrite: true}
    """))
    result = CliRunner().invoke(root, ["pipeline", "run", str(path), "--out", str(folder)])
    assert result.exit_code == 2 and "holds the pipeline file" in result.output
    assert path.is_file() and "Traceback" not in result.output


def test_a_step_command_may_write_its_options_key_equals_value(tmp_path):
    """``--out=X`` in a step's command string: a nested ``pipeline run`` step was a StopIteration traceback (its
    options were read by hand, in the two-word form only), and an ``--out=`` step escaped the check that it does
    not write over the pipeline file. Click's own parse of the step is used now."""
    from typer.testing import CliRunner

    (tmp_path / "inner.yaml").write_text("name: inner\nsteps:\n  - command: data export-q frozenlake --episodes 2"
                                         " --out={out}/q\n")
    outer = _pipeline(tmp_path, """
        name: outer
        steps:
          - command: "pipeline run --overwrite INNER --out={out}/in"
    """)
    outer.write_text(outer.read_text().replace("INNER", str(tmp_path / "inner.yaml")))
    result = CliRunner().invoke(root, ["pipeline", "run", str(outer), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "o" / "in" / "q" / "rlft_codec.json").is_file()

    folder = tmp_path / "pipes"
    folder.mkdir()
    path = folder / "self.yaml"
    path.write_text("name: t\nsteps:\n  - command: data export-q frozenlake --episodes 2 --overwrite --out={out}\n")
    result = CliRunner().invoke(root, ["pipeline", "run", str(path), "--out", str(folder)])
    assert result.exit_code == 2 and "holds the pipeline file" in result.output
    assert path.is_file() and "Traceback" not in result.output
