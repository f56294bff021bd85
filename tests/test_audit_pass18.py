"""Hostile pass 18's findings (an independent rerun, aimed at options of one mode, edge values, secrets, pipelines
and the results tools), each the case that found it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from factories import one_line

SECRET = "SEKRETvalue4242XYZ"  # shaped like no service's token: only its name or its place can give it away


def _hyperparams(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "hp.yaml"
    path.write_text("CartPole-v1:\n  policy: MlpPolicy\n" + body)
    return path


@pytest.mark.parametrize(("body", "words"), [
    ("  learning_rate: .nan\n  n_envs: 1\n", ["learning_rate", "finite number above 0"]),
    ("  n_envs: 1\n  batch_size: -5\n", ["batch_size", "whole number from 1"]),
    ("  n_envs: 1\n  n_timesteps: .inf\n", ["n_timesteps"]),
    ("  n_envs: 100000000\n", ["n_envs", "1,024"]),
    ("  n_envs: 1\n  n_steps: 2000000000\n", ["n_steps", "10,000,000"]),
    ("  n_envs: 1\n  n_timesteps: 1e20\n", ["n_timesteps", "1,000,000,000"]),
    ("  n_envs: 64\n  n_steps: 1000000\n", ["n_steps x n_envs"]),
    ("  gamma: 1.5\n", ["gamma", "from 0 to 1"]),
    ("  learning_rate: lin_inf\n", ["learning_rate", "not finite"]),
    ("  n_envs: 1\n  n_steps: 8\n  batch_size: 1\n", ["ppo refuses the settings", "batch_size"]),
])
def test_a_hyperparameters_file_is_checked_as_the_options_are(cli, tmp_path, body, words):
    """B1: only "is a number" was checked: NaN, a negative batch, an infinite or 1e20 n_timesteps, 10^8 envs and a
    2e9-row rollout buffer were tracebacks, a MemoryError or a run without end. SB3's own assertion (PPO's
    batch_size > 1) is one line too. Nothing is written."""
    out = tmp_path / "e" / "m.zip"
    result = cli("expert", "train", "--env", "CartPole-v1", "--out", out, "--timesteps", "64", "--eval-episodes",
                 "1", "--eval-freq", "0", "--hyperparams", _hyperparams(tmp_path, body))
    one_line(result, 2, *words)
    assert not out.exists() and not out.with_suffix(".json").exists()


def test_every_shipped_hyperparameters_file_passes_its_checks():
    from rlft.core.reading import read_yaml_mapping
    from rlft.sources.hyperparams import HYPERPARAMS_DIR, load_hyperparams

    files = [*HYPERPARAMS_DIR.glob("*.yaml"), *Path("pipelines/hyperparams").glob("*.yaml")]
    loaded = [load_hyperparams(f.stem, env, f) for f in files for env in read_yaml_mapping(f, "hyperparameters")]
    assert len(loaded) >= 10 and all(h.n_envs >= 1 for h in loaded)


def test_push_to_hub_from_inside_training_is_refused(cli, tmp_path, lake_model):
    """B2: TRL's pass-through --push-to-hub was a traceback offline and hung on a mute Hub (the Trainer's upload
    has no deadline). Refused before the run folder exists."""
    data, model = lake_model
    result = cli("train", "sft", "--dataset", data, "--model", model, "--out", tmp_path / "run", "--max-steps", "1",
                 "--push-to-hub")
    one_line(result, 2, "push_to_hub", "huggingface-cli upload")
    assert not (tmp_path / "run").exists()


def test_report_to_wandb_without_credentials_is_one_line(cli, tmp_path, lake_model, monkeypatch):
    """B3: W&B with no API key raised its UsageError once training had begun (a traceback, a run folder left)."""
    pytest.importorskip("wandb")
    for name in ("WANDB_API_KEY", "WANDB_MODE", "NETRC", "WANDB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    data, model = lake_model
    for stage in (["train", "sft", "--model", model, "--max-steps", "1"], ["train", "bc", "--epochs", "1"]):
        out = tmp_path / stage[1]
        result = cli(*stage, "--dataset", data, "--out", out, "--report-to", "wandb")
        one_line(result, 2, "W&B has no API key", "WANDB_MODE=offline")
        assert not out.exists()
    from rlft.core.trackers import check_wandb_login

    monkeypatch.setenv("WANDB_MODE", "offline")
    check_wandb_login()  # offline needs no key: passes


def test_an_unknown_grpo_loss_is_refused_before_training(cli, tmp_path, lake_model):
    """B4: --loss-type nosuch was a ValueError at the first training step."""
    data, model = lake_model
    result = cli("train", "grpo", "--dataset", data, "--model", model, "--out", tmp_path / "g", "--max-steps", "1",
                 "--loss-type", "nosuch")
    one_line(result, 2, "--loss-type", "dapo")
    assert not (tmp_path / "g").exists()


@pytest.mark.parametrize(("args", "flag"), [
    (["--max-turns", "3"], "--max-turns"), (["--episode-starts", "5"], "--episode-starts"),
    (["--allow-format-change"], "--allow-format-change"), (["--vllm-mode", "server"], "--vllm-mode"),
    (["--vllm-gpu-memory-utilization", "0.9"], "--vllm-gpu-memory-utilization"),
    (["--reward", "format,bc", "--q-bonus", "0.5"], "--q-bonus")])
def test_a_grpo_setting_of_another_mode_is_refused(cli, tmp_path, lake_model, args, flag):
    """B5: episode-rollout settings on step rollouts, vLLM's without --use-vllm and the q-advantage bonus without
    that reward exited 0, and the run record said they were used."""
    data, model = lake_model
    result = cli("train", "grpo", "--dataset", data, "--model", model, "--out", tmp_path / "g", "--max-steps", "1",
                 *args)
    one_line(result, 2, f"{flag} does nothing here")
    assert not (tmp_path / "g").exists()


def test_settings_of_another_mode_are_refused_in_sft_expert_and_serialize(cli, tmp_path, lake_model):
    """B5 and U6: --eval-freq-episodes without periodic evaluation, --data-path without --record-replay, an
    explicit --precision the rlft4rl profile overrides, --turns 1 (the one-step prompt), and SFT's evaluation
    settings with --eval-split none."""
    data, model = lake_model
    expert = ["expert", "train", "--env", "CartPole-v1", "--out", tmp_path / "x.zip", "--timesteps", "64",
              "--eval-episodes", "1", "--eval-freq", "0"]
    one_line(cli(*expert, "--eval-freq-episodes", "3"), 2, "--eval-freq-episodes does nothing here")
    one_line(cli(*expert, "--data-path", tmp_path / "m"), 2, "--data-path does nothing here", "--record-replay")
    assert not (tmp_path / "x.zip").exists()
    result = cli("data", "collect", "--env", "CartPole-v1", "--episodes", "2", "--max-episode-steps", "5",
                 "--dataset-id", "tt/cp-v0")
    assert result.exit_code == 0, result.output
    serialize = ["data", "serialize", "tt/cp-v0", "--out", tmp_path / "ds"]
    one_line(cli(*serialize, "--profile", "rlft4rl", "--precision", "1"), 2, "--precision 1 does nothing")
    one_line(cli(*serialize, "--profile", "rlft4rl", "--prompt-style", "chat"), 2, "--prompt-style chat")
    one_line(cli(*serialize, "--turns", "1"), 2, "--turns 1")
    assert not (tmp_path / "ds").exists()
    assert cli(*serialize, "--profile", "rlft4rl", "--precision", "5").exit_code == 0  # what the profile writes
    result = cli("train", "sft", "--dataset", data, "--model", model, "--out", tmp_path / "s", "--max-steps", "1",
                 "--eval-split", "none", "--max-eval-samples", "5")
    one_line(result, 2, "--max-eval-samples does nothing here")


def test_a_secret_in_the_system_text_is_refused_not_written(cli, tmp_path):
    """B6: --system went into the codec, the card and every prompt unmasked, also from a secret-named pipeline
    variable given with --set (a value shaped like no token: known by its variable's name)."""
    assert cli("data", "collect", "--env", "CartPole-v1", "--episodes", "2", "--max-episode-steps", "5",
               "--dataset-id", "tt/cp-v0").exit_code == 0
    result = cli("data", "serialize", "tt/cp-v0", "--out", tmp_path / "ds", "--system", f"api_key={SECRET}")
    one_line(result, 2, "--system holds what looks like a secret")
    assert SECRET not in result.output and not (tmp_path / "ds").exists()
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text('name: p\nvars: {token: "x"}\nsteps:\n  - command: data serialize tt/cp-v0\n'
                        '    args: {out: "{out}/ds", system: "Act well. {token}"}\n')
    result = cli("pipeline", "run", pipeline, "--out", tmp_path / "o", "--set", f"token={SECRET}")
    assert result.exit_code != 0 and SECRET not in result.output
    assert "looks like a secret" in result.output and not (tmp_path / "o" / "ds").exists()
    assert cli("data", "serialize", "tt/cp-v0", "--out", tmp_path / "ok", "--prompt-style", "chat", "--system",
               "You control a cart. Answer with the action token only.").exit_code == 0


def _report(path: Path, **changes) -> Path:
    report = {"rlft_report_version": 1, "env_id": "CartPole-v1", "policy": "random", "policy_kind": "random",
              "episodes": 3, "seed": 0, "seeds": [0, 1, 2], "returns": [10.0, 12.0, 11.0], "return_mean": 11.0,
              "return_std": 0.8}
    report.update(changes)
    path.write_text(json.dumps(report))
    return path


def test_results_record_masks_credentials_copied_from_a_report(cli, tmp_path):
    """B7: a policy URL's password and its query signature were copied into seed-N.json (meant to be committed)."""
    report = _report(tmp_path / "r.json", policy=f"llm:https://user:{SECRET}@host/x?sig={SECRET}",
                     policy_kind="llm")
    result = cli("results", "record", "exp", "--seed", "0", "--report", f"a={report}", "--reproduce", "rlft eval",
                 "--results-dir", tmp_path / "res")
    assert result.exit_code == 0, result.output
    written = (tmp_path / "res" / "exp" / "seed-0.json").read_text()
    assert SECRET not in written
    assert json.loads(written)["reports"]["a"]["policy"].startswith("llm:https://***@host/x")


def test_returns_too_large_to_average_are_refused_where_a_report_is_read(cli, tmp_path):
    """B8: returns of 1e308 were recorded, then results summarize's plot was a traceback."""
    huge = _report(tmp_path / "r.json", returns=[1e308, 1e308, -1e308], return_mean=1e308 / 3)
    one_line(cli("results", "record", "exp", "--seed", "0", "--report", f"a={huge}", "--reproduce", "rlft eval",
                  "--results-dir", tmp_path / "res"), 2, "r.json")
    one_line(cli("eval", "compare", huge), 2, "r.json")


def test_collect_never_walks_the_datasets_folder(cli, tmp_path, monkeypatch):
    """B9: Minari's list_local_namespaces walked every folder under --data-path, symlinks followed (--data-path /
    walked /proc and failed after the episodes were recorded). The namespace folders are made directly; Minari's
    own walk runs only over the small staging folder it records into."""
    import os

    import minari.namespace

    walked, original = [], minari.namespace.list_local_namespaces

    def recorded():
        walked.append(Path(os.environ["MINARI_DATASETS_PATH"]).resolve())
        return original()

    monkeypatch.setattr(minari.namespace, "list_local_namespaces", recorded)
    root = tmp_path / "data"
    result = cli("data", "collect", "--env", "CartPole-v1", "--episodes", "2", "--max-episode-steps", "5",
                 "--dataset-id", "aa/bb/cp-v0", "--data-path", root)
    assert result.exit_code == 0, result.output
    assert root.resolve() not in walked
    assert (root / "aa" / "namespace_metadata.json").is_file() and (root / "aa" / "bb" / "cp-v0").is_dir()
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(root))
    assert "aa/bb/cp-v0" in minari.list_local_datasets() and "aa/bb" in original()  # Minari reads what rlft wrote


def test_a_step_that_names_no_command_is_refused(cli, tmp_path):
    """U2: a step 'command: --version' ran (printed twice)."""
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text('name: p\nsteps:\n  - command: "--version"\n')
    result = cli("pipeline", "run", pipeline, "--out", tmp_path / "o")
    one_line(result, 2, "names no command")
    assert "rlft 0." not in result.output


def test_a_report_of_a_later_version_or_with_markup_is_read_as_such(cli, tmp_path):
    """U3: rlft_report_version 99 was read as 1. U4: a report's text was rendered as rich markup."""
    one_line(cli("eval", "compare", _report(tmp_path / "v.json", rlft_report_version=99)), 2, "99", "upgrade rlft")
    marked = _report(tmp_path / "m.json", env_id="[bold red]X[/]")
    result = cli("eval", "compare", marked)
    assert result.exit_code == 0 and "[bold red]X[/]" in result.output, result.output
