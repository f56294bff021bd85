"""Real interrupts: SIGINT and SIGTERM sent to a running ``rlft`` process that is replacing good output
(``serialize --overwrite``, ``collect --overwrite``); the old output must survive intact, nothing temporary may
be left behind, and the exit code says which signal it was."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from factories import make_continuous_minari_dataset

pytestmark = pytest.mark.slow
RLFT = str(Path(sys.executable).with_name("rlft"))


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _interrupt_when(cmd: list[str], appears, sig: int, env: dict) -> subprocess.CompletedProcess:
    """Start ``cmd``; once ``appears()`` is true, send ``sig``; return the finished process."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        while not appears():
            try:
                proc.wait(timeout=0.02)  # waits on the process, not a fixed delay
            except subprocess.TimeoutExpired:
                continue
            pytest.fail(f"the command finished before it could be interrupted: {proc.stderr.read()[-500:]}")
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_interrupted_serialize_keeps_the_old_dataset_and_leaves_nothing(tmp_path, sig, code):
    env = {**os.environ, "MINARI_DATASETS_PATH": os.environ["MINARI_DATASETS_PATH"]}
    make_continuous_minari_dataset("mujoco/big-v0", episodes=120, steps=1000)
    out = tmp_path / "ds"
    good = subprocess.run([RLFT, "data", "serialize", "mujoco/big-v0", "--out", str(out), "--max-episodes", "2"],
                          env=env, capture_output=True, text=True)
    assert good.returncode == 0, good.stderr
    before = _digest(out)
    result = _interrupt_when([RLFT, "data", "serialize", "mujoco/big-v0", "--out", str(out), "--overwrite"],
                             lambda: any(tmp_path.glob(".ds.tmp-*")), sig, env)
    assert result.returncode == code, result.stderr[-800:]
    assert ("Terminated" if sig == signal.SIGTERM else "Interrupted") in result.stderr
    assert _digest(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"], "temporary folders were left behind"


def test_terminated_collect_keeps_the_old_dataset_and_leaves_nothing(tmp_path):
    root = Path(os.environ["MINARI_DATASETS_PATH"])
    env = dict(os.environ)
    base = [RLFT, "data", "collect", "--env", "CartPole-v1", "--policy", "random", "--dataset-id",
            "cartpole/keep-v0", "--seed", "0"]
    good = subprocess.run([*base, "--episodes", "3"], env=env, capture_output=True, text=True)
    assert good.returncode == 0, good.stderr
    folder = root / "cartpole" / "keep-v0"
    before = _digest(folder)
    result = _interrupt_when([*base, "--episodes", "100000", "--overwrite"],
                             lambda: any(root.glob(".rlft-collect-*")), signal.SIGTERM, env)
    assert result.returncode == 143, result.stderr[-800:]
    assert _digest(folder) == before
    assert not list(root.glob(".rlft-collect-*")), "the temporary Minari root was left behind"


def test_a_leftover_temporary_folder_is_named_on_the_next_run(cli, tmp_path):
    from factories import make_minari_dataset

    make_minari_dataset("cartpole/random-v0", episodes=3, seed=1)
    stale = tmp_path / ".ds.tmp-killed"
    stale.mkdir()
    result = cli("data", "serialize", "cartpole/random-v0", "--out", tmp_path / "ds")
    assert result.exit_code == 0, result.output
    assert ".ds.tmp-killed" in result.output and "interrupted run" in result.output
    assert stale.is_dir()  # named, never deleted: another run may own it
