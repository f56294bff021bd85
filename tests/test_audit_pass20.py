"""Hostile pass 20's findings (an independent rerun from a fresh clone, aimed at options of one format, secrets in
free text, the results tools, replay locks, file-size limits and run budgets), each the case that found it."""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from eval_factories import minari_dataset_folder
from factories import make_continuous_minari_dataset, one_line

TOKEN = "hf_SECRETTOKEN1234567890abcdef"
CHEETAH_EXPERT = Path(__file__).resolve().parents[1] / "pipelines" / "experts" / "halfcheetah-medium-sac.zip"


@pytest.fixture
def cartpole(cli):
    assert cli("data", "collect", "--env", "CartPole-v1", "--episodes", "2", "--max-episode-steps", "8",
               "--dataset-id", "tt/cp-v0").exit_code == 0
    return "tt/cp-v0"


@pytest.mark.parametrize(("args", "note"), [
    (["--bins", "16"], "--bins is not used: it applies with --format discretized or binned"),
    (["--tokens", "16"], "--tokens is not used: it applies with --format tokenized"),
    (["--edges-from", "bounds"], "--edges-from is not used: it applies with --format discretized or binned"),
    (["--format", "binned", "--precision", "2"], "--precision is not used: it applies with --format raw"),
])
def test_a_codec_option_of_another_format_is_named_not_passed_over(cli, cartpole, tmp_path, args, note):
    """F1: --bins, --tokens and --edges-from beside --format raw, --precision beside binned exited 0 without a word.
    Named in a note, not refused: a recipe passes its {bins} and {precision} whatever its {format}."""
    result = cli("data", "serialize", cartpole, "--out", tmp_path / "ds", *args)
    assert result.exit_code == 0, result.output
    assert note in " ".join(result.output.split())
    plain = cli("data", "serialize", cartpole, "--out", tmp_path / "plain", "--bins", "32", "--precision", "3")
    assert plain.exit_code == 0 and "is not used" not in plain.output  # the defaults: nothing given, nothing said


def test_a_token_in_the_author_is_refused_and_one_in_a_datasets_metadata_is_masked(cli, cartpole, tmp_path):
    """F2: collect --author TOKEN wrote it into the Minari metadata, data info printed it and serialize copied it
    into rlft_info.json (which push uploads)."""
    from rlft.sources.minari_source import datasets_root

    result = cli("data", "collect", "--env", "CartPole-v1", "--episodes", "1", "--dataset-id", "tt/auth-v0",
                 "--author", TOKEN)
    one_line(result, 2, "--author holds what looks like a secret")
    assert TOKEN not in result.output and not (datasets_root() / "tt" / "auth-v0").exists()
    metadata = datasets_root() / cartpole / "data" / "metadata.json"  # a dataset made elsewhere, token and all
    meta = json.loads(metadata.read_text())
    metadata.write_text(json.dumps(meta | {"author": [TOKEN]}))
    info = cli("data", "info", cartpole)
    assert info.exit_code == 0 and TOKEN not in info.output, info.output
    assert cli("data", "serialize", cartpole, "--out", tmp_path / "ds").exit_code == 0
    assert TOKEN not in (tmp_path / "ds" / "rlft_info.json").read_text()


def _seeds(cli, tmp_path: Path, name: str, seeds: range, env: str = "CartPole-v1") -> Path:
    for seed in seeds:
        report = tmp_path / f"{name}-{seed}.json"
        assert cli("eval", "--policy", "random", "--env", env, "--episodes", "1", "--seed", str(seed), "--out",
                   report, "--quiet").exit_code == 0
        assert cli("results", "record", name, "--seed", str(seed), "--report", f"a={report}", "--results-dir",
                   tmp_path / "res", "--reproduce", "make x").exit_code == 0
    return tmp_path / "res"


def test_results_check_refuses_a_record_of_another_experiment_or_env(cli, tmp_path):
    """F3: a seed record of experiment exp2 (or a record on another env) "reproduced" exp1."""
    res = _seeds(cli, tmp_path, "exp1", range(3))
    _seeds(cli, tmp_path, "exp2", range(5, 6))
    result = cli("results", "check", "exp1", "--results-dir", res, "--record", res / "exp2" / "seed-5.json")
    one_line(result, 2, "is a seed record of experiment 'exp2', not 'exp1'")
    _seeds(cli, tmp_path, "lake", range(6, 7), env="FrozenLake-v1")
    record = json.loads((res / "lake" / "seed-6.json").read_text())
    (tmp_path / "new.json").write_text(json.dumps(record | {"experiment": "exp1"}))
    result = cli("results", "check", "exp1", "--results-dir", res, "--record", tmp_path / "new.json")
    one_line(result, 2, "a played FrozenLake-v1, the seeds of exp1 played CartPole-v1")


def test_expert_train_holds_its_replay_id_for_the_whole_run(cli, tmp_path):
    """F4: expert train --record-replay ID locked only its checkpoint: a collect into ID while it trained exited 0, and
    the replay then replaced the collected dataset without --overwrite. The id is now claimed before training, and
    a dataset that appeared anyway is not replaced."""
    from rlft.core.errors import OutputExistsError
    from rlft.sources.minari_source import datasets_root, staged_dataset

    script = tmp_path / "rlft"  # a live process running a program named rlft: another writer of the id
    script.write_text("import sys\nsys.stdin.read()\n")
    writer = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE)
    try:
        (datasets_root() / "tt").mkdir(parents=True)
        (datasets_root() / "tt" / ".rp-v0.rlft-lock").write_text(f"{writer.pid}\n")
        result = cli("expert", "train", "--env", "Pendulum-v1", "--algo", "sac", "--timesteps", "64", "--out",
                     tmp_path / "e" / "pa.zip", "--record-replay", "tt/rp-v0", "--eval-episodes", "1")
        one_line(result, 2, "--record-replay", "is being written by another rlft process")
    finally:
        writer.communicate(b"")
    assert not (tmp_path / "e" / "pa.zip").exists() and not (datasets_root() / "tt" / "rp-v0").exists()
    make_continuous_minari_dataset("tt/rp-v0", episodes=1, steps=5)  # written while a run without --overwrite ran
    with pytest.raises(OutputExistsError, match="appeared in"), staged_dataset("tt/rp-v0", overwrite=False):
        pass
    assert (datasets_root() / "tt" / "rp-v0").is_dir()


def _limited(limit_bytes: int):
    def set_limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    return set_limit


@pytest.mark.parametrize(("command", "fmt"), [(["train", "bc", "--epochs", "1"], "raw"),
                                              (["train", "offline", "--steps", "5", "--algo", "td3bc"], "binned")])
def test_a_file_size_limit_while_saving_a_policy_is_one_line(tmp_path_factory, tmp_path, command, fmt):
    """F5: torch.save under `ulimit -f` raised its own RuntimeError ("iostream error", "unexpected pos"), a traceback
    from train bc and train offline; now the file-size line every other writer gives, naming --out."""
    env = "CartPole-v1" if command[1] == "bc" else "Pendulum-v1"
    data = minari_dataset_folder(tmp_path_factory, env, fmt=fmt, episodes=2, max_steps=20)
    out = tmp_path / ("bc.pt" if command[1] == "bc" else "run")
    rlft = shutil.which("rlft") or str(Path(sys.executable).parent / "rlft")
    done = subprocess.run([rlft, *command, "--dataset", str(data), "--out", str(out)], capture_output=True,
                          text=True, timeout=300, preexec_fn=_limited(20 * 1024))
    assert done.returncode == 1 and "Traceback" not in done.stderr + done.stdout, done.stderr
    text = " ".join((done.stdout + done.stderr).split())
    assert f"cannot write --out {out}" in text and "size limit" in text and not out.exists()


def test_data_improve_bounds_the_env_steps_of_a_run(cli, tmp_path_factory, tmp_path):
    """F6: rows, candidates and horizon were each bounded, not their product (5 x 4,096 x 10^7 ran on), and a horizon
    past the env's episode limit was played out (1 row, 2 candidates, 10^7 steps: 40 s)."""
    data = minari_dataset_folder(tmp_path_factory, "HalfCheetah-v5", fmt="binned", episodes=2, max_steps=12, bins=8)
    base = ("data", "improve", data, "--expert", CHEETAH_EXPERT, "--consistency-rows", "0")
    one_line(cli(*base, "--out", tmp_path / "a", "--rows", "5", "--candidates", "4096", "--horizon", "10000000"), 2,
             "204,800,000,000 env steps, over the 1,000,000,000 one run may play")
    one_line(cli(*base, "--out", tmp_path / "b", "--rows", "1", "--candidates", "2", "--horizon", "10000000"), 2,
             "--horizon 10,000,000 is longer than an episode of HalfCheetah-v5 (1,000 steps)")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
