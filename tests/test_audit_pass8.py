"""What an independent hostile pass (the eighth) found, each now refused in one line with nothing of the user's
lost: damaged Minari counts, a folder that appears at --out while a command runs, --resume adopting a user's file,
--video over a user's files, a dataset combined with itself, secrets in results files and W&B's argv, a huge map
file, --set bombs and typos, unknown or missing trackers, out-of-range recorded actions, malformed codecs, a bad
HF_ENDPOINT, stalled downloads and full disks reported by writers that are not Python's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from factories import one_line
from rlft.core.errors import InvalidInputError, OfflineError, OutputExistsError, RemoteError


def _minari(dataset_id: str, episodes: int = 3) -> Path:
    from factories import make_minari_dataset
    from rlft.sources.minari_source import datasets_root

    make_minari_dataset(dataset_id, episodes=episodes, max_steps=20)
    return datasets_root() / dataset_id


def test_damaged_minari_counts_are_refused_before_any_memory_is_taken(cli, tmp_path):
    folder = _minari("test/counts-v0")
    meta = folder / "data" / "metadata.json"
    good = json.loads(meta.read_text())
    meta.write_text(json.dumps({**good, "total_episodes": 10**9}))
    one_line(cli("data", "serialize", "test/counts-v0", "--out", tmp_path / "s"), 2, "damaged",
              "1000000000 episodes")
    meta.write_text(json.dumps({**good, "total_episodes": 2}))  # fewer than the file holds
    one_line(cli("data", "serialize", "test/counts-v0", "--out", tmp_path / "s"), 2, "the HDF5 file holds 3")
    meta.write_text(json.dumps({**good, "observation_space": 5, "action_space": "x"}))  # Minari asserts on these
    one_line(cli("data", "serialize", "test/counts-v0", "--out", tmp_path / "s"), 2, "damaged")
    assert not (tmp_path / "s").exists()


def test_a_folder_filled_while_a_command_runs_is_kept(tmp_path):
    from rlft.core.io import atomic_output_dir

    out = tmp_path / "out"
    with pytest.raises(OutputExistsError, match="filled by someone else"), atomic_output_dir(out) as tmp:
        (tmp / "data.txt").write_text("rlft's")
        out.mkdir()
        (out / "notes.txt").write_text("mine")  # a user (or another tool) writes there meanwhile
    assert (out / "notes.txt").read_text() == "mine" and not (out / "data.txt").exists()


def test_a_minari_dataset_filled_while_collect_runs_is_kept():
    from factories import make_minari_dataset
    from rlft.sources.minari_source import datasets_root, staged_dataset

    final = datasets_root() / "test" / "race-v0"
    with pytest.raises(OutputExistsError, match="filled by someone else"), \
            staged_dataset("test/race-v0", overwrite=False):
        make_minari_dataset("test/race-v0", episodes=1, max_steps=5)  # written under the staging root
        final.mkdir(parents=True)
        (final / "notes.txt").write_text("mine")
    assert sorted(p.name for p in final.iterdir()) == ["notes.txt"]


def test_two_collects_of_one_id_are_refused_whatever_their_tmpdir(cli, tmp_path):
    from rlft.sources.minari_source import datasets_root

    script = tmp_path / "rlft"  # a live process running a program named rlft: a writer (pass 13 B4: not any mention)
    script.write_text("import sys\nsys.stdin.read()\n")
    writer = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE)
    try:
        (datasets_root() / "test").mkdir(parents=True)
        (datasets_root() / "test" / ".lock-v0.rlft-lock").write_text(f"{writer.pid}\n")
        one_line(cli("data", "collect", "--env", "CartPole-v1", "--dataset-id", "test/lock-v0", "--episodes", "1"),
                  2, "is being written by another rlft process")
    finally:
        writer.communicate(b"")
    assert not (datasets_root() / "test" / "lock-v0").exists()


def test_resume_refuses_a_run_holding_a_users_file(tmp_path):
    from rlft.models.run import _resume_checkpoint

    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "rlft_run.json").write_text(json.dumps({"stage": "sft", "status": "completed"}))
    (run / "logs" / "notes.md").write_text("mine")
    with pytest.raises(OutputExistsError, match=r"rlft did not write there \(logs/notes.md\)"):
        _resume_checkpoint(run, {"stage": "sft"}, empty=False)


def test_video_goes_only_to_a_new_folder_or_over_earlier_videos(cli, tmp_path):
    from rlft.evaluate.runner import check_video_folder

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "holiday.mp4").write_text("mine")
    args = ("eval", "--policy", "random", "--env", "CartPole-v1", "--episodes", "1", "--quiet")
    one_line(cli(*args, "--video", mine), 2, "holds files an evaluation does not write (holiday.mp4)")
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / "episode-0000-seed-0.mp4").write_text("an earlier evaluation's")
    one_line(cli(*args, "--video", earlier), 2, "already holds videos", "--overwrite")
    check_video_folder(earlier, True, [])  # with --overwrite: earlier videos are replaced
    with pytest.raises(InvalidInputError, match="--video"):
        check_video_folder(mine / "inside", False, [("--codec", str(mine))])  # never into an input
    assert (mine / "holiday.mp4").read_text() == "mine"


def test_a_combination_takes_each_dataset_once_and_never_replaces_one(cli):
    first = _minari("test/a-v0", episodes=2)
    _minari("test/b-v0", episodes=2)
    one_line(cli("data", "combine", "test/a-v0", "test/a-v0", "--dataset-id", "test/aa-v0"), 2,
              "given more than once")
    one_line(cli("data", "combine", "test/a-v0", "test/b-v0", "--dataset-id", "test/a-v0", "--overwrite"), 2,
              "cannot replace its own source")
    # hostile pass 14 (B12): a dataset given as its data/ folder is the same dataset as its id
    data = first / "data"
    one_line(cli("data", "combine", "test/a-v0", str(data), "--dataset-id", "test/aa-v0"), 2, "given more than once")
    one_line(cli("data", "combine", str(data), "test/b-v0", "--dataset-id", "test/a-v0", "--overwrite"), 2,
              "cannot replace its own source")


def test_no_secret_in_results_files_or_in_what_a_tracker_reads_of_the_command_line(cli, tmp_path, monkeypatch):
    from rlft.core.secrets import redact_text

    token = "hf_PLANTEDSECRET123456"
    assert token not in redact_text(f"--api-url must start with http://, got 'user:{token}@127.0.0.1:9/v1'")
    assert token not in redact_text(f"got '//user:{token}@host/v1'")
    monkeypatch.setattr(sys, "argv", ["rlft", "train", "sft", "--hub-token", token])
    report = tmp_path / "r.json"
    one_line(cli("eval", "--policy", "random", "--env", "CartPole-v1", "--episodes", "1", "--quiet", "--out",
                  report), 0)
    assert token not in " ".join(sys.argv)  # W&B keeps sys.argv in its run files
    command = f"rlft data push x --token {token} --api-key={token} http://u:{token}@h/"
    one_line(cli("results", "record", "t", "--seed", "0", "--report", f"r={report}", "--reproduce", command,
                  "--results-dir", tmp_path / "res"), 0)
    one_line(cli("results", "summarize", "t", "--reproduce", command, "--results-dir", tmp_path / "res"), 0)
    for written in (tmp_path / "res" / "t").iterdir():
        assert token not in written.read_bytes().decode("utf-8", "replace"), written


def test_bounded_maps_and_set_values(cli, tmp_path):
    big = tmp_path / "big.txt"
    big.write_text("S" + "F" * 99 + "\n" + "\n".join(["F" * 99 + "G"] * 99) + "\n")  # 100x100
    one_line(cli("data", "export-q", "frozenlake", "--map", big, "--out", tmp_path / "fl"), 2,
              "10,000 cells", "at most 4,096")
    levels = [f"&{c} [" + ", ".join([f"*{p}"] * 10) + "]" for p, c in zip("abcdefg", "bcdefgh", strict=True)]
    bomb = "[" + ", ".join(["&a [x, x, x, x, x, x, x, x, x, x]", *levels]) + "]"  # 10**8 values once expanded
    one_line(cli("pipeline", "run", "pipelines/demo.yaml", "--out", tmp_path / "p", "--set", f"episodes={bomb}"),
              2, "more than 100,000 values")
    one_line(cli("pipeline", "run", "pipelines/demo.yaml", "--out", tmp_path / "p", "--set", "seed=a: b: c"), 2,
              "--set seed is not valid YAML")
    assert not (tmp_path / "fl").exists() and not (tmp_path / "p").exists()


def test_trackers_a_trl_stage_cannot_open_are_refused_before_anything_is_written(cli, tmp_path_factory, tmp_path):
    import importlib.util

    from eval_factories import frozenlake_dataset, tiny_model

    lake = frozenlake_dataset(tmp_path_factory)
    model = tiny_model(tmp_path_factory, lake, "trackers")
    args = ("train", "sft", "--dataset", lake, "--model", model, "--max-steps", "1", "--out", tmp_path / "run")
    one_line(cli(*args, "--report-to", "nosuchtracker"), 2, "'nosuchtracker' is not a tracker transformers knows")
    if importlib.util.find_spec("mlflow") is None:
        one_line(cli(*args, "--report-to", "tensorboard,mlflow"), 2, "the mlflow package is not installed")
    assert not (tmp_path / "run").exists()


def test_recorded_actions_outside_the_action_space_are_refused_by_the_bc_reward(tmp_path_factory):
    from datasets import Dataset

    from eval_factories import frozenlake_dataset
    from rlft.codecs.base import load_codec
    from rlft.train.grpo.rewards import BCReward

    reward = BCReward(load_codec(frozenlake_dataset(tmp_path_factory)))
    reward.preflight(Dataset.from_dict({"prompt": ["p", "p"], "action": [0, 3]}))
    with pytest.raises(InvalidInputError, match="1 recorded action"):
        reward.preflight(Dataset.from_dict({"prompt": ["p", "p"], "action": [0, 99]}))


@pytest.mark.parametrize(("change", "words"), [
    (lambda c: c["action_space"].pop("n"), "discrete space needs n"),
    (lambda c: c["template"].update(history="three"), "template history must be int"),
    (lambda c: c["observation_space"].update(type=5), "observation_space is not a space"),
])
def test_malformed_codecs_are_refused_when_loaded(tmp_path_factory, tmp_path, change, words):
    from eval_factories import frozenlake_dataset
    from rlft.codecs.base import load_codec

    codec = json.loads((frozenlake_dataset(tmp_path_factory) / "rlft_codec.json").read_text())
    change(codec)
    (tmp_path / "rlft_codec.json").write_text(json.dumps(codec))
    with pytest.raises(InvalidInputError, match=words):
        load_codec(tmp_path)


def test_a_bad_hub_endpoint_isone_line(monkeypatch):
    from rlft.core.net import hub_endpoint

    for bad in ("http://u:hf_X@[::1:80", "u:hf_X@127.0.0.1:9"):
        monkeypatch.setenv("HF_ENDPOINT", bad)
        with pytest.raises(InvalidInputError, match="HF_ENDPOINT") as caught:
            hub_endpoint()
        assert "hf_X" not in str(caught.value)


def test_a_minari_download_is_bounded_and_its_failures_areone_line(monkeypatch):
    import threading

    import minari

    from rlft.sources.minari_source import _download

    release = threading.Event()
    monkeypatch.setattr(minari, "load_dataset", lambda *a, **k: release.wait(30))  # a server that never answers
    try:
        with pytest.raises(OfflineError, match="did not finish within 0.2 s"):
            _download("a/b-v0", 0.2)
    finally:
        release.set()

    def html(*args, **kwargs):
        return json.loads("<html>")

    monkeypatch.setattr(minari, "load_dataset", html)
    with pytest.raises(RemoteError, match="JSONDecodeError"):
        _download("a/b-v0", 5)


def test_a_full_disk_reported_by_a_writer_that_is_not_pythons_isone_line(tmp_path):
    from rlft.core.errors import WriteFaultError
    from rlft.core.faults import as_disk_full
    from rlft.core.io import atomic_output_dir

    assert as_disk_full(RuntimeError("[enforce fail] unexpected pos 48512 vs 48400"), tmp_path) is None
    with pytest.raises(WriteFaultError, match="the disk is full"), atomic_output_dir(tmp_path / "m"):
        raise RuntimeError("SafetensorError: No space left on device (os error 28)")
    assert not (tmp_path / "m").exists()


def test_the_current_folder_is_never_an_output_even_empty(cli, tmp_path, monkeypatch):
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    one_line(cli("data", "export-q", "frozenlake", "--episodes", "2", "--out", "."), 2, "the current folder")


def test_an_output_name_too_long_for_the_file_system_is_refused_before_any_work(cli, tmp_path):
    """Pass 8 left it unclear: a 240-byte --out name was refused only when the finished output was moved into place,
    after the work. The name must leave room for the siblings rlft writes beside an output (temp, aside, lock)."""
    result = cli("data", "export-q", "frozenlake", "--out", tmp_path / ("a" * 240))
    one_line(result, 2, "240 bytes", "shorter name")
    assert "episodes" not in result.output  # refused before the greedy-policy episodes were played
    assert list(tmp_path.iterdir()) == []
    result = cli("data", "export-q", "frozenlake", "--out", tmp_path / ("b" * 300) / "q")
    one_line(result, 2, "too long")  # a folder still to be made, too
