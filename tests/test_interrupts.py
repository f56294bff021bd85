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

RLFT = str(Path(sys.executable).with_name("rlft"))


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _sigint_as_a_terminal_gives_it() -> None:
    """A child's SIGINT as a terminal's Ctrl-C gives it: a shell starts background jobs (a CI script's, too) with
    SIGINT ignored, and the child would inherit that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def ctrl_c_raises():
    """SIGINT raises ``KeyboardInterrupt`` in this process during the test, as in a terminal (under a background
    job it is ignored)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _freeze(proc: subprocess.Popen) -> None:
    """SIGSTOP ``proc`` and return once the kernel shows it stopped (or gone): ``os.kill`` returns before."""
    os.kill(proc.pid, signal.SIGSTOP)
    stat = Path(f"/proc/{proc.pid}/stat")
    while stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] not in ("T", "t", "Z", "X"):
        continue


def _interrupt_when(cmd: list[str], appears, sig: int, env: dict, snapshot) -> tuple[subprocess.CompletedProcess,
                                                                                     dict]:
    """Start ``cmd``; while ``appears()`` is true, send ``sig``; return the finished process and ``snapshot()`` of
    the output as it was before that run.

    The process is frozen (SIGSTOP) and ``appears()`` checked again before the signal is sent, so the signal is
    pending while the command is provably mid-write (a signal sent after the work ended tests nothing). A run
    that finishes first (a slow poll on a busy machine) is let finish and the attempt made again, 3 in all."""
    for _ in range(3):
        before = snapshot()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                preexec_fn=_sigint_as_a_terminal_gives_it)
        try:
            while not appears() and proc.poll() is None:
                try:
                    proc.wait(timeout=0.02)  # waits on the process, not a fixed delay
                except subprocess.TimeoutExpired:
                    continue
            if proc.poll() is None:
                _freeze(proc)
                mid_write = appears()
                if mid_write:
                    proc.send_signal(sig)
                os.kill(proc.pid, signal.SIGCONT)
                if mid_write:
                    out, err = proc.communicate(timeout=120)
                    return subprocess.CompletedProcess(cmd, proc.returncode, out, err), before
            proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
    pytest.fail("the command finished before it could be interrupted, 3 times")


@pytest.mark.slow
@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_interrupted_serialize_keeps_the_old_dataset_and_leaves_nothing(tmp_path, sig, code):
    env = {**os.environ, "MINARI_DATASETS_PATH": os.environ["MINARI_DATASETS_PATH"]}
    make_continuous_minari_dataset("mujoco/big-v0", episodes=120, steps=1000)
    out = tmp_path / "ds"
    good = subprocess.run([RLFT, "data", "serialize", "mujoco/big-v0", "--out", str(out), "--max-episodes", "2"],
                          env=env, capture_output=True, text=True)
    assert good.returncode == 0, good.stderr
    result, before = _interrupt_when([RLFT, "data", "serialize", "mujoco/big-v0", "--out", str(out), "--overwrite"],
                                     lambda: any(tmp_path.glob(".ds.tmp-*")), sig, env, lambda: _digest(out))
    assert result.returncode == code, result.stderr[-800:]
    assert ("Terminated" if sig == signal.SIGTERM else "Interrupted") in result.stderr
    assert _digest(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"], "temporary folders were left behind"


@pytest.mark.slow
def test_terminated_collect_keeps_the_old_dataset_and_leaves_nothing(tmp_path):
    root = Path(os.environ["MINARI_DATASETS_PATH"])
    env = dict(os.environ)
    base = [RLFT, "data", "collect", "--env", "CartPole-v1", "--policy", "random", "--dataset-id",
            "cartpole/keep-v0", "--seed", "0"]
    good = subprocess.run([*base, "--episodes", "3"], env=env, capture_output=True, text=True)
    assert good.returncode == 0, good.stderr
    folder = root / "cartpole" / "keep-v0"
    result, before = _interrupt_when([*base, "--episodes", "100000", "--overwrite"],
                                     lambda: any(root.glob(".rlft-collect-*")), signal.SIGTERM, env,
                                     lambda: _digest(folder))
    assert result.returncode == 143, result.stderr[-800:]
    assert _digest(folder) == before
    assert not list(root.glob(".rlft-collect-*")), "the temporary Minari root was left behind"


def test_ctrl_c_between_the_two_renames_is_held_until_both_are_done(tmp_path, monkeypatch, ctrl_c_raises):
    """Replacing a folder takes two renames (old aside, new in). Ctrl-C right between them must not leave nothing
    at ``out``: the interrupt is held until the new folder is in place, then still ends the run."""
    from rlft.core import io
    from rlft.core.manifest import write_manifest

    out = tmp_path / "ds"
    out.mkdir()
    (out / "old.txt").write_text("old")
    (out / "rlft_info.json").write_text("{}")
    write_manifest(out)  # an output rlft wrote: --overwrite may replace it
    real_replace = os.replace

    def replace_then_interrupt(src, dst):
        real_replace(src, dst)
        if not out.exists():  # the old folder has just moved aside: the worst moment for Ctrl-C
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(io.os, "replace", replace_then_interrupt)
    with pytest.raises(KeyboardInterrupt), io.atomic_output_dir(out, overwrite=True) as tmp:
        (tmp / "new.txt").write_text("new")
    assert sorted(p.name for p in out.iterdir()) == [".rlft_manifest.json", "new.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["ds"], "temporary folders were left behind"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ctrl_c_inside_a_garbage_collection_callback_still_stops_the_command(ctrl_c_raises):
    """jax registers a garbage-collection callback. A Ctrl-C whose handler runs inside it is raised there, where
    Python can only print it and carry on; the command must still stop with exit code 130."""
    import gc

    import typer

    from rlft.cli.common import handle_errors

    def interrupt_inside(phase, info):
        if phase == "start":
            os.kill(os.getpid(), signal.SIGINT)
            sum(range(10))  # Python code: the handler runs here, inside the callback

    def work():
        gc.callbacks.append(interrupt_inside)
        try:
            gc.collect()
        finally:
            gc.callbacks.remove(interrupt_inside)
        for _ in range(50_000_000):  # the work goes on outside the callback (about a second, unless stopped)
            pass
        return "finished"

    with pytest.raises(typer.Exit) as stopped:
        handle_errors(work)()
    assert stopped.value.exit_code == 130


def test_a_leftover_temporary_folder_is_named_on_the_next_run(cli, tmp_path):
    from factories import make_minari_dataset

    make_minari_dataset("cartpole/random-v0", episodes=3, seed=1)
    stale = tmp_path / ".ds.tmp-killed"
    stale.mkdir()
    result = cli("data", "serialize", "cartpole/random-v0", "--out", tmp_path / "ds")
    assert result.exit_code == 0, result.output
    assert ".ds.tmp-killed" in result.output and "interrupted run" in result.output
    assert stale.is_dir()  # named, never deleted: another run may own it
    # one that names its writer, a process that is gone (killed): removed (hostile pass 12, U2: GBs stayed)
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = tmp_path / f".ds.tmp-{gone.pid}-0123456789ab"
    (dead / "data").mkdir(parents=True)
    result = cli("data", "serialize", "cartpole/random-v0", "--out", tmp_path / "ds", "--overwrite")
    assert result.exit_code == 0 and f"removed {dead.name}" in " ".join(result.output.split()), result.output
    assert not dead.exists() and stale.is_dir()


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["set-aside", "checkpointed"])
def test_a_killed_training_overwrite_gives_the_old_run_back_on_the_next_run(tmp_path, moment):
    """SIGKILL (no handler runs) while ``train sft --overwrite`` replaces a good run, right after the old run was set
    aside or once the new one has saved a checkpoint: the next command on that --out puts the old run back, byte for
    byte, and keeps the unfinished one beside it, named."""
    from factories import make_lake_q_model

    (tmp_path / "inputs").mkdir()
    data, model = make_lake_q_model(tmp_path / "inputs")
    env = dict(os.environ)
    run = tmp_path / "work" / "run"
    base = [RLFT, "train", "sft", "--dataset", str(data), "--model", str(model), "--out", str(run), "--no-lora",
            "--eval-split", "none"]
    good = subprocess.run([*base, "--max-steps", "2"], env=env, capture_output=True, text=True)
    assert good.returncode == 0, good.stderr[-800:]
    work = run.parent
    if moment == "set-aside":
        appears = lambda: any(work.glob(".run.old-*"))  # noqa: E731
    else:
        # the old run moved aside (its content there: between the aside's mkdir and the move, --out still holds the
        # old run and its checkpoint, which a loaded machine's poll caught once) and the new run's checkpoint saved
        appears = lambda: (any((p / "content").is_dir() for p in work.glob(".run.old-*"))  # noqa: E731
                           and any((run / "checkpoints").glob("checkpoint-*/trainer_state.json")))
    result, before = _interrupt_when([*base, "--overwrite", "--max-steps", "100000", "--save-steps", "5"], appears,
                                     signal.SIGKILL, env, lambda: _digest(run))
    assert result.returncode == -signal.SIGKILL
    assert any(work.glob(".run.old-*"))  # the old run waits aside: nothing could put it back
    again = subprocess.run(base + ["--max-steps", "2"], env=env, capture_output=True, text=True)
    assert again.returncode == 2 and "already holds a run" in again.stderr  # no --overwrite: refused, after...
    assert "the previous content is back" in " ".join(again.stderr.split())  # ...the old run came back
    assert _digest(run) == before
    kept = list(work.glob(".run.unfinished-*"))
    # the killed run, named (under a loaded CPU the kill can land before it wrote its first file: kept all the same)
    assert len(kept) == 1 and (kept[0] / "content").is_dir()
    assert not any(work.glob(".run.old-*"))


def test_a_run_whose_overwrite_was_killed_is_named_by_its_readers(cli, tmp_path):
    """What a reader of the half-written --out says (hostile pass 11, U1): not only "holds no model", but where the
    whole previous run waits and what puts it back. Reading changes nothing."""
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)  # the new run, killed before its model was written
    old = tmp_path / ".run.old-k1ll3d00" / "content"  # the old run, set aside by a process that is gone
    old.mkdir(parents=True)
    (old / "config.json").write_text("{}")
    result = cli("eval", "--policy", f"llm:{run}", "--env", "FrozenLake-v1", "--episodes", "1",
                 "--out", str(tmp_path / "r.json"))
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert f"kept whole at {old}" in text and f"--out {run}) puts it back" in text, result.output
    assert (old / "config.json").is_file() and not (run / "config.json").exists()


# rlft's own entry point with one function of the training stage made a SIGKILL of the process at the moment it
# is called: a kill at an exact point of a real run, which polling the files from outside cannot time (hostile
# pass 13, U4: "after the new weights, before the manifest" was missed three times)
_KILLED_AT = """
import os, signal, sys
import rlft.train.stage as stage
name, status = sys.argv[1], sys.argv[2]
real = getattr(stage, name)
def killed(*args, **kwargs):
    if status == "-" or (len(args) > 1 and isinstance(args[1], dict) and args[1].get("status") == status):
        os.kill(os.getpid(), signal.SIGKILL)
    return real(*args, **kwargs)
setattr(stage, name, killed)
from rlft.cli.main import app
app(sys.argv[3:], prog_name="rlft")
"""


@pytest.mark.slow
@pytest.mark.parametrize(("function", "status"), [
    ("write_run_info", "complete"),  # the new weights saved, the run not yet marked complete
    ("write_manifest", "-"),  # marked complete, its summary written, the manifest not yet
])
def test_a_training_overwrite_killed_at_any_moment_of_its_end_loses_no_run(tmp_path, function, status):
    from factories import make_lake_q_model

    (tmp_path / "inputs").mkdir()
    data, model = make_lake_q_model(tmp_path / "inputs")
    run = tmp_path / "work" / "run"
    args = ["train", "sft", "--dataset", str(data), "--model", str(model), "--out", str(run), "--no-lora",
            "--eval-split", "none"]
    good = subprocess.run([RLFT, *args, "--max-steps", "1"], capture_output=True, text=True)
    assert good.returncode == 0, good.stderr[-800:]
    before = _digest(run)
    killed = subprocess.run([sys.executable, "-c", _KILLED_AT, function, status, *args, "--overwrite",
                             "--max-steps", "2"], capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-800:]
    assert (run / "model.safetensors").is_file() and _digest(run) != before  # the new weights are at --out
    again = subprocess.run([RLFT, *args, "--max-steps", "1"], capture_output=True, text=True)
    assert again.returncode == 2 and "the previous content is back" in " ".join(again.stderr.split()), again.stderr
    assert _digest(run) == before
    kept = list(run.parent.glob(".run.unfinished-*"))
    assert len(kept) == 1 and (kept[0] / "content" / "model.safetensors").is_file()
    assert not any(run.parent.glob(".run.old-*"))


@pytest.mark.slow
def test_a_training_overwrite_killed_while_deleting_the_old_run_keeps_the_new_one(tmp_path):
    """Killed after the new run's manifest, while the old run set aside was being deleted: the new run is whole and
    stays; what is left of the old one, which --overwrite was asked to replace, is removed (hostile pass 14, B14:
    the half-deleted old run came back over the complete new one)."""
    from factories import make_lake_q_model

    (tmp_path / "inputs").mkdir()
    data, model = make_lake_q_model(tmp_path / "inputs")
    run = tmp_path / "work" / "run"
    args = ["train", "sft", "--dataset", str(data), "--model", str(model), "--out", str(run), "--no-lora",
            "--eval-split", "none"]
    assert subprocess.run([RLFT, *args, "--max-steps", "1"], capture_output=True, text=True).returncode == 0
    killed = subprocess.run([sys.executable, "-c", _KILLED_AT, "release_aside", "-", *args, "--overwrite",
                             "--max-steps", "2"], capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-800:]
    new = _digest(run)
    again = subprocess.run([RLFT, *args, "--max-steps", "1"], capture_output=True, text=True)
    assert again.returncode == 2 and "already holds a run" in again.stderr, again.stderr
    assert "what was left of the content" in " ".join(again.stderr.split()), again.stderr
    assert _digest(run) == new and not any(run.parent.glob(".run.old-*"))
    assert not any(run.parent.glob(".run.unfinished-*"))
