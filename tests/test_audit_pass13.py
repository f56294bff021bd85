"""Hostile pass 13 (issue #45): what an independent audit of a fresh clone found, each case as it reproduced it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rlft.core.secrets import MASK, is_secret_name, redact_command, redact_text

PLANTED = "PLANTED50xyz"


@pytest.mark.parametrize("name", ["GH_TOKEN", "GITLAB_TOKEN", "NPM_TOKEN", "HUGGINGFACE_TOKEN", "AWS_SESSION_TOKEN",
                                  "CI_JOB_TOKEN", "MY_TOKEN", "OPENAI_KEY", "WANDB_KEY", "GH_PAT"])
def test_a_secret_environment_assignment_is_masked_by_its_name(name):
    """B1 (a): `results record --reproduce "make push GH_TOKEN=..."` kept the token in seed-N.json."""
    assert redact_command(f"make push {name}={PLANTED} X=1") == f"make push {name}={MASK} X=1"


def test_tokenizer_and_rlft_settings_named_like_tokens_are_not_secrets():
    assert not any(is_secret_name(n) for n in ("pad_token", "eos_token", "bos_token", "unk_token",
                                               "digits_per_token", "max_new_tokens", "credit_key", "action_key"))


@pytest.mark.parametrize("text", [f'curl -H "Authorization: Bearer {PLANTED}" http://x',
                                  f"authorization: basic {PLANTED}",
                                  f"http://{PLANTED}:x-oauth-basic@127.0.0.1:9/v1",  # the token as the user name
                                  f"http://{PLANTED}:@host/v1", f"{PLANTED}:pw@host"])
def test_bearer_credentials_and_the_whole_userinfo_of_a_url_are_masked(text):
    """B1 (a, b): a bearer header, and a token given as the user part of --api-url (GitHub's form), were kept."""
    assert PLANTED not in redact_text(text) and MASK in redact_text(text)


def test_a_token_as_the_user_name_of_the_api_url_is_masked_in_the_error_line(cli, tmp_path):
    assert cli("data", "export-q", "frozenlake", "--episodes", "1", "--out", tmp_path / "fl").exit_code == 0
    result = cli("eval", "--policy", "llm:served", "--codec", tmp_path / "fl", "--backend", "openai", "--api-url",
                 f"http://{PLANTED}:x@127.0.0.1:9/v1", "--api-model", "m", "--api-timeout", "2", "--episodes", "1",
                 "--out", tmp_path / "r.json")
    assert result.exit_code != 0 and PLANTED not in result.output and MASK in result.output


@pytest.mark.parametrize("name", ["bad\nname", "esc\x1b[31m", "tab\there"])
def test_an_output_name_with_a_control_character_is_refused(cli, tmp_path, name):
    """B3: a newline and a terminal escape in --out made a folder of that name and sent the escape to the terminal."""
    result = cli("data", "export-q", "frozenlake", "--episodes", "1", "--out", tmp_path / name)
    assert result.exit_code != 0 and "control character" in result.output and "\x1b" not in result.output
    assert not any(tmp_path.iterdir())


def test_a_stale_lock_held_by_a_program_that_only_mentions_rlft_is_taken_over(cli, tmp_path):
    """B4: a dead writer's pid reused by `python ... notes-about-rlft.txt`, or a lock holding -1, kept the output
    locked for good with a false reason."""
    other = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()", "notes-about-rlft.txt"],
                             stdin=subprocess.PIPE)
    try:
        for out, held in (("fl1", str(other.pid)), ("fl2", "-1")):
            (tmp_path / f".{out}.rlft-lock").write_text(held)
            result = cli("data", "export-q", "frozenlake", "--episodes", "1", "--out", tmp_path / out)
            assert result.exit_code == 0, result.output
            assert (tmp_path / out / "rlft_codec.json").is_file() and not (tmp_path / f".{out}.rlft-lock").exists()
    finally:
        other.communicate(b"")


@pytest.mark.parametrize(("args", "option"), [
    (["model", "init", "--dataset", "none", "--out", "never-written", "--intermediate", "-5"], "--intermediate"),
    (["model", "init", "--dataset", "none", "--out", "never-written", "--kv-heads", "-2"], "--kv-heads"),
    (["model", "init", "--dataset", "none", "--out", "never-written", "--kv-heads", "0"], "--kv-heads"),
    (["expert", "train", "--env", "CartPole-v1", "--timesteps", "100000000000000", "--out", "never.zip"],
     "--timesteps"),
    (["train", "online", "--env", "CartPole-v1", "--timesteps", "100000000000000", "--out", "never-written"],
     "--timesteps"),
    (["train", "offline", "--dataset", "none", "--steps", "100000000000", "--out", "never-written"], "--steps"),
])
def test_sizes_and_budgets_are_bounded_before_any_work(cli, tmp_path, monkeypatch, args, option):
    """B5: --intermediate -5 / --kv-heads -2 were a traceback after the tokenizer was trained; B6: a training budget
    of 10^14 steps ran until stopped."""
    monkeypatch.chdir(tmp_path)
    result = cli(*args)
    assert result.exit_code == 2 and f"Invalid value for '{option}'" in result.output, result.output
    assert not any(tmp_path.iterdir())


def test_a_results_record_or_summary_the_user_edited_is_kept(cli, tmp_path, monkeypatch):
    """B2: results record and summarize replaced a seed-N.json or summary.json the user had edited (valid JSON)."""
    import json

    monkeypatch.chdir(tmp_path)
    assert cli("eval", "--policy", "random", "--env", "CartPole-v1", "--episodes", "1", "--out", "r.json",
               "--quiet").exit_code == 0
    record = ("results", "record", "exp", "--seed", "0", "--report", "a=r.json", "--reproduce", "make x",
              "--results-dir", "res")
    assert cli(*record).exit_code == 0 and cli(*record).exit_code == 0  # its own record: replaced
    assert cli("results", "summarize", "exp", "--results-dir", "res").exit_code == 0
    for name in ("seed-0.json", "summary.json"):
        path = tmp_path / "res" / "exp" / name
        data = json.loads(path.read_text())
        path.write_text(json.dumps({**data, "my_notes": "USER NOTE keep me"}))
        again = record if name.startswith("seed") else ("results", "summarize", "exp", "--results-dir", "res")
        result = cli(*again)
        assert result.exit_code == 2 and "was edited since rlft wrote it" in " ".join(result.output.split())
        assert "USER NOTE keep me" in path.read_text()
        monkeypatch.setenv("RLFT_REPLACE_FOREIGN", "1")
        assert cli(*again).exit_code == 0 and "USER NOTE" not in path.read_text()
        monkeypatch.delenv("RLFT_REPLACE_FOREIGN")


def test_a_users_zip_archive_is_not_taken_for_an_expert_checkpoint(cli, tmp_path):
    """U1: any zip archive passed the "looks like rlft's" test of a single-file output, so --overwrite replaced it."""
    import zipfile

    archive = tmp_path / "photos.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        handle.writestr("a.txt", "my photos")
    before = archive.read_bytes()
    result = cli("expert", "train", "--env", "CartPole-v1", "--algo", "ppo", "--timesteps", "64", "--out", archive,
                 "--overwrite")
    assert result.exit_code == 2 and "does not look like a file rlft writes" in " ".join(result.output.split())
    assert archive.read_bytes() == before


def test_a_pipeline_with_steps_or_vars_of_the_wrong_type_says_so(cli, tmp_path):
    """U3: `vars: [1, 2]` and `steps: "data export-q frozenlake"` were reported as "has no steps"."""
    pipeline = tmp_path / "p.yaml"
    for text, message in [("name: t\nvars: [1, 2]\nsteps:\n  - command: data export-q frozenlake\n",
                           "'vars:' of pipeline"),
                          ("name: t\nsteps: data export-q frozenlake\n", "'steps:' of pipeline")]:
        pipeline.write_text(text)
        result = cli("pipeline", "run", pipeline, "--out", tmp_path / "out")
        assert result.exit_code == 2 and message in result.output, result.output


def test_a_folder_inside_an_rlft_output_is_never_replaced_alone(cli, tmp_path, monkeypatch):
    """U6: --out fl/data --overwrite was refused with a false reason, and replaced with RLFT_REPLACE_FOREIGN=1."""
    monkeypatch.chdir(tmp_path)
    assert cli("data", "export-q", "frozenlake", "--episodes", "1", "--out", "fl").exit_code == 0
    before = sorted(p.name for p in (tmp_path / "fl" / "data").iterdir())
    monkeypatch.setenv("RLFT_REPLACE_FOREIGN", "1")
    result = cli("data", "export-q", "frozenlake", "--episodes", "1", "--out", "fl/data", "--overwrite")
    assert result.exit_code == 2 and "is a folder of the rlft output" in " ".join(result.output.split())
    assert sorted(p.name for p in (tmp_path / "fl" / "data").iterdir()) == before


@pytest.mark.parametrize("form", [["--hub-token", "PLANTEDtrl123"], ["--hub-token=PLANTEDtrl123"]])
def test_a_bad_trl_flag_beside_a_hub_token_does_not_print_the_token(cli, tmp_path, form):
    """Hostile pass 14 (C1): the line naming a bad TRL pass-through flag echoed every pass-through flag, TRL's
    --hub-token among them (not an option of the command, so not masked as one)."""
    result = cli("train", "sft", "--dataset", "none", "--model", "none", "--out", tmp_path / "never-written", *form,
                 "--weight-decay", "abc")
    assert result.exit_code == 2 and "bad TRL option" in result.output, result.output
    assert "PLANTEDtrl123" not in result.output and "--weight-decay abc" in " ".join(result.output.split())
    assert not (tmp_path / "never-written").exists()


@pytest.mark.parametrize(("value", "threads"), [("2,1", 2), ("3", 3), ("", None), ("abc", None), ("0", None)])
def test_an_openmp_thread_list_or_a_value_openmp_ignores_is_read_as_openmp_reads_it(value, threads):
    """Hostile pass 14 (B7): ``OMP_NUM_THREADS=2,1`` (one count per nesting level, valid for OpenMP) was an int()
    traceback in model init and results record."""
    from rlft.core.seeding import threads_setting

    assert threads_setting(value) == threads


def test_results_record_runs_under_a_nested_openmp_thread_list(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2,1")
    monkeypatch.delenv("RLFT_NUM_THREADS", raising=False)
    assert cli("eval", "--policy", "random", "--env", "CartPole-v1", "--episodes", "1", "--out",
               tmp_path / "r.json").exit_code == 0
    result = cli("results", "record", "exp", "--seed", "0", "--report", f"a={tmp_path / 'r.json'}", "--results-dir",
                 tmp_path / "res", "--reproduce", "make experiment NAME=exp SEEDS=0")
    assert result.exit_code == 0, result.output
    import json

    assert json.loads((tmp_path / "res" / "exp" / "seed-0.json").read_text())["machine"]["threads"] == 2


def test_a_users_seed_backup_beside_the_records_is_left_out_with_a_note(cli, tmp_path):
    """Hostile pass 14 (B3): a stray seed-0-backup.json made results summarize end in a ValueError traceback."""
    for seed in (0, 1):
        assert cli("eval", "--policy", "random", "--env", "CartPole-v1", "--episodes", "1", "--seed", str(seed),
                   "--out", tmp_path / f"r{seed}.json").exit_code == 0
        assert cli("results", "record", "exp", "--seed", str(seed), "--report", f"a={tmp_path / f'r{seed}.json'}",
                   "--results-dir", tmp_path / "res", "--reproduce", "make x").exit_code == 0
    backup = tmp_path / "res" / "exp" / "seed-0-backup.json"
    backup.write_text("{}")
    result = cli("results", "summarize", "exp", "--results-dir", tmp_path / "res", "--reproduce", "make x")
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    assert "seed-0-backup.json is not a seed record's name" in " ".join(result.output.split()), result.output
    assert backup.read_text() == "{}"
