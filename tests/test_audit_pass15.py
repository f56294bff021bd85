"""Hostile pass 15's findings (an independent rerun of the third audit's kinds), each the case that found it."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlft.core.secrets import MASK, redact_command, redact_text

SECRET = "SEKRETvalue4242XYZ"  # shaped like no service's token: only its name or its place can give it away


@pytest.mark.parametrize("command", [f"rlft eval x --api-key  {SECRET}", f"rlft eval x --api-key\t{SECRET}",
                                     f"rlft eval x --api-key\n{SECRET} --episodes 5"])
def test_a_secret_after_any_white_space_is_masked_in_a_command(command):
    """B1: --reproduce split on single spaces: two spaces, a tab or a new line before the value leaked it."""
    assert SECRET not in redact_command(command) and MASK in redact_command(command)


@pytest.mark.parametrize("text", [f"curl -u user:{SECRET} http://h", f"wandb login {SECRET}",
                                  f"Cookie: session={SECRET}", f"accessToken: {SECRET}",
                                  f'{{"authToken": "{SECRET}"}}', f"<token>{SECRET}</token>",
                                  f"secret: |\n  {SECRET}\n  {SECRET}2\nnext: 1", f"- api_key: >-\n    {SECRET}\n"])
def test_camel_case_xml_and_block_scalar_keys_are_masked(text):
    """B3: camelCase names, an XML element and a YAML block scalar held the credential unmasked."""
    assert SECRET not in redact_text(text) and MASK in redact_text(text)


@pytest.mark.parametrize("text", ["maxNewTokens: 64", "padToken: <pad>", "<b>bold</b>", "text: |\n  hello\n"])
def test_names_like_secrets_but_not_are_left_alone(text):
    assert redact_text(text) == text


def _report(cli, path: Path, seed: int = 0) -> Path:
    result = cli("eval", "--policy", "random", "--env", "CartPole-v1", "--episodes", "2", "--seed", str(seed),
                 "--out", path, "--quiet")
    assert result.exit_code == 0, result.output
    return path


def test_a_title_or_description_naming_a_secret_option_masks_its_value(cli, tmp_path):
    """B2: results summarize --title "... --hub-token V" kept V in stdout and summary.json (only --x=V was masked)."""
    _report(cli, tmp_path / "r.json")
    assert cli("results", "record", "exp", "--seed", "0", "--report", f"a={tmp_path / 'r.json'}", "--results-dir",
               tmp_path / "res", "--reproduce", "make x").exit_code == 0
    result = cli("results", "summarize", "exp", "--results-dir", tmp_path / "res", "--reproduce", "make x",
                 "--title", f"Run with --hub-token {SECRET}", "--description", f"then --api-key {SECRET} again")
    assert result.exit_code == 0 and SECRET not in result.output, result.output
    assert SECRET not in (tmp_path / "res" / "exp" / "summary.json").read_text()


def test_a_card_extra_with_camel_case_credentials_writes_none(cli, tmp_path):
    """B3, as found: --card-extra holding "accessToken: V" put V in the dataset card."""
    extra = tmp_path / "card.md"
    extra.write_text(f"accessToken: {SECRET}\n\n<token>{SECRET}</token>\n")
    result = cli("data", "export-q", "frozenlake", "--out", tmp_path / "d", "--episodes", "5", "--card-extra", extra)
    assert result.exit_code == 0, result.output
    assert [p for p in (tmp_path / "d").rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()] == []


def test_overwrite_keeps_the_permissions_of_what_it_replaces(cli, tmp_path):
    """B4: --overwrite of a folder the user had made private (700, files 600) left it 755 with 644 files; eval's plot
    beside a private report became 644."""
    out = tmp_path / "d"
    args = ("data", "export-q", "frozenlake", "--out", out, "--episodes", "5")
    assert cli(*args).exit_code == 0
    out.chmod(0o700)
    private = [p for p in out.rglob("*") if p.is_file()]
    for path in private:
        path.chmod(0o600)
    assert cli(*args, "--overwrite").exit_code == 0
    assert out.stat().st_mode & 0o777 == 0o700
    assert {p.stat().st_mode & 0o777 for p in private if p.exists()} == {0o600}
    report = _report(cli, tmp_path / "r.json")
    plot = report.with_suffix(".png")
    assert plot.is_file()
    plot.chmod(0o600)
    result = cli("eval", "--policy", "random", "--env", "CartPole-v1", "--episodes", "2", "--out", report,
                 "--overwrite", "--quiet")
    assert result.exit_code == 0 and plot.stat().st_mode & 0o777 == 0o600, result.output


def test_a_lock_that_is_no_pid_file_is_refused_or_taken_over_never_a_hang(cli, tmp_path):
    """B15: a lock holding a number past any pid was an OverflowError traceback; a FIFO named as the lock hung the
    command (its read blocks); an empty lock stamped in the future blocked for good."""
    import os
    import time

    lock = tmp_path / ".q.rlft-lock"
    for content in ("99999999999999999999", ""):
        lock.write_text(content)
        if not content:
            os.utime(lock, (time.time() + 3600, time.time() + 3600))
        result = cli("data", "export-q", "frozenlake", "--episodes", "1", "--out", tmp_path / "q", "--overwrite")
        assert result.exit_code == 0 and not lock.exists(), result.output
    fifo = tmp_path / ".q2.rlft-lock"
    os.mkfifo(fifo)
    result = cli("data", "export-q", "frozenlake", "--episodes", "1", "--out", tmp_path / "q2")
    assert result.exit_code != 0 and "is not a lock file rlft writes" in result.output, result.output
    assert fifo.exists() and not (tmp_path / "q2").exists()


def _edited(path: Path, out: Path, **changes) -> Path:
    import json

    out.write_text(json.dumps({**json.loads(path.read_text()), **changes}))
    return out


@pytest.mark.parametrize("changes", [{"returns": "abc"}, {"returns": ["a", "b"]}, {"returns": [1.0, 2.0, 3.0]},
                                     {"returns": [float("nan"), 1.0]}, {"env_id": ["CartPole-v1"]}])
def test_a_report_with_damaged_returns_or_names_is_one_line(cli, tmp_path, changes):
    """B7, B8: text or too many returns were tracebacks in results record --paired, NaN made a record that is not
    JSON, and an env_id list a traceback in eval compare."""
    good = _report(cli, tmp_path / "a.json")
    bad = _edited(good, tmp_path / "b.json", **changes)
    result = cli("results", "record", "exp", "--seed", "0", "--report", f"a={good}", "--report", f"b={bad}",
                 "--paired", "b,a", "--results-dir", tmp_path / "res", "--reproduce", "make x")
    assert result.exit_code == 2 and "not as rlft eval writes it" in result.output, result.output
    assert not (tmp_path / "res").exists()
    result = cli("eval", "compare", str(bad), str(good))
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output


def test_summarize_refuses_a_copied_or_mistyped_seed_record_and_render_a_bad_machine(cli, tmp_path):
    """B9, B10: a copy of seed-0.json as seed-9.json was summarized as seed 0 twice; "seed": "one" was accepted;
    "machine": "x" passed summarize and was a traceback in render."""
    res = tmp_path / "res"
    for seed in (0, 1):
        report = _report(cli, tmp_path / f"r{seed}.json", seed)
        assert cli("results", "record", "exp", "--seed", str(seed), "--report", f"a={report}", "--results-dir", res,
                   "--reproduce", "make x").exit_code == 0
    seed0 = res / "exp" / "seed-0.json"
    for name, changes, message in [("seed-9.json", {}, "records seed 0, not the seed its name says"),
                                   ("seed-9.json", {"seed": "one"}, "is 'one', not a seed number"),
                                   ("seed-1.json", {"seed": 1, "machine": "x"}, "'machine' of")]:
        before = (res / "exp" / name).read_text() if (res / "exp" / name).exists() else None
        _edited(seed0, res / "exp" / name, **changes)
        result = cli("results", "summarize", "exp", "--results-dir", res, "--reproduce", "make x")
        assert result.exit_code == 2 and message in " ".join(result.output.split()), result.output
        if before is None:
            (res / "exp" / name).unlink()
        else:
            (res / "exp" / name).write_text(before)


def test_a_label_with_a_new_line_is_refused(cli, tmp_path):
    """B17: a --report label holding a new line broke the README table's row in two."""
    report = _report(cli, tmp_path / "r.json")
    result = cli("results", "record", "exp", "--seed", "0", "--report", f"a\nb={report}", "--results-dir",
                 tmp_path / "res", "--reproduce", "make x")
    assert result.exit_code == 2 and "holds a control character" in result.output, result.output


def test_a_step_option_that_is_not_a_name_is_refused(cli, tmp_path):
    """B5: args: {1: 2} was an AttributeError traceback."""
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text("name: t\nsteps:\n  - command: data export-q frozenlake\n    args: {1: 2, out: '{out}'}\n")
    result = cli("pipeline", "run", pipeline, "--out", tmp_path / "o")
    assert result.exit_code == 2 and "not a mapping of option name: value" in result.output, result.output


@pytest.mark.parametrize(("changes", "message"), [({"kind": ["a"]}, "unknown codec kind"),
                                                  ({"params": {"action_names": [1, 2, 3, 4]}}, "malformed")])
def test_a_damaged_codec_is_one_line(cli, tmp_path, tmp_path_factory, changes, message):
    """B6: a codec whose kind is a list, or whose action names are numbers, was a traceback."""
    import json
    import shutil

    from eval_factories import frozenlake_dataset

    data = tmp_path / "d"
    shutil.copytree(frozenlake_dataset(tmp_path_factory), data)
    codec = data / "rlft_codec.json"
    saved = json.loads(codec.read_text())
    params = {**saved["params"], **changes.pop("params", {})}
    codec.write_text(json.dumps({**saved, **changes, "params": params}))
    result = cli("eval", "--policy", "random", "--codec", data, "--episodes", "1")
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output, result.output


def test_a_broken_chat_template_is_named_at_load(cli, tmp_path):
    """B11: a model folder whose chat_template.jinja is no Jinja was a TemplateSyntaxError traceback."""
    from factories import make_lake_q_model

    data, model = make_lake_q_model(tmp_path)
    (Path(model) / "chat_template.jinja").write_text("{% for x in %}")
    result = cli("eval", "--policy", f"llm:{model}", "--codec", data, "--episodes", "1")
    assert result.exit_code == 2 and "is not valid Jinja" in result.output, result.output


@pytest.mark.parametrize(("yaml_text", "message"), [
    ("sft:\n  trl: [1]\n", "trl: must be a mapping"),
    ("sft:\n  weight_decay: {a: 1}\n", "bad value for weight_decay"),
])
def test_trl_settings_of_the_wrong_type_are_refused_before_training(cli, tmp_path, yaml_text, message):
    """B12: `trl: [1]` was a TypeError; `weight_decay: {a: 1}` started training and died in the optimizer."""
    from factories import make_lake_q_model

    data, model = make_lake_q_model(tmp_path)
    config = tmp_path / "c.yaml"
    config.write_text(yaml_text)
    result = cli("train", "sft", "--config", config, "--dataset", data, "--model", model, "--out", tmp_path / "run",
                 "--max-steps", "1")
    assert result.exit_code == 2 and message in result.output, result.output
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("entry", "message"), [("CartPole-v1: [1]\n", "must be a mapping"),
                                                ("CartPole-v1: {n_steps: many}\n", "n_steps is 'many'")])
def test_hyperparameters_of_the_wrong_type_are_refused(cli, tmp_path, entry, message):
    """B13: a list as an env's entry, or text as n_steps, were TypeErrors deep in SB3."""
    hyper = tmp_path / "h.yaml"
    hyper.write_text(entry)
    result = cli("expert", "train", "--env", "CartPole-v1", "--algo", "ppo", "--hyperparams", hyper, "--timesteps",
                 "64", "--out", tmp_path / "e.zip")
    assert result.exit_code == 2 and message in result.output, result.output


def test_an_rlft4rl_line_with_a_list_as_role_is_named(cli, tmp_path):
    """B14: a chat message whose role is a list was an unhashable-type traceback."""
    import json

    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"messages": [{"role": ["user"], "content": "x"},
                                               {"role": "assistant", "content": "1"}]}) + "\n")
    result = cli("data", "import", "rlft4rl", source, "--env", "CartPole-v1", "--out", tmp_path / "d")
    assert result.exit_code == 2 and "not an RLFT4RL record" in result.output, result.output


@pytest.mark.parametrize(("args", "flag"), [
    (["eval", "--policy", "random", "--env", "CartPole-v1", "--temperature", "0.5"], "--temperature"),
    (["eval", "--policy", "random", "--env", "CartPole-v1", "--constrained"], "--constrained"),
    (["eval", "--policy", "random", "--env", "CartPole-v1", "--concurrency", "4"], "--concurrency"),
    (["eval", "--policy", "random", "--env", "CartPole-v1", "--video-episodes", "5"], "--video-episodes"),
    (["eval", "--policy", "random", "--env", "CartPole-v1", "--search-horizon", "4"], "--search-horizon"),
    (["eval", "--policy", "random", "--env", "CartPole-v1", "--critic-candidates", "8"], "--critic-candidates"),
    (["eval", "--policy", "random", "--env", "CartPole-v1", "--no-cache"], "--no-cache"),
    (["data", "export-q", "frozenlake", "--map", "4x4", "--maps", "7", "--out", "never-written"], "--maps"),
    (["data", "export-q", "frozenlake", "--p", "0.3", "--out", "never-written"], "--p"),
    (["data", "serialize", "cp/none-v0", "--download-timeout", "5", "--out", "never-written"], "--download-timeout"),
])
def test_an_option_that_would_do_nothing_is_refused(cli, args, flag):
    """B16: options of another policy kind, map kind or mode were accepted and ignored (exit 0, the same output)."""
    result = cli(*args)
    assert result.exit_code == 2 and f"{flag} does nothing here" in result.output, result.output
    assert not Path("never-written").exists()


@pytest.mark.parametrize(("text", "args", "message"), [
    ("name: t\nvars: {quick: maybe, n: 1}\npresets:\n  quick: {n: 2}\nsteps:\n  - command: data export-q frozenlake\n",
     [], "is switched by 'maybe': true or false"),
    ("name: t\nvars: {seed: 0}\nseeds: [0, 0]\nsteps:\n  - command: data export-q frozenlake\n", [],
     "must be a list of distinct integers"),
    ("name: t\nsteps:\n  - command: data export-q frozenlake\n", ["--set", SECRET],
     "--set takes NAME=VALUE"),
])
def test_pipeline_switches_seeds_and_sets_are_checked_before_any_step(cli, tmp_path, text, args, message):
    """Pass 15's unclear cases: a preset switched by "maybe" was silently off, seeds: [0, 0] failed after seed 0 ran,
    and --set with no '=' echoed the value (perhaps a token typed without its name)."""
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(text)
    result = cli("pipeline", "run", pipeline, "--out", tmp_path / "o", *args)
    assert result.exit_code == 2 and message in result.output and SECRET not in result.output, result.output
    assert not (tmp_path / "o").exists()


def test_a_device_given_as_a_file_is_called_what_it_is(cli, tmp_path):
    """Pass 15's unclear U7: expert train --hyperparams /dev/zero said "does not exist", results render --readme
    /dev/zero "no README": refused for the wrong reason."""
    result = cli("expert", "train", "--env", "CartPole-v1", "--hyperparams", "/dev/zero", "--out", tmp_path / "e.zip")
    assert result.exit_code == 2 and "is not a regular file" in result.output, result.output
    (tmp_path / "results").mkdir()
    result = cli("results", "render", "--readme", "/dev/zero", "--results-dir", tmp_path / "results")
    assert result.exit_code == 2 and "is not a regular file" in result.output, result.output


def test_an_rlft4rl_line_past_the_limit_is_refused_before_it_is_read_whole(cli, tmp_path, monkeypatch):
    """Pass 15's unclear case: a 1 GiB one-line file was read whole (2.2 GB) before its error."""
    from rlft.datasets import import_rlft4rl

    monkeypatch.setattr(import_rlft4rl, "MAX_LINE_CHARS", 1000)
    source = tmp_path / "in.jsonl"
    record = '{"observation": "<observation>1,2,3,4</observation>", "action": "<action>0</action>"}\n'
    source.write_text(record + "x" * 5000 + "\n")
    result = cli("data", "import", "rlft4rl", source, "--env", "CartPole-v1", "--out", tmp_path / "d")
    assert result.exit_code == 2 and "line 2 is longer than 1,000 characters" in result.output, result.output
