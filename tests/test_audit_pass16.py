"""Hostile pass 16's findings (an independent rerun of the third audit's kinds), each the case that found it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

SECRET = "SEKRETvalue4242XYZ"  # shaped like no service's token: only its name or its place can give it away


def _lake_report(path: Path, kind: str, **changes) -> Path:
    """A FrozenLake report as rlft eval writes one (the fields the verdict and the paired difference read)."""
    report = {"rlft_report_version": 1, "env_id": "FrozenLake-v1", "policy": kind, "policy_kind": kind,
              "episodes": 3, "seed": 0, "seeds": [0, 1, 2], "returns": [1.0, 0.0, 1.0], "return_mean": 2 / 3,
              "success_rate": 2 / 3, "optimal_success_exact": 0.74, "expert_agreement": 1.0,
              "reference_scores": {"random": 0.0, "expert": 0.74, "source": "rlft"}}
    for key, value in changes.items():
        if value is _DROP:
            report.pop(key)
        else:
            report[key] = value
    path.write_text(json.dumps(report))
    return path


_DROP = object()


@pytest.mark.parametrize("changes", [{"seed": [1, "a"]}, {"seed": {"a": 1}}, {"seed": True}, {"seed": 1.5},
                                     {"seed": -1}, {"episodes": _DROP}, {"episodes": 2.5},
                                     {"success_rate": _DROP}, {"optimal_success_exact": "x"},
                                     {"optimal_success_exact": [1, "a"]}, {"reference_scores": "x"},
                                     {"reference_scores": [0.0, 1.0]},
                                     {"reference_scores": {"random": 0.0, "expert": float("nan")}},
                                     {"reference_scores": {"random": 1.0, "expert": 1.0}}])
def test_a_report_with_a_damaged_field_its_readers_use_is_one_line(cli, tmp_path, changes):
    """B1: a list seed, a missing episodes or success_rate, a text optimal_success_exact and a damaged
    reference_scores were tracebacks in eval compare (the table, the verdict) and results record --paired."""
    good = _lake_report(tmp_path / "q.json", "q-greedy")
    bad = _lake_report(tmp_path / "llm.json", "llm", **changes)
    result = cli("eval", "compare", bad, good)
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert "llm.json" in result.output and "rlft eval" in result.output, result.output
    result = cli("results", "record", "exp", "--seed", "0", "--report", f"a={bad}", "--report", f"b={good}",
                 "--paired", "a,b", "--results-dir", tmp_path / "res", "--reproduce", "make x")
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert not (tmp_path / "res").exists()


def test_paired_reports_need_their_returns_and_good_reports_still_pair(cli, tmp_path):
    """B1: a report without returns was a KeyError in results record --paired."""
    good = _lake_report(tmp_path / "q.json", "q-greedy")
    llm = _lake_report(tmp_path / "llm.json", "llm")
    result = cli("results", "record", "exp", "--seed", "0", "--report", f"a={llm}", "--report", f"b={good}",
                 "--paired", "a,b", "--results-dir", tmp_path / "res", "--reproduce", "make x")
    assert result.exit_code == 0, result.output
    paired = json.loads((tmp_path / "res" / "exp" / "seed-0.json").read_text())["paired"]["a - b"]
    assert paired["episodes"] == 3 and paired["return_diff"] == 0.0
    bare = _lake_report(tmp_path / "bare.json", "llm", returns=_DROP)
    result = cli("results", "record", "exp2", "--seed", "0", "--report", f"a={bare}", "--report", f"b={good}",
                 "--paired", "a,b", "--results-dir", tmp_path / "res", "--reproduce", "make x")
    assert result.exit_code == 2 and "report a holds no returns per episode" in " ".join(result.output.split())
    assert not (tmp_path / "res" / "exp2").exists()


S = SECRET
_SPELLINGS = [f"Pushed with `rlft data push d --repo-id me/fl --hub-token {S}`.", f"x --hub-token {S}R",
              f"--api-key\u00a0{S}", f"--token '{S}'", f"--HUB-TOKEN {S}", f"--hub_token {S}", f"--private-key {S}",
              f"--wandb-key {S}", f"--access-key {S}", f"--key {S}", f"--pass {S}", f"pass={S}",
              f"curl 'https://h/cb#access_token={S}'", f"git clone oauth2:ab/{S}@gitlab.com:x",
              f'{{"private_key": "{S}", "passphrase": "{S}"}}', f"t passphrase={S}", f"privateKey: {S}",
              f"tokenValue={S}", f"MYTOKEN={S}", f"HF_AUTH={S}", f"X-Auth: {S}", f"https://h/x?sig={S}",
              f"https://h/x?auth={S}", f"machine h login u password {S}", f"HF_TOKEN=$'{S}'"]


@pytest.mark.parametrize("text", _SPELLINGS)
def test_every_spelling_of_a_secret_is_masked_in_prose_and_in_a_command(text):
    """B2: prose (a card extra, a run name) masked only the --x=V form; B3: private/access/wandb keys, passphrases,
    a URL fragment, a signature, a .netrc line, a password holding "/" and $'V' quoting were not recognised."""
    from rlft.core.secrets import MASK, redact_command, redact_text

    for redacted in (redact_text(text), redact_command(text)):
        assert SECRET not in redacted and MASK in redacted, redacted


@pytest.mark.parametrize("text", ["--credit-key local", "the --token option", "use --hub-token or HF_TOKEN",
                                  "--api-key $OPENAI_API_KEY", "--token {tok}", "C:/path/name@2x.png",
                                  "https://h/x?author=me", "key: return_mean", "MAX_NEW_TOKENS=64", "pad_token_id=0"])
def test_prose_and_settings_that_only_look_like_secrets_are_left_alone(text):
    from rlft.core.secrets import redact_text

    assert redact_text(text) == text


def test_a_card_extra_and_a_run_name_never_carry_an_option_form_secret(cli, tmp_path):
    """B2: `--hub-token V` in --card-extra reached README.md (what data push publishes), and in --run-name
    rlft_run.json, TensorBoard's events and training_args.bin."""
    extra = tmp_path / "extra.md"
    extra.write_text(f"Pushed with `rlft data push datasets/fl --repo-id me/fl --hub-token {SECRET}`.\n")
    data = tmp_path / "fl"
    result = cli("data", "export-q", "frozenlake", "--out", data, "--episodes", "5", "--card-extra", extra)
    assert result.exit_code == 0, result.output
    assert "--hub-token ***" in (data / "README.md").read_text()
    model = tmp_path / "m"
    assert cli("model", "init", "--dataset", data, "--out", model).exit_code == 0
    run = tmp_path / "run"
    result = cli("train", "sft", "--dataset", data, "--model", model, "--out", run, "--max-steps", "1",
                 "--run-name", f"x --hub-token {SECRET}R")
    assert result.exit_code == 0, result.output
    leaks = [p for p in [data, run] for p in p.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert not leaks and SECRET not in result.output, leaks


def test_a_pipelines_name_is_masked_in_its_banners(cli, tmp_path):
    """B4: the step banner printed the pipeline's name as written, a token in it included."""
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(f'name: "sec2 --hub-token {SECRET}N"\nsteps:\n'
                        "  - command: data export-q frozenlake\n    args: {episodes: 2, out: '{out}'}\n")
    result = cli("pipeline", "run", pipeline, "--out", tmp_path / "o")
    assert result.exit_code == 0, result.output
    assert SECRET not in result.output and "sec2 --hub-token ***" in result.output


@pytest.mark.parametrize(("option", "where"), [
    ("--map", "map file"), ("--expert", "expert checkpoint"), ("--policy expert:", "expert checkpoint"),
    ("--policy bc:", "behaviour-cloning policy"), ("--policy llm:", "is not a folder"),
    ("--results-dir", "is not a folder")])
@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
def test_a_pipe_a_device_or_a_folder_given_as_a_file_is_named_as_such(cli, tmp_path, lake_model, option, where, kind):
    """B5: a FIFO, /dev/zero or a folder given where a file is read was 'does not exist' or 'unknown map'."""
    import os

    if kind == "fifo":
        path = tmp_path / "fifo"
        os.mkfifo(path)
    elif kind == "device":
        path = Path("/dev/zero")
    else:
        path = tmp_path / "adir"
        path.mkdir()
    data, _ = lake_model
    commands = {"--map": ["data", "export-q", "frozenlake", "--episodes", "2", "--out", tmp_path / "o", "--map", path],
                "--expert": ["data", "improve", data, "--expert", path, "--out", tmp_path / "o"],
                "--results-dir": ["results", "summarize", "e", "--results-dir", path]}
    if option.startswith("--policy"):
        args = ["eval", "--policy", f"{option.split()[1]}{path}", "--env", "CartPole-v1", "--episodes", "1",
                "--out", tmp_path / "r.json"]
    else:
        args = commands[option]
    result = cli(*args)
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    if kind == "folder" and option in ("--results-dir", "--policy llm:"):
        return  # a folder is what these take: its contents are what is wrong
    assert "does not exist" not in text and "unknown map" not in text, text
    assert where in text or "not a regular file" in text or "a folder, not" in text, text


@pytest.mark.parametrize("args", [
    ["sft", "--lora-r", "8"], ["sft", "--lora-target-modules", "q_proj"], ["sft", "--awr-temperature", "2"],
    ["sft", "--awr-max-weight", "5"], ["sft", "--check-steps", "1", "--check-tolerance", "0.2"],
    ["grpo", "--target-temperature", "0.5"], ["grpo", "--env-samples", "3"], ["grpo", "--env-gamma", "0.5"],
    ["grpo", "--step-weight", "2"], ["grpo", "--credit-window", "2"], ["grpo", "--credit-gamma", "0.5"],
    ["grpo", "--lora-dropout", "0.1"]])
def test_a_training_option_that_does_nothing_here_is_refused(cli, tmp_path, lake_model, args):
    """B6: LoRA settings on a model trained whole, AWR settings without --critic, a tolerance on discrete actions and
    the settings of other GRPO modes exited 0 and were written into rlft_run.json as given."""
    data, model = lake_model
    out = tmp_path / "run"
    result = cli("train", args[0], "--dataset", data, "--model", model, "--max-steps", "1", "--out", out, *args[1:])
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and f"{args[-2]} does nothing here: it applies" in text, text
    assert not out.exists()


def test_check_settings_without_checks_are_named_and_grpo_epsilon_is_bounded(cli, tmp_path, lake_model):
    """B6: --check-states without --check-steps (a recipe passes it beside a --check-steps its user may set to 0) is
    said, not silent; B7: --epsilon 1e300 was an overflow traceback in the first step, the run left behind."""
    data, model = lake_model
    result = cli("train", "sft", "--dataset", data, "--model", model, "--max-steps", "1", "--out", tmp_path / "s",
                 "--check-states", "5")
    assert result.exit_code == 0, result.output
    assert "--check-states is not used: it applies with the decision checks" in " ".join(result.output.split())
    result = cli("train", "grpo", "--dataset", data, "--model", model, "--max-steps", "1", "--out", tmp_path / "g",
                 "--epsilon", "1e300")
    assert result.exit_code == 2 and "Traceback" not in result.output and "--epsilon" in result.output
    assert not (tmp_path / "g").exists()


@pytest.mark.parametrize("args", [
    ["train", "online", "--env", "CartPole-v1", "--backbone", "mlp", "--timesteps", "64", "--num-envs", "100000"],
    ["train", "online", "--env", "CartPole-v1", "--backbone", "mlp", "--timesteps", "64", "--eval-episodes",
     "100000000"],
    ["expert", "train", "--env", "CartPole-v1", "--algo", "ppo", "--timesteps", "64", "--num-envs", "100000"],
    ["expert", "eval", "x.zip", "--num-envs", "100000"], ["expert", "eval", "x.zip", "--episodes", "100000000"],
    ["train", "sft", "--lora", "--lora-r", "100000000"], ["train", "grpo", "--episode-starts", "1000000000000"],
    ["train", "grpo", "--rollout", "episode", "--max-turns", "1000000000000"],
    ["data", "collect", "--env", "CartPole-v1", "--episodes", "1", "--dataset-id", "tt/x-v0", "--num-envs", "100000"]])
def test_a_count_past_what_a_machine_can_hold_is_refused_before_any_work(cli, tmp_path, lake_model, args):
    """B8: these ran until a timeout, or filled memory (a LoRA rank of 10^8) into a traceback."""
    data, model = lake_model
    option = args[-2]  # the flag given the count
    if args[0] == "train" and args[1] in ("sft", "grpo"):
        args = [*args[:2], "--dataset", str(data), "--model", str(model), "--max-steps", "1", *args[2:]]
    if args[1] not in ("eval", "collect"):
        args = [*args, "--out", str(tmp_path / ("o.zip" if args[0] == "expert" else "o"))]
    result = cli(*args)
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "Traceback" not in result.output, text
    assert option in text, text
    assert not list(tmp_path.iterdir())


def test_a_tokenizer_with_no_padding_token_is_one_line(cli, tmp_path, lake_model):
    """B9: a tokenizer with neither a pad nor an eos token was a ValueError traceback at the first batched
    generate."""
    import shutil

    data, model = lake_model
    bare = tmp_path / "m"
    shutil.copytree(model, bare)
    (bare / ".rlft_manifest.json").unlink()
    (bare / "tokenizer_config.json").write_text("{}")
    from transformers import AutoTokenizer

    loaded = AutoTokenizer.from_pretrained(bare)
    if loaded.pad_token is not None or loaded.eos_token is not None:  # transformers 4.x reads them from tokenizer.json
        pytest.skip("this transformers still finds the special tokens: no tokenizer without them to load")
    result = cli("eval", "--policy", f"llm:{bare}", "--codec", data, "--episodes", "1", "--out", tmp_path / "x.json")
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "defines neither a padding nor an end-of-sequence token" in text, text


def test_a_nested_pipeline_named_after_its_options_is_checked(cli, tmp_path):
    """U1: 'pipeline run --overwrite inner.yaml' as a step: the preflight took --overwrite for the file."""
    inner = tmp_path / "inner.yaml"
    inner.write_text("name: inner\nsteps:\n  - command: data export-q frozenlake\n"
                     "    args: {episodes: 2, out: '{out}/fl', overwrite: true}\n")
    outer = tmp_path / "outer.yaml"
    outer.write_text(f"name: outer\nsteps:\n  - command: pipeline run --overwrite {inner}\n"
                     "    args: {out: '{out}/inner'}\n")
    result = cli("pipeline", "run", outer, "--out", tmp_path / "o")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "o" / "inner" / "fl" / "rlft_codec.json").is_file()


def test_a_dataset_whose_overwrite_was_killed_between_its_renames_is_named_by_its_readers(cli, tmp_path, lake_model):
    """U2: killed between atomic_output_dir's two renames, the dataset waits aside; a reader said it did not
    exist."""
    import shutil

    from rlft.core.io import REPLACED

    data, _ = lake_model
    aside = tmp_path / f".d2{REPLACED}abc" / "content"
    shutil.copytree(data, aside)
    result = cli("model", "init", "--dataset", tmp_path / "d2", "--out", tmp_path / "m")
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and f"the previous one is kept whole at {aside}" in text, text
    assert aside.is_dir() and not (tmp_path / "m").exists()


def test_a_users_file_named_like_a_lock_helper_is_never_written(cli, tmp_path):
    """U3: the lock's helper files were named by the pid alone (.rlft-lock-PID.new), written through a link."""
    import os

    target = tmp_path / "mine.txt"
    target.write_text("mine")
    for kind in ("new", "stale"):
        (tmp_path / f".rlft-lock-{os.getpid()}.{kind}").symlink_to(target)
    assert cli("data", "export-q", "frozenlake", "--episodes", "1", "--out", tmp_path / "q").exit_code == 0
    assert target.read_text() == "mine"
    assert sorted(p.name for p in tmp_path.glob(".rlft-lock-*")) == [f".rlft-lock-{os.getpid()}.new",
                                                                     f".rlft-lock-{os.getpid()}.stale"]


def test_model_weights_are_as_readable_as_the_rest_of_their_folder(cli, tmp_path, lake_model):
    """U5: model.safetensors was written 0600 (transformers' private temporary file), every other file 0644."""
    import os

    data, _ = lake_model
    umask = os.umask(0o022)
    try:
        assert cli("model", "init", "--dataset", data, "--out", tmp_path / "m").exit_code == 0
    finally:
        os.umask(umask)
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "m").iterdir() if p.is_file()}
    assert modes["model.safetensors"] == 0o644 and set(modes.values()) == {0o644}, modes
