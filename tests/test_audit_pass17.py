"""Hostile pass 17's findings (an independent rerun after pass 16's fixes), each the case that found it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

SECRET = "SEKRETvalue4242XYZ"
S = SECRET


@pytest.mark.parametrize("text", [
    f"https://b.s3.amazonaws.com/o?X-Amz-Signature={S}&X-Amz-Credential=x", f"T https://x/y?X-Goog-Signature={S}",
    f"https://d.cloudfront.net/x?Signature={S}&Key-Pair-Id=k", f"http://h/x;jsessionid={S}",
    f'$env:HF_TOKEN="{S}"', f"curl --user=me:{S} https://b", f"curl -uu:{S} https://b", f"mysql -p{S}",
    f"sshpass -p {S} ssh h", f"wandb login --relogin {S}", f"echo github_pat_{S}abcdefgh",
    f"glpat-{S}abcdef", f"eyJhbGciOiJIUzI1NiJ9.{S}.sig", f"password => '{S}'", f'{{"API Key": "{S}"}}'])
def test_signed_links_and_command_line_credentials_are_masked(text):
    """B1: presigned S3/GCS/CloudFront signatures; B2: PowerShell's $env:, curl's --user=/-uU:V, mysql -pV,
    sshpass -p, wandb login --relogin, GitHub/GitLab token shapes, a JWT, Perl's =>, a key with a space."""
    from rlft.core.secrets import MASK, redact_command, redact_text

    for redacted in (redact_text(text), redact_command(text)):
        assert SECRET not in redacted and MASK in redacted, redacted
    assert "=*** '" not in redact_text(text)  # "password => 'V'" was garbled to "password =*** 'V'"


@pytest.mark.parametrize("text", ["a => b", "pip install -p x", "mysql -h host db", "curl -u user https://h",
                                  "https://h/x?sort=asc&page=2", "https://h/x?author=me", "x = {'a b': 'c'}"])
def test_look_alikes_of_the_new_spellings_are_left_alone(text):
    from rlft.core.secrets import redact_text

    assert redact_text(text) == text


def _one_line(result, *words):
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "Traceback" not in result.output and text.count("Error:") == 1, text
    for word in words:
        assert word in text, text


def test_a_number_of_thousands_of_digits_in_a_file_is_one_line(cli, tmp_path, lake_model):
    """B3: json and PyYAML raise ValueError past 4,300 digits; it escaped every reader as a traceback."""
    import shutil

    data, _ = lake_model
    big = "1" + "0" * 5000
    report = tmp_path / "big.json"
    report.write_text(f'{{"x": {big}}}')
    _one_line(cli("eval", "compare", report), "big.json")
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(f"name: p\nvars:\n  n: {big}\nsteps:\n  - command: data info x\n")
    _one_line(cli("pipeline", "run", pipeline, "--out", tmp_path / "o"), "4300")
    codec = tmp_path / "fq"
    shutil.copytree(data, codec)
    (codec / "rlft_codec.json").write_text(f'{{"x": {big}}}')
    _one_line(cli("eval", "--policy", "q-greedy", "--codec", codec, "--episodes", "1", "--out", tmp_path / "r.json"))


@pytest.mark.parametrize("env_id", [[1], 5, {}, True])
def test_a_codec_whose_env_id_is_not_text_is_one_line(cli, tmp_path, lake_model, env_id):
    """B4: an AttributeError ('startswith') at the env."""
    import shutil

    data, _ = lake_model
    codec = tmp_path / "fq"
    shutil.copytree(data, codec)
    saved = json.loads((codec / "rlft_codec.json").read_text())
    (codec / "rlft_codec.json").write_text(json.dumps({**saved, "env_id": env_id}))
    _one_line(cli("eval", "--policy", "q-greedy", "--codec", codec, "--episodes", "1", "--out", tmp_path / "r.json"),
              "env_id must be a gymnasium id")


@pytest.mark.parametrize(("args", "flag"), [
    (["--policy", "random", "--env", "FrozenLake-v1", "--api-timeout", "5"], "--api-timeout"),
    (["--policy", "random", "--env", "FrozenLake-v1", "--device", "cpu"], "--device"),
    (["--policy", "random", "--env", "FrozenLake-v1", "--allow-codec-mismatch"], "--allow-codec-mismatch"),
    (["--policy", "llm:{model}", "--codec", "{data}", "--top-p", "0.5"], "--top-p"),
    (["--policy", "llm:{model}", "--codec", "{data}", "--api-timeout", "5"], "--api-timeout")])
def test_an_eval_option_that_does_nothing_here_is_refused(cli, tmp_path, lake_model, args, flag):
    """B5: these exited 0 and nothing said they were dropped."""
    data, model = lake_model
    args = [a.format(model=model, data=data) for a in args]
    _one_line(cli("eval", *args, "--episodes", "1", "--out", tmp_path / "r.json"), f"{flag} does nothing here")
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize(("args", "flag"), [
    (["--backbone-mode", "lora"], "--backbone-mode"), (["--lora-r", "4"], "--lora-r"),
    (["--backbone-lr-scale", "0.5"], "--backbone-lr-scale"), (["--precision", "3"], "--precision"),
    (["--check-episodes", "3"], "--check-episodes"),
    (["--backbone", "{model}", "--backbone-mode", "frozen", "--backbone-lr-scale", "0.5"], "--backbone-lr-scale")])
def test_an_online_option_that_does_nothing_here_is_refused(cli, tmp_path, lake_model, args, flag):
    """B6: train online recorded these as if they were used (backbone mlp, checks off, a frozen backbone)."""
    _, model = lake_model
    args = [a.format(model=model) for a in args]
    _one_line(cli("train", "online", "--env", "CartPole-v1", "--timesteps", "64", "--out", tmp_path / "o", *args),
              f"{flag} does nothing here")
    assert not (tmp_path / "o").exists()


def test_an_import_whose_validation_takes_every_row_is_one_line(cli, tmp_path):
    """B8: --validation 0.99 of 10 rows left no train split: a KeyError."""
    rows = tmp_path / "rows.jsonl"
    line = {"observation": "<observation>0.1,0.2,0.3,0.4</observation>", "action": "<action>1</action>"}
    rows.write_text("".join(json.dumps(line) + "\n" for _ in range(10)))
    _one_line(cli("data", "import", "rlft4rl", rows, "--env", "CartPole-v1", "--out", tmp_path / "d",
                  "--validation", "0.99"), "leaves none to train on")
    assert not (tmp_path / "d").exists()


def test_a_source_commit_that_is_no_hash_is_refused_unshown(cli, tmp_path, monkeypatch):
    """B10: RLFT_SOURCE_COMMIT (a CI's repository URL holds its job token) was copied into seed-N.json as given."""
    report = tmp_path / "r.json"
    assert cli("eval", "--policy", "random", "--env", "CartPole-v1", "--episodes", "2", "--out", report).exit_code == 0
    monkeypatch.setenv("RLFT_SOURCE_COMMIT", f"https://u:{S}@github.com/x {S}")
    result = cli("results", "record", "e", "--seed", "0", "--report", f"a={report}", "--reproduce", "make x",
                 "--results-dir", tmp_path / "res")
    _one_line(result, "RLFT_SOURCE_COMMIT is not a commit hash")
    assert SECRET not in result.output and not (tmp_path / "res").exists()
    monkeypatch.setenv("RLFT_SOURCE_COMMIT", "e325a76a358f")
    assert cli("results", "record", "e", "--seed", "0", "--report", f"a={report}", "--reproduce", "make x",
               "--results-dir", tmp_path / "res").exit_code == 0
    assert json.loads(Path(tmp_path / "res" / "e" / "seed-0.json").read_text())["commit"] == \
        "e325a76a358f (copied tree)"


@pytest.mark.parametrize(("file", "changes", "said"), [
    ("tokenizer_config.json", {"model_max_length": "zz"}, "model_max_length"),
    ("generation_config.json", {"eos_token_id": "zz"}, "eos_token_id"),
    ("generation_config.json", {"bos_token_id": 10**30}, "bos_token_id"),
    ("config.json", {"num_hidden_layers": -1}, "")])
def test_a_model_folder_with_damaged_sizes_or_token_ids_is_one_line(cli, tmp_path, lake_model, file, changes, said):
    """B9: these were tracebacks at the first generate (one in rlft's own constrained decoding)."""
    import shutil

    data, model = lake_model
    bad = tmp_path / "m"
    shutil.copytree(model, bad)
    (bad / ".rlft_manifest.json").unlink()
    saved = json.loads((bad / file).read_text()) if (bad / file).is_file() else {}
    (bad / file).write_text(json.dumps({**saved, **changes}))
    _one_line(cli("eval", "--policy", f"llm:{bad}", "--codec", data, "--episodes", "1", "--out", tmp_path / "r.json"),
              said)


@pytest.mark.parametrize("metadata", ["[]", "null", '"x"', "NaN", '{"dataset_id": "zz"}'])
def test_a_minari_dataset_whose_metadata_is_no_object_is_one_line(cli, tmp_path, monkeypatch, metadata):
    """B7: Minari read it as a mapping (AttributeError) or parsed a missing version (TypeError)."""
    import shutil

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    assert cli("data", "collect", "--env", "CartPole-v1", "--policy", "random", "--episodes", "2",
               "--dataset-id", "tt/cp-v0").exit_code == 0
    good = tmp_path / "minari" / "tt" / "cp-v0"
    bad = tmp_path / "minari" / "tt" / "bad-v0"
    shutil.copytree(good, bad)
    meta = bad / "data" / "metadata.json"
    meta.write_text(metadata if metadata != '{"dataset_id": "zz"}' else json.dumps(
        {**json.loads((good / "data" / "metadata.json").read_text()), "dataset_id": "zz"}))
    for args in (["data", "info", "tt/bad-v0"], ["data", "serialize", "tt/bad-v0", "--out", tmp_path / "s"]):
        _one_line(cli(*args), "metadata.json")


@pytest.mark.parametrize("text", [f"MYSQL_PWD={S}", f"--creds {S}", f"--pat {S}",
                                  f"//registry.npmjs.org/:_authToken={S}", f"X-Api-Key:{S}",
                                  f"-----BEGIN PRIVATE KEY-----\n{S}\n-----END PRIVATE KEY-----"])
def test_the_unclear_spellings_are_masked_too(text):
    """U5: a password variable, credential options, .npmrc's token, a PEM private key, an unquoted header."""
    from rlft.core.secrets import redact_text

    assert SECRET not in redact_text(text)


@pytest.mark.parametrize(("changes", "said"), [("name: [1, 2]", "'name:' of pipeline"),
                                               ("seeds: [0, 99999999999999999999]", "'seeds:' of pipeline")])
def test_a_pipeline_name_or_seed_of_the_wrong_kind_is_refused(cli, tmp_path, changes, said):
    """U2, U3: a list as the name ran; a seed past every --seed range was a late error at best."""
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(f"{changes}\nsteps:\n  - command: data export-q frozenlake\n"
                        "    args: {episodes: 1, out: '{out}/fl'}\n")
    _one_line(cli("pipeline", "run", pipeline, "--out", tmp_path / "o"), said)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("algo", "args"), [("iql", ["--alpha", "3"]), ("iql", ["--policy-freq", "3"]),
                                            ("td3bc", ["--expectile", "0.9"]), ("td3bc", ["--no-normalize-rewards"]),
                                            ("iql", ["--check-episodes", "3"])])
def test_an_offline_option_of_the_other_algorithm_is_refused(cli, tmp_path, algo, args):
    """U6: a TD3+BC setting under IQL (or the reverse), checks' episodes without checks."""
    _one_line(cli("train", "offline", "--dataset", tmp_path / "none", "--algo", algo, "--out", tmp_path / "o", *args),
              "does nothing here")
