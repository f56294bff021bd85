"""A token planted in every way a user can hand one to rlft is found in no file a run writes, no report and no output
of the command: saved arguments (TRL pickles them whole into checkpoints), run records, summaries, TensorBoard logs,
reports, URLs, error lines and pipeline banners in both option forms."""

from __future__ import annotations

from pathlib import Path

import pytest

from factories import make_lake_q_model
from rlft.core.secrets import MASK, is_secret_name, redact, redact_argv, redact_command, redact_text

TOKEN = "hf_PLANTEDsecret123"


def _files_holding(root: Path, needle: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


def test_redaction_rules():
    assert [is_secret_name(n) for n in ("--hub-token", "HF_TOKEN", "api_key", "--token", "client_secret")] == [True] * 5
    assert not any(is_secret_name(n) for n in ("pad_token", "max_new_tokens", "tokens", "tokenizer", "eos_token"))
    assert redact_argv(["--token", TOKEN, f"--hub-token={TOKEN}", "--max-new-tokens", "8"]) == [
        "--token", MASK, f"--hub-token={MASK}", "--max-new-tokens", "8"]
    assert redact_text(f"http://me:{TOKEN}@host:8000/v1?api_key={TOKEN}&x=1") == \
        f"http://{MASK}@host:8000/v1?api_key={MASK}&x=1"
    assert redact({"a": [{"hub_token": TOKEN}], "url": f"https://u:{TOKEN}@h"}) == {"a": [{"hub_token": MASK}],
                                                                                   "url": f"https://{MASK}@h"}
    # a password holding "/" or "@" as typed, and a token given as the user name (git's way)
    for url in (f"http://u:p@{TOKEN}@127.0.0.1:9/v1", f"http://user:{TOKEN}/z@h/v1", f"https://{TOKEN}@host/x",
                f"https://u:x/{TOKEN}@host"):
        assert TOKEN not in redact_text(url) and redact_text(url).endswith(url.rsplit("@", 1)[1])
    assert redact_text("http://127.0.0.1:8000/v1 and s3://bucket/key") == "http://127.0.0.1:8000/v1 and s3://bucket/key"


@pytest.mark.slow
def test_a_url_in_the_run_name_reaches_no_file_of_the_run(cli, lake, tmp_path):
    """--run-name (a TRL text setting) lands in training_args.bin and the event logs: its URL secret is masked."""
    data, model = lake
    run = tmp_path / "run"
    result = cli("train", "sft", "--dataset", data, "--model", model, "--out", run, "--no-lora", "--max-steps", "2",
                 "--save-steps", "1", "--report-to", "tensorboard", "--run-name", f"https://u:{TOKEN}@host/x")
    assert result.exit_code == 0, result.output
    assert _files_holding(run, TOKEN) == [] and TOKEN not in result.output


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    root = tmp_path_factory.mktemp("secrets")
    return make_lake_q_model(root)


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["sft", "grpo"])
def test_a_hub_token_reaches_no_file_of_the_run(cli, lake, tmp_path, stage, monkeypatch):
    """--hub-token (a TRL field rlft passes through): not in rlft_run.json, summary.json, training_args.bin of the
    checkpoints, the logs or the command's output; huggingface_hub still gets it (HF_TOKEN of the process)."""
    monkeypatch.delenv("HF_TOKEN", raising=False)
    data, model = lake
    run = tmp_path / "run"
    extra = ["--num-generations", "2", "--batch-size", "4", "--reward", "format"] if stage == "grpo" else []
    result = cli("train", stage, "--dataset", data, "--model", model, "--out", run, "--no-lora", "--max-steps", "2",
                 "--save-steps", "1", "--hub-token", TOKEN, *extra)
    assert result.exit_code == 0, result.output
    assert list((run / "checkpoints").glob("checkpoint-*/training_args.bin"))  # the pickled arguments were written
    assert _files_holding(run, TOKEN) == []
    assert TOKEN not in result.output
    import os

    assert os.environ["HF_TOKEN"] == TOKEN


def test_an_api_url_or_key_reaches_no_output(cli, lake, tmp_path):
    """A token in --api-url (user:TOKEN@host) and --api-key: the error line of an unreachable server names the
    server without them."""
    data, model = lake
    report = tmp_path / "r.json"
    result = cli("eval", "--policy", "llm:served", "--backend", "openai", "--codec", data, "--api-model", "m",
                 "--api-url", f"http://me:{TOKEN}@127.0.0.1:9/v1", "--api-key", TOKEN, "--episodes", "1",
                 "--api-timeout", "1", "--out", report)
    assert result.exit_code != 0 and TOKEN not in result.output
    assert f"cannot reach the OpenAI-compatible server at http://{MASK}@127.0.0.1:9/v1" in \
        " ".join(result.output.split())
    assert not report.exists()


def test_a_key_from_the_environment_echoed_by_the_server_is_masked(cli, tmp_path, tmp_path_factory, monkeypatch):
    """Hostile pass 14 (B15): OPENAI_API_KEY (never typed on the command line) echoed back in a server's 401 is not
    printed: the secret-named environment variables are masked like the options."""
    from eval_factories import FakeOpenAIServer, frozenlake_dataset

    monkeypatch.setenv("OPENAI_API_KEY", "envkey-0123456789abc")
    with FakeOpenAIServer(lambda prompt: "", mode="401echo") as server:
        result = cli("eval", "--policy", "llm:m", "--codec", frozenlake_dataset(tmp_path_factory), "--backend",
                     "openai", "--api-url", server.url, "--episodes", "1", "--out", tmp_path / "r.json")
    assert result.exit_code != 0 and "Incorrect API key provided" in result.output, result.output
    assert "envkey-0123456789abc" not in result.output and MASK in result.output


@pytest.mark.parametrize("text", [
    f'HF_TOKEN="{TOKEN}" make experiment', f"HF_TOKEN='{TOKEN}'", f"curl -H 'X-Api-Key: {TOKEN}' http://h",
    f"PRIVATE-TOKEN: {TOKEN}", f"Authorization: token {TOKEN}", f'{{"api_key": "{TOKEN}", "x": 1}}',
    f"token: {TOKEN}\nnext: 1", f"--hub-token={TOKEN} --x", f'"Authorization": "token {TOKEN}"', f"password = {TOKEN}",
    f"- token: {TOKEN}  # mine",
])
def test_keyed_credentials_in_any_form_are_masked(text):
    """Hostile pass 14 (B2): a header, JSON or YAML key, or a quoted assignment holding a credential."""
    assert TOKEN not in redact_text(text) and MASK in redact_text(text)
    assert TOKEN not in redact_command(text)


@pytest.mark.parametrize("text", [
    "the Hub is rate-limiting this token: wait and push again", "max_new_tokens: 64", "pad_token: <pad>",
    "token: null", "one token per bin: 17 bins", "eos_token=</s>"])
def test_prose_and_tokenizer_settings_are_left_as_written(text):
    assert redact_text(text) == text


def test_a_pipeline_banner_masks_both_option_forms(cli, tmp_path, monkeypatch):
    """A pipeline step written with --token=VALUE or --token VALUE: the banner shows neither; the push itself fails
    fast against an endpoint that is not there, and its error line holds no token either."""
    folder = tmp_path / "ds"
    assert cli("data", "export-q", "frozenlake", "--episodes", "10", "--out", folder).exit_code == 0
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    for form in (f"--token={TOKEN}", f"--token {TOKEN}"):
        pipeline = tmp_path / "p.yaml"
        pipeline.write_text(f"name: p\nsteps:\n  - command: data push {form} --repo-id me/x {folder}\n")
        result = cli("pipeline", "run", pipeline, "--out", tmp_path / "out")
        assert result.exit_code != 0
        assert TOKEN not in result.output and "data push --token" in result.output and MASK in result.output


@pytest.mark.parametrize("step", ["data push fl --repo-id {undefined} --token {token}",
                                  "data push fl --repo-id me/x --api-key={token}\n    bogus: 1",
                                  # refused by the preflight (hostile pass 12, B1): a bad flag, a missing input
                                  "eval --api-key={token} --bogus-flag",
                                  "eval --api-key {token} --policy llm:nonexist --episodes 1"])
def test_a_pipeline_step_refused_before_it_runs_names_it_with_its_token_masked(cli, tmp_path, step):
    """A step with an undefined variable or an unknown key is named in the error line, its secrets masked as the
    banner masks them (hostile pass 11 found the raw command there)."""
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text("name: p\nsteps:\n  - command: " + step.format(undefined="{nope}", token=TOKEN) + "\n")
    result = cli("pipeline", "run", pipeline, "--out", tmp_path / "out")
    assert result.exit_code == 2 and TOKEN not in result.output and MASK in result.output


def test_a_pipeline_variable_holding_a_token_is_masked_wherever_the_pipeline_uses_it(cli, tmp_path, monkeypatch):
    """A short token (no hf_ shape to recognise) passed by a variable to --token and also into --repo-id: the
    banner masks it in both, and so does a refusal naming a path built from it (hostile pass 12, U6)."""
    secret = "PLANTEDsecret125"
    monkeypatch.chdir(tmp_path)  # short paths: the whole banner fits its line
    folder = "ds"
    assert cli("data", "export-q", "frozenlake", "--episodes", "1", "--out", folder).exit_code == 0
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    pipeline = tmp_path / "p.yaml"
    for step in (f"data push {folder} --repo-id me/{{tok}} --token {{tok}}",
                 "eval --api-key={tok} --policy llm:missing/{tok} --episodes 1"):
        pipeline.write_text(f"name: p\nvars: {{tok: {secret}}}\nsteps:\n  - command: {step}\n")
        result = cli("pipeline", "run", "p.yaml", "--out", "out")
        assert result.exit_code != 0 and MASK in result.output
        assert secret not in result.output and secret not in " ".join(result.output.split()).replace(" ", "")
    result = cli("eval", "--api-key", secret, "--policy", f"llm:missing/{secret}", "--episodes", "1")
    assert result.exit_code != 0 and "missing/***" in result.output and secret not in result.output
    result = cli("eval", "--policy", f"llm:missing/{secret}", "--episodes", "1")  # the next command: not a secret
    assert f"missing/{secret}" in " ".join(result.output.split()).replace(" ", "")


def test_a_secret_named_variable_set_by_a_preset_is_known_as_a_secret(cli, tmp_path):
    """The secret-named variables are read after --set and presets are applied: a preset's token fed into a --system
    text is refused, not written into the dataset (only the file's vars and --set were seen before)."""
    secret = "PLANTEDsecret126"
    assert cli("data", "collect", "--env", "CartPole-v1", "--episodes", "2", "--max-episode-steps", "5",
               "--dataset-id", "tt/cp-v0").exit_code == 0
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text('name: p\nvars: {token: "x", quick: false}\npresets: {quick: {token: "' + secret + '"}}\n'
                        'steps:\n  - command: data serialize tt/cp-v0\n'
                        '    args: {out: "{out}/ds", system: "Act well. {token}"}\n')
    result = cli("pipeline", "run", pipeline, "--out", tmp_path / "o", "--set", "quick=true")
    assert result.exit_code == 2 and "looks like a secret" in result.output and secret not in result.output
    assert not (tmp_path / "o" / "ds").exists()
    assert cli("pipeline", "run", pipeline, "--out", tmp_path / "o").exit_code == 0  # the preset off: "x" is no token


def test_card_extra_notes_are_masked_in_the_card_and_kernel_files_are_refused(cli, tmp_path):
    """The card is published by data push: a password in a URL, a token assignment or a token-shaped word in the
    notes is masked there; /proc/self/environ (a "regular" file) would have put the environment in it (hostile
    pass 12, B9)."""
    notes = tmp_path / "notes.md"
    shaped = "hf_" + "Q" * 34  # a bare word is masked by its shape (a real token's): a short one cannot be told
    notes.write_text(f"Access via https://user:{TOKEN}@hub.example.org/x\nexport HF_TOKEN={TOKEN}\nkey {shaped}\n")
    result = cli("data", "export-q", "frozenlake", "--episodes", "2", "--out", tmp_path / "ce", "--card-extra", notes)
    assert result.exit_code == 0, result.output
    card = (tmp_path / "ce" / "README.md").read_text()
    assert TOKEN not in card and shaped not in card and card.count(MASK) >= 3 and "hub.example.org" in card
    result = cli("data", "export-q", "frozenlake", "--episodes", "2", "--out", tmp_path / "ce2", "--card-extra",
                 "/proc/self/environ")
    assert result.exit_code == 2 and "a file of the kernel's" in result.output and not (tmp_path / "ce2").exists()
