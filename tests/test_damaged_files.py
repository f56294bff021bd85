"""Damaged files and filesystem faults are input errors: one line (`Error: ...` naming the file), exit code 2,
no traceback, and nothing half-written. The faults a test cannot make for real as root (a read-only folder, a
full disk) are simulated by patching the write that would hit them."""

from __future__ import annotations

import errno
import json
import shutil
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    from typer.testing import CliRunner

    from rlft.cli.main import app

    out = tmp_path_factory.mktemp("damaged") / "lake"
    result = CliRunner().invoke(app, ["data", "export-q", "frozenlake", "--out", str(out), "--episodes", "5"])
    assert result.exit_code == 0, result.output
    model = out.parent / "tiny"
    result = CliRunner().invoke(app, ["model", "init", "--dataset", str(out), "--out", str(model)])
    assert result.exit_code == 0, result.output
    return out, model


def one_line_error(result, *fragments: str, before_work: bool = True, code: int = 2) -> str:
    """The CLI said ``Error: ...`` on one line (no traceback) with every fragment in it and exited with ``code``
    (2: the input is wrong; 1: the machine failed, a full disk); ``before_work``: and printed nothing else (no
    progress bar: the fault was found before any work)."""
    text = " ".join(result.output.split())
    assert result.exit_code == code, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0] and "Traceback" not in result.output, result.output
    if before_work:
        assert len(lines) == 1, result.output
    for fragment in fragments:
        assert fragment in text, (fragment, text)
    return text


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


# ---------------------------------------------------------------------------------------------------------
# outputs: a parent that is a file, an existing CSV, a read-only folder, a full disk
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("args,option", [
    (["data", "export-q", "frozenlake", "--episodes", "5", "--out", "{file}/ds"], "--out"),
    (["data", "export-q", "frozenlake", "--episodes", "5", "--out", "{tmp}/ok", "--csv", "{file}/q.csv"], "--csv"),
    (["eval", "--policy", "random", "--env", "CartPole-v1", "--episodes", "1", "--out", "{file}/r.json"], "--out"),
    (["model", "init", "--dataset", "{lake}", "--out", "{file}/m"], "--out"),
    (["train", "bc", "--dataset", "{lake}", "--out", "{file}/bc.pt"], "--out"),
    (["train", "sft", "--dataset", "{lake}", "--model", "{model}", "--out", "{file}/run", "--no-lora"], "--out"),
])
def test_an_output_under_a_file_is_refused_before_any_work(cli, tmp_path, lake, args, option):
    file = tmp_path / "a-file"
    file.write_text("x")
    values = {"file": file, "tmp": tmp_path, "lake": lake[0], "model": lake[1]}
    result = cli(*[a.format(**values) for a in args])
    one_line_error(result, f"cannot write {option}", "is a file, not a folder")
    assert not (tmp_path / "ok").exists()  # export-q with a bad --csv wrote no dataset either
    assert file.read_text() == "x"


def test_an_existing_csv_is_kept_unless_it_is_rlfts_and_overwrite_is_given(cli, tmp_path):
    csv = tmp_path / "q.csv"
    csv.write_text("mine\n")
    out = tmp_path / "ds"
    result = cli("data", "export-q", "frozenlake", "--episodes", "5", "--out", out, "--csv", csv)
    one_line_error(result, "--csv", "already exists")
    assert csv.read_text() == "mine\n" and not out.exists()
    result = cli("data", "export-q", "frozenlake", "--episodes", "5", "--out", out, "--csv", csv, "--overwrite")
    one_line_error(result, "--csv", "does not look like a file rlft writes")  # a user's file: kept all the same
    assert csv.read_text() == "mine\n" and not out.exists()
    csv.unlink()
    for _ in range(2):  # rlft's own CSV: replaced with --overwrite
        result = cli("data", "export-q", "frozenlake", "--episodes", "5", "--out", out, "--csv", csv, "--overwrite")
        assert result.exit_code == 0, result.output
    assert csv.read_text().startswith("state,state_str") and (out / "rlft_codec.json").is_file()
    assert leftovers(tmp_path) == []


def test_a_failed_dataset_write_leaves_no_csv(cli, tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    class FullDisk(pq.ParquetWriter):
        def write_table(self, table, *args, **kwargs):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pq, "ParquetWriter", FullDisk)
    result = cli("data", "export-q", "frozenlake", "--episodes", "5", "--out", tmp_path / "ds",
                 "--csv", tmp_path / "q.csv")
    one_line_error(result, "cannot write --out", "the disk is full", "nothing was written", before_work=False,
                   code=1)
    assert not (tmp_path / "ds").exists() and not (tmp_path / "q.csv").exists()
    assert leftovers(tmp_path) == []  # the staged CSV and the temporary dataset folder are gone


def test_a_read_only_folder(cli, tmp_path, monkeypatch):
    real_mkdir = Path.mkdir

    def denied(self, *args, **kwargs):  # the output's temporary folder cannot be made there
        if self.name.startswith(".ds.tmp-"):
            raise PermissionError(errno.EACCES, "Permission denied", str(self.parent))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", denied)
    result = cli("data", "export-q", "frozenlake", "--episodes", "5", "--out", tmp_path / "ds")
    one_line_error(result, "cannot write --out", "permission denied", before_work=False)
    assert not (tmp_path / "ds").exists()


def test_a_full_disk_while_writing_a_report(cli, tmp_path, monkeypatch):
    import os

    from rlft.core import io

    real_replace = os.replace

    def replace(src, dst, *args, **kwargs):
        if str(dst).endswith(".json"):
            raise OSError(errno.ENOSPC, "No space left on device", str(dst))
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(io.os, "replace", replace)
    out = tmp_path / "r.json"
    result = cli("eval", "--policy", "random", "--env", "CartPole-v1", "--episodes", "1", "--out", out)
    one_line_error(result, f"cannot write --out {out}", "the disk is full", before_work=False, code=1)
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".r.json")]


# ---------------------------------------------------------------------------------------------------------
# inputs: map, card prose, codec, Parquet shards, info, reports, models, Minari storage, seeds
# ---------------------------------------------------------------------------------------------------------
def test_a_binary_map_and_a_missing_card_extra(cli, tmp_path):
    binary = tmp_path / "map.txt"
    binary.write_bytes(bytes(range(200, 256)) * 4)
    result = cli("data", "export-q", "frozenlake", "--map", binary, "--out", tmp_path / "a")
    one_line_error(result, f"map file {binary}", "not UTF-8 text")
    result = cli("data", "export-q", "frozenlake", "--episodes", "5", "--out", tmp_path / "b",
                 "--card-extra", tmp_path / "nope.md")
    one_line_error(result, "--card-extra file", "nope.md does not exist")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


@pytest.mark.parametrize("damage,message", [
    (lambda d: d.write_text("{not json"), "is not valid JSON"),
    (lambda d: d.write_text("[1, 2]"), "must hold a JSON object, not a list"),
    (lambda d: d.write_text(json.dumps({k: v for k, v in json.loads(d.read_text()).items()
                                        if k != "observation_space"})), "lacks observation_space"),
    (lambda d: d.write_text(json.dumps({**json.loads(d.read_text()), "rlft_codec_version": 99})),
     "codec schema version 99"),
    (lambda d: d.write_text(json.dumps({**json.loads(d.read_text()), "params": {"map_rows": 3}})),
     "malformed frozenlake-grid codec"),
    (lambda d: d.write_text(json.dumps({**(c := json.loads(d.read_text())),
                                        "params": {**c["params"], "map_rows": ["SF", "FHFH"]}})),
     "map map_rows has ragged rows"),  # hostile pass 11, U3: played on before
    (lambda d: d.write_text(json.dumps({**(c := json.loads(d.read_text())),
                                        "env_kwargs": {**c["env_kwargs"], "is_slippery": "false"}})),
     "env_kwargs.is_slippery must be true or false"),  # hostile pass 12, B10: a slippery lake, silently
])
def test_a_damaged_codec_file(cli, tmp_path, lake, damage, message):
    folder = tmp_path / "lake"
    shutil.copytree(lake[0], folder)
    damage(folder / "rlft_codec.json")
    result = cli("eval", "--policy", "random", "--codec", folder, "--episodes", "1")
    one_line_error(result, f"codec file {folder / 'rlft_codec.json'}", message)


@pytest.mark.parametrize("args", [
    ["eval", "--policy", "q-greedy", "--codec", "{data}", "--episodes", "1"],
    ["model", "init", "--dataset", "{data}", "--out", "{tmp}/m"],
    ["train", "bc", "--dataset", "{data}", "--out", "{tmp}/bc.pt"],
    ["train", "sft", "--dataset", "{data}", "--model", "{model}", "--out", "{tmp}/run", "--no-lora"],
])
def test_a_corrupt_parquet_shard(cli, tmp_path, lake, args):
    folder = tmp_path / "lake"
    shutil.copytree(lake[0], folder)
    shard = next((folder / "data").glob("*.parquet"))
    shard.write_bytes(shard.read_bytes()[:100])
    result = cli(*[a.format(data=folder, tmp=tmp_path, model=lake[1]) for a in args])
    one_line_error(result, f"cannot read {shard}", "not a valid Parquet file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lake"]


def test_a_damaged_info_file_and_damaged_reports(cli, tmp_path, lake):
    folder = tmp_path / "lake"
    shutil.copytree(lake[0], folder)
    (folder / "rlft_info.json").write_text("{broken")
    result = cli("eval", "--policy", "q-greedy", "--codec", folder, "--episodes", "1")
    one_line_error(result, "dataset info file", "rlft_info.json is not valid JSON")
    garbage, binary = tmp_path / "g.json", tmp_path / "b.json"
    garbage.write_text("not json")
    binary.write_bytes(bytes(range(128, 256)))
    one_line_error(cli("eval", "compare", garbage), f"report {garbage} is not valid JSON")
    one_line_error(cli("eval", "compare", binary), f"report {binary} is not UTF-8 text")


@pytest.mark.parametrize("part,message", [
    ("config.json", "cannot load a causal LM"),
    ("tokenizer.json", "cannot load the tokenizer"),
    ("model.safetensors", "cannot load a causal LM"),
])
def test_a_damaged_model_folder(cli, tmp_path, lake, part, message):
    model = tmp_path / "model"
    shutil.copytree(lake[1], model)
    (model / part).write_bytes((model / part).read_bytes()[:50])
    result = cli("eval", "--policy", f"llm:{model}", "--codec", lake[0], "--episodes", "1")
    one_line_error(result, message, str(model))


def test_a_truncated_minari_file(cli, tmp_path):
    from factories import make_minari_dataset
    from rlft.sources.minari_source import minari_root

    with minari_root(tmp_path / "minari"):
        make_minari_dataset("test/cut-v0", env_id="CartPole-v1", episodes=3)
        data = tmp_path / "minari" / "test" / "cut-v0" / "data"
        hdf5 = data / "main_data.hdf5"
        hdf5.write_bytes(hdf5.read_bytes()[: hdf5.stat().st_size // 2])
        for args in (["data", "info", "test/cut-v0"], ["data", "serialize", "test/cut-v0", "--out", tmp_path / "s"]):
            one_line_error(cli(*args), "cannot read Minari dataset test/cut-v0", "damaged", "truncated file")
        (data / "metadata.json").write_text("{bad")
        one_line_error(cli("data", "info", "test/cut-v0"), "cannot read Minari dataset test/cut-v0", "damaged")
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("args", [
    ["data", "export-q", "frozenlake", "--out", "{tmp}/x"],
    ["eval", "--policy", "random", "--env", "CartPole-v1"],
    ["data", "collect", "--env", "CartPole-v1", "--dataset-id", "t/x-v0"],
    ["train", "sft", "--dataset", "{tmp}", "--model", "{tmp}", "--out", "{tmp}/r"],
])
def test_a_negative_seed_is_refused_by_the_cli(cli, tmp_path, args):
    result = cli(*[a.format(tmp=tmp_path) for a in args], "--seed", "-1")
    assert result.exit_code == 2 and "Traceback" not in result.output
    text = " ".join(result.output.split())
    # the wording of the range is click's: typer's vendored click and click 8.2+ say it differently
    assert "--seed" in text and ("greater than or equal to 0" in text or "not in the range x>=0" in text
                                 or "not in the range 0<=x<=" in text)


def test_a_failed_swap_puts_the_old_folder_back(tmp_path, monkeypatch):
    """Replacing a folder is two renames (old aside, new in); if the second fails, the old folder goes back to
    ``--out`` and nothing else is left."""
    import os

    from rlft.core import io
    from rlft.core.manifest import write_manifest

    out = tmp_path / "ds"
    out.mkdir()
    (out / "old.txt").write_text("old")
    (out / "rlft_info.json").write_text("{}")
    write_manifest(out)  # an output rlft wrote: --overwrite may replace it
    real_replace = os.replace

    def replace(src, dst):
        if Path(src).name.startswith(".ds.tmp-"):
            raise OSError(errno.EACCES, "Permission denied", str(dst))
        real_replace(src, dst)

    monkeypatch.setattr(io.os, "replace", replace)
    with pytest.raises(OSError, match="permission denied"), io.atomic_output_dir(out, overwrite=True) as tmp:
        (tmp / "new.txt").write_text("new")
    assert sorted(p.name for p in out.iterdir()) == [".rlft_manifest.json", "old.txt", "rlft_info.json"]
    assert [p.name for p in tmp_path.iterdir()] == ["ds"], "temporary folders were left behind"


@pytest.mark.parametrize("command", ["model init", "train sft"])
def test_a_full_disk_while_saving_a_model_is_one_line_and_keeps_nothing(cli, tmp_path, lake, monkeypatch, command):
    """A full disk while the weights are saved is exit code 1 and one line; model init leaves nothing (its folder
    is written atomically), a training run says it failed and why in its rlft_run.json (status was "running";
    its checkpoints, if any, stay for --resume), and no temporary folder is left."""
    import transformers

    data, model = lake

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(args[0] if args else "weights"))

    monkeypatch.setattr(transformers.PreTrainedModel, "save_pretrained", full)
    out = tmp_path / "out"
    if command == "model init":
        result = cli("model", "init", "--dataset", data, "--out", out)
    else:
        result = cli("train", "sft", "--dataset", data, "--model", model, "--out", out, "--max-steps", "1",
                     "--eval-split", "none", "--save-steps", "100")
    assert leftovers(tmp_path) == []
    if command == "model init":
        one_line_error(result, "the disk is full", before_work=False, code=1)
        assert not out.exists()
    else:  # the trainer's progress bars and logs come before it
        text = " ".join(result.output.split())
        assert result.exit_code == 1 and "Traceback" not in result.output and text.count("Error: ") == 1
        said = (f"cannot write --out {out}: the disk is full (rlft_run.json there says failed; free the space, "
                "then --resume from its last checkpoint or --overwrite)")
        assert said in text
        info = json.loads((out / "rlft_run.json").read_text())
        assert info["status"] == "failed" and "the disk is full" in info["error"]
        assert not list(out.glob("*.safetensors"))


@pytest.mark.parametrize(("key", "value"), [("success_rate", 7.0), ("episodes", -5), ("return_mean", "lots"),
                                            ("return_std", "Infinity"), ("return_mean", True)])
def test_a_report_edited_past_what_an_evaluation_writes_is_refused(cli, tmp_path, key, value):
    """eval compare showed them as they were (hostile pass 12, U3)."""
    report = {"rlft_report_version": 1, "env_id": "CartPole-v1", "policy": "random", "episodes": 3,
              "return_mean": 20.0, "return_std": 2.0, "success_rate": None}
    report[key] = float("inf") if value == "Infinity" else value  # json writes it as Infinity
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report))
    one_line_error(cli("eval", "compare", path), f"{key} is", "which no rlft evaluation writes")


def test_a_number_in_a_file_is_an_int_or_a_float_and_never_a_bool():
    """The one test every reader of reports, records and settings applies (it was written four times)."""
    from rlft.core.reading import is_number

    assert [is_number(v) for v in (0, -3, 2.5, float("nan"), True, False, "1", None, [1])] == [
        True, True, True, True, False, False, False, False, False]
    assert [is_number(v, finite=True) for v in (1.0, float("nan"), float("inf"), -float("inf"), 7)] == [
        True, False, False, False, True]
