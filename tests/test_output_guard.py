"""An --out that is, contains or lies inside a command's own input is refused before anything is read or written,
so --overwrite can never delete what the command reads (issue #28)."""

from __future__ import annotations

import shutil

import pytest

from rlft.core.errors import InvalidInputError
from rlft.core.io import check_output_dir, refuse_overlap
from rlft.core.output_file import check_output_file


def _tree(root):
    (root / "data").mkdir(parents=True)
    (root / "data" / "train-00000.parquet").write_bytes(b"x")
    return root


@pytest.mark.parametrize(("out", "relation"), [("ds", "is"), (".", "contains"), ("ds/runs/a", "lies inside")])
def test_overlap_names_the_relation_and_the_input(tmp_path, monkeypatch, out, relation):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path / "ds")
    with pytest.raises(InvalidInputError, match=f"--out {out} {relation} the input --dataset ds"):
        check_output_dir(out, overwrite=True, inputs=[("--dataset", "ds")])
    assert (tmp_path / "ds" / "data" / "train-00000.parquet").read_bytes() == b"x"


def test_unrelated_paths_hub_ids_and_symlinks(tmp_path):
    ds = _tree(tmp_path / "ds")
    refuse_overlap(tmp_path / "out", [("--dataset", ds), ("--model", "HuggingFaceTB/SmolLM2-135M"), ("x", None)])
    refuse_overlap(tmp_path / "ds2", [("--dataset", ds)])  # a shared name prefix is no overlap
    (tmp_path / "link").symlink_to(ds)
    with pytest.raises(InvalidInputError, match="is the input"):
        refuse_overlap(tmp_path / "link", [("--dataset", ds)])
    with pytest.raises(InvalidInputError, match="lies inside the input --policy"):
        check_output_file(ds / "report.json", overwrite=True, inputs=[("--policy", ds)])


def test_commands_refuse_their_input_as_out(cli, tmp_path, tmp_path_factory):
    import shutil

    from eval_factories import frozenlake_dataset

    ds = tmp_path / "fl4"
    shutil.copytree(frozenlake_dataset(tmp_path_factory), ds)
    before = sorted(p.relative_to(ds) for p in ds.rglob("*"))
    for args in (["model", "init", "--dataset", str(ds), "--out", str(ds), "--overwrite"],
                 ["train", "sft", "--dataset", str(ds), "--model", str(ds), "--out", str(ds), "--overwrite"],
                 ["train", "bc", "--dataset", str(ds), "--out", str(ds / "bc.pt"), "--overwrite"]):
        result = cli(*args)
        assert result.exit_code != 0 and "the input --dataset" in result.output, (args, result.output)
    assert sorted(p.relative_to(ds) for p in ds.rglob("*")) == before


def test_serialize_refuses_to_write_over_its_minari_source(cli, tmp_path):
    from factories import make_minari_dataset
    from rlft.sources.minari_source import datasets_root

    make_minari_dataset("cartpole/random-v0", env_id="CartPole-v1", episodes=2)
    source = datasets_root() / "cartpole/random-v0"
    before = sorted(p.relative_to(source) for p in source.rglob("*"))
    for out in (source, source / "data", source.parent):
        result = cli("data", "serialize", "cartpole/random-v0", "--out", str(out), "--overwrite")
        assert result.exit_code != 0 and "the input Minari dataset" in result.output, result.output
    assert sorted(p.relative_to(source) for p in source.rglob("*")) == before


def test_a_second_writer_is_refused_and_a_stale_lock_is_taken_over(cli, tmp_path):
    import subprocess
    import sys

    from rlft.core import claims

    out = tmp_path / "ds"
    lock = claims._lock_path(out.absolute())
    assert lock.parent == tmp_path  # beside the output, whatever TMPDIR says
    program = tmp_path / "rlft"  # a live process of a program named rlft, other than this one, holds it
    program.write_text("import sys\nsys.stdin.read()\n")
    holder = subprocess.Popen([sys.executable, str(program)], stdin=subprocess.PIPE)  # noqa: S603
    try:
        lock.write_text(f"{holder.pid}\n")
        result = cli("data", "export-q", "frozenlake", "--episodes", "5", "--out", out)
        assert result.exit_code != 0 and f"being written by another rlft process (pid {holder.pid})" in result.output
        assert not out.exists()
    finally:
        holder.communicate(b"")
    other = subprocess.Popen(["cat"], stdin=subprocess.PIPE)  # noqa: S603, S607 - alive, but not rlft
    try:
        lock.write_text(f"{other.pid}\n")  # the pid was reused by another program: the lock is stale
        result = cli("data", "export-q", "frozenlake", "--episodes", "5", "--out", out, "--overwrite")
        assert result.exit_code == 0, result.output
    finally:
        other.communicate(b"")
    gone = subprocess.Popen(["true"])  # noqa: S603, S607 - a process that has exited and been reaped
    gone.wait()
    lock.write_text(f"{gone.pid}\n")
    result = cli("data", "export-q", "frozenlake", "--episodes", "5", "--out", out, "--overwrite")
    assert result.exit_code == 0, result.output
    assert not lock.exists()  # released when the command ended


def _fingerprint(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_inputs_reached_through_other_inputs_are_guarded_too(cli, tmp_path, tmp_path_factory):
    """What a hostile user found (#28 audit): a LoRA run's base model, a --config file's folder, an expert's metadata
    beside its .zip and a --map file were not counted as inputs, and --overwrite replaced them."""
    import shutil

    from eval_factories import frozenlake_dataset, sft_run, small_ppo, tiny_model

    lake = frozenlake_dataset(tmp_path_factory)
    base = tmp_path / "tiny"
    shutil.copytree(tiny_model(tmp_path_factory, lake, "guard-lineage"), base)
    lora = sft_run(tmp_path_factory, lake, base, "guard-lora", steps=2, lora=True)
    expert = tmp_path / "expert.zip"
    shutil.copy(small_ppo(tmp_path_factory), expert)
    shutil.copy(small_ppo(tmp_path_factory).with_suffix(".json"), expert.with_suffix(".json"))
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "sft.yaml").write_text("max_steps: 2\n")
    (tmp_path / "maps").mkdir()
    (tmp_path / "maps" / "lake.txt").write_text("SFFF\nFHFH\nFFFH\nHFFG\n")
    before = _fingerprint(tmp_path)
    cases = [
        (["model", "merge", lora, "--out", base, "--overwrite"], "the input run's base model"),
        (["train", "sft", "--dataset", lake, "--model", lora, "--out", base, "--lora", "--overwrite"],
         "the input --model's base model"),
        (["train", "sft", "--config", tmp_path / "cfg" / "sft.yaml", "--dataset", lake, "--model", base, "--out",
          tmp_path / "cfg", "--overwrite"], "contains the input --config"),
        (["eval", "--policy", "random", "--env", "CartPole-v1", "--expert", expert, "--episodes", "1", "--out",
          expert.with_suffix(".json"), "--overwrite"], "the input --expert's metadata"),
        (["data", "export-q", "frozenlake", "--map", tmp_path / "maps" / "lake.txt", "--out", tmp_path / "maps",
          "--overwrite", "--episodes", "2"], "contains the input --map"),
        (["data", "export-q", "frozenlake", "--map", tmp_path / "maps" / "lake.txt", "--csv",
          tmp_path / "maps" / "lake.txt", "--out", tmp_path / "fl", "--overwrite", "--episodes", "2"],
         "is the input --map"),
        (["data", "export-q", "frozenlake", "--out", tmp_path / "new", "--csv", tmp_path / "new" / "q.csv",
          "--episodes", "2"], "lies inside --out"),
        # a LoRA run's base model, where eval wrote its report, plot, logs and videos (hostile pass 12, B7)
        (["eval", "--policy", f"llm:{lora}", "--episodes", "1", "--out", base / "r.json"],
         "lies inside the input --policy's base model"),
        (["eval", "--policy", f"llm:{lora}", "--episodes", "1", "--video", base / "vid"],
         "lies inside the input --policy's base model"),
    ]
    for args, message in cases:
        result = cli(*args)
        assert result.exit_code == 2 and message in " ".join(result.output.split()), (args, result.output)
    assert _fingerprint(tmp_path) == before
    assert not (tmp_path / "new").exists() and not (tmp_path / "fl").exists()


@pytest.mark.parametrize("out", [".", "..", "HOME", "", "mine"])
def test_overwrite_replaces_only_what_rlft_wrote(cli, tmp_path, monkeypatch, out):
    """--overwrite never replaces the current folder, a parent of it, the home folder, or a folder of the user's
    files (no rlft marker); every command that replaces folders says so in one line and touches nothing."""
    from factories import make_minari_dataset

    home = tmp_path / "home"
    (home / "work" / "mine").mkdir(parents=True)
    (home / "work" / "mine" / "thesis.tex").write_text("years of work")
    (home / "work" / "notes.txt").write_text("keep")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(home / "work")
    make_minari_dataset("cartpole/guard-v0", episodes=2)
    out = str(home) if out == "HOME" else out
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    for args in (["data", "serialize", "cartpole/guard-v0"], ["data", "export-q", "frozenlake", "--episodes", "10"]):
        result = cli(*args, "--out", out, "--overwrite")
        assert result.exit_code == 2, (args, result.output)
        text = " ".join(result.output.split())
        assert ("rlft never replaces it" in text) or ("holds files rlft did not write" in text), text
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before
    assert (home / "work" / "mine" / "thesis.tex").read_text() == "years of work"


def test_replacing_a_foreign_folder_takes_an_explicit_setting(cli, tmp_path, monkeypatch):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "draft.txt").write_text("x")
    result = cli("data", "export-q", "frozenlake", "--episodes", "10", "--out", out, "--overwrite")
    assert result.exit_code == 2 and "RLFT_REPLACE_FOREIGN=1" in result.output
    monkeypatch.setenv("RLFT_REPLACE_FOREIGN", "1")
    result = cli("data", "export-q", "frozenlake", "--episodes", "10", "--out", out, "--overwrite")
    assert result.exit_code == 0 and not (out / "draft.txt").exists()


def test_overwrite_replaces_a_folder_only_when_rlft_wrote_every_file_in_it(cli, tmp_path):
    """Each finished output lists its files (.rlft_manifest.json, written last); a file a user added at any depth
    is named and keeps the whole folder; a user's folder holding a copied rlft_codec.json is not rlft's."""
    import json

    from rlft.core.manifest import MANIFEST

    out = tmp_path / "fl"
    args = ("data", "export-q", "frozenlake", "--episodes", "10", "--out", out)
    assert cli(*args).exit_code == 0
    listed = json.loads((out / MANIFEST).read_text())["files"]
    assert "rlft_codec.json" in listed and any(f.startswith("data/") for f in listed) and MANIFEST not in listed
    assert cli(*args, "--overwrite").exit_code == 0  # rlft's own output: replaced
    (out / "data" / "my-notes.txt").write_text("mine")
    before = _fingerprint(tmp_path)
    result = cli(*args, "--overwrite")
    assert result.exit_code == 2 and "data/my-notes.txt" in result.output
    assert _fingerprint(tmp_path) == before
    (out / "data" / "my-notes.txt").unlink()
    (out / "odd\nname\x1b[31m").write_text("mine")
    result = cli(*args, "--overwrite")
    assert result.exit_code == 2 and "'odd\\nname\\x1b[31m'" in result.output and "\x1b" not in result.output
    (out / "odd\nname\x1b[31m").unlink()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    (mine / "rlft_codec.json").write_bytes((out / "rlft_codec.json").read_bytes())
    result = cli("data", "export-q", "frozenlake", "--episodes", "10", "--out", mine, "--overwrite")
    assert result.exit_code == 2 and "no record of the files rlft wrote" in " ".join(result.output.split())
    assert (mine / "thesis.tex").read_text() == "years of work"


def test_overwrite_keeps_a_file_rlft_wrote_that_the_user_edited_since(cli, tmp_path, monkeypatch):
    """The manifest stamps each file (size, SHA-256): a card edited before a push is named and the folder kept;
    the explicit override still replaces it."""
    import json

    from rlft.core.manifest import MANIFEST

    out = tmp_path / "fl"
    args = ("data", "export-q", "frozenlake", "--episodes", "1", "--out", out)
    assert cli(*args).exit_code == 0
    assert set(json.loads((out / MANIFEST).read_text())["stamps"]) >= {"README.md", "rlft_codec.json"}
    with open(out / "README.md", "a") as fh:
        fh.write("MY PRECIOUS NOTES\n")
    before = _fingerprint(tmp_path)
    result = cli(*args, "--overwrite")
    assert result.exit_code == 2 and "no longer, what rlft wrote" in " ".join(result.output.split())
    assert "README.md" in result.output and _fingerprint(tmp_path) == before
    monkeypatch.setenv("RLFT_REPLACE_FOREIGN", "1")
    assert cli(*args, "--overwrite").exit_code == 0
    assert "MY PRECIOUS NOTES" not in (out / "README.md").read_text()


def test_an_unfinished_run_is_replaced_only_when_it_holds_its_trainers_files(tmp_path):
    import json

    from rlft.core.errors import OutputExistsError
    from rlft.core.io import refuse_foreign

    run = tmp_path / "run"
    (run / "checkpoints" / "checkpoint-5").mkdir(parents=True)
    (run / "logs" / "x").mkdir(parents=True)
    (run / "rlft_run.json").write_text(json.dumps({"status": "failed"}))
    (run / "checkpoints" / "checkpoint-5" / "model.safetensors").write_bytes(b"w")
    (run / "logs" / "x" / "events.out.tfevents.1.host").write_bytes(b"e")
    refuse_foreign(run)  # a failed run's own files: replaceable
    (run / "checkpoints" / "results.csv").write_text("mine")
    with pytest.raises(OutputExistsError, match="checkpoints/results.csv"):
        refuse_foreign(run)
    (run / "checkpoints" / "results.csv").unlink()
    (run / "rlft_run.json").write_text(json.dumps({"status": "complete"}))  # complete, no manifest: not vouched for
    with pytest.raises(OutputExistsError, match="no record"):
        refuse_foreign(run)


def test_home_folders_and_top_level_folders_are_never_replaced_whatever_home_says(tmp_path, monkeypatch):
    import os
    import pwd
    from pathlib import Path

    from rlft.core.errors import OutputExistsError
    from rlft.core.io import refuse_foreign
    from rlft.core.manifest import never_replaced

    monkeypatch.setenv("HOME", str(tmp_path))  # the override that once let a test replace /root
    monkeypatch.setenv("RLFT_REPLACE_FOREIGN", "1")
    real_home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    for path in (real_home, real_home.parent, Path("/tmp"), Path("/")):
        with pytest.raises(OutputExistsError, match="rlft never replaces it"):
            refuse_foreign(path)
    deep_home = tmp_path / "accounts" / "ada"
    monkeypatch.setattr(pwd, "getpwall", lambda: [pwd.struct_passwd(("ada", "x", 1, 1, "", str(deep_home), "/bin/sh"))])
    assert never_replaced(deep_home) == "a home folder"
    assert never_replaced(deep_home.parent) == "a parent of a home folder"
    assert never_replaced(deep_home / "runs") is None


def test_an_unfinished_run_with_a_users_notes_or_weights_is_not_replaced(tmp_path):
    """Only the names a trainer writes count as a run's: a user's README, results or weights beside a failed run
    keep it (the model card TRL writes is told apart by its front matter)."""
    import json

    from rlft.core.errors import OutputExistsError
    from rlft.core.io import refuse_foreign

    run = tmp_path / "uf"
    run.mkdir()
    (run / "rlft_run.json").write_text(json.dumps({"status": "failed"}))
    # summary.json too: written once a run completes, with the manifest that stamps it; in a run that never completed
    # it is an edited copy (hostile pass 13, U2: replaced)
    for name, text in (("README.md", "my notes"), ("results_2024.json", "{}"), ("my_weights.pt", "w"),
                       ("summary.json", '{"my_notes": "USER NOTE"}')):
        (run / name).write_text(text)
        with pytest.raises(OutputExistsError, match=name.replace(".", r"\.")):
            refuse_foreign(run)
        (run / name).unlink()
    (run / "README.md").write_text("---\nlibrary_name: transformers\ntags:\n- trl\n---\n# model card\n")
    refuse_foreign(run)


def test_eval_never_replaces_a_users_folder_or_plot_beside_its_report(cli, tmp_path):
    import json

    u = tmp_path / "u"
    (u / "thesis_tb" / "ch1").mkdir(parents=True)
    (u / "thesis_tb" / "ch1" / "draft.tex").write_text("d")
    (u / "thesis.png").write_bytes(b"my figure")
    args = ("eval", "--policy", "random", "--env", "CartPole-v1", "--episodes", "1", "--quiet", "--out",
            u / "thesis.json")
    result = cli(*args)
    assert result.exit_code == 2 and "thesis_tb" in result.output and "already exists" in result.output
    result = cli(*args, "--overwrite")
    assert result.exit_code == 2 and "ch1/draft.tex" in " ".join(result.output.split())
    shutil.move(u / "thesis_tb", tmp_path / "kept")
    result = cli(*args, "--overwrite")  # a file that is not a PNG: not a plot an earlier report wrote
    assert result.exit_code == 2 and "is not a PNG plot" in " ".join(result.output.split())
    assert (tmp_path / "kept" / "ch1" / "draft.tex").read_text() == "d"
    assert (u / "thesis.png").read_bytes() == b"my figure" and not (u / "thesis.json").exists()
    out = tmp_path / "r" / "report.json"
    assert cli(*args[:-1], out).exit_code == 0
    assert cli(*args[:-1], out, "--overwrite").exit_code == 0  # its own plot and event files: replaced
    assert json.loads(out.read_text())["episodes"] == 1


def test_a_killed_replacement_is_finished_not_reverted(tmp_path, monkeypatch):
    """atomic_output_dir's old content waits aside only while the new folder is renamed in: a kill after that
    leaves the new folder, whose leftover aside the next command deletes; a kill between the renames (nothing at
    --out) puts the old one back."""
    from rlft.core.io import REPLACED, check_output_dir
    from rlft.core.manifest import write_manifest

    out = tmp_path / "ds"
    out.mkdir()
    (out / "new.txt").write_text("new")
    write_manifest(out)
    aside = tmp_path / f".ds{REPLACED}x"
    (aside / "content").mkdir(parents=True)
    (aside / "content" / "old.txt").write_text("old, half deleted")
    check_output_dir(out, overwrite=True)
    assert (out / "new.txt").read_text() == "new" and not aside.exists()
    gone = tmp_path / "gone"
    (tmp_path / f".gone{REPLACED}y" / "content").mkdir(parents=True)
    (tmp_path / f".gone{REPLACED}y" / "content" / "old.txt").write_text("old")
    write_manifest(tmp_path / f".gone{REPLACED}y" / "content")
    check_output_dir(gone, overwrite=True)
    assert (gone / "old.txt").read_text() == "old"


def test_a_quoted_tilde_is_judged_as_the_folder_it_names(cli, tmp_path, monkeypatch):
    """``--out '~/x'`` (the shell did not expand it) writes ./~/x: that folder, not $HOME/x, is what --overwrite
    must judge."""
    home = tmp_path / "home"
    (home / "x").mkdir(parents=True)
    work = tmp_path / "work"
    (work / "~" / "x").mkdir(parents=True)
    (work / "~" / "x" / "thesis.txt").write_text("t")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    assert cli("data", "export-q", "frozenlake", "--episodes", "5", "--out", home / "x", "--overwrite",
               ).exit_code in (0, 2)
    result = cli("data", "export-q", "frozenlake", "--episodes", "5", "--out", "~/x", "--overwrite")
    assert result.exit_code == 2 and (work / "~" / "x" / "thesis.txt").read_text() == "t"


def test_hostile_sizes_and_nesting_are_one_line(cli, tmp_path):
    """Sizes a user passes are bounded before work, and a file nested past Python's recursion limit is one line."""
    deep = tmp_path / "deep"
    deep.mkdir()
    (deep / "rlft_codec.json").write_text("[" * 100_000)
    cases = [
        (["eval", "--policy", "random", "--codec", deep, "--episodes", "1"], "nested too deeply"),
        (["eval", "--policy", "random", "--env", "CartPole-v1", "--seed", str(2**40)], "2147483647"),
        (["eval", "--policy", "random", "--env", "CartPole-v1", "--episodes", str(10**13)], "1000000"),
        (["data", "export-q", "frozenlake", "--map", "random100000x100000", "--out", tmp_path / "m"], "50x50"),
        (["model", "init", "--dataset", deep, "--out", tmp_path / "x", "--seed", str(10**23)], "2147483647"),
    ]
    for args, message in cases:
        result = cli(*args)
        assert result.exit_code == 2 and message in " ".join(result.output.split()), (args, result.output)
    # breadth, not depth (hostile pass 12, B2): five files each running the next 20 times would make 3.2 million
    # steps; the check walked them at full CPU, saying nothing, until killed
    for level in range(5):
        step = (f'command: "pipeline run {tmp_path}/p{level + 1}.yaml --out {{out}}/n"' if level < 4
                else 'command: "data export-q frozenlake --episodes 2 --out {out}/fl"')
        (tmp_path / f"p{level}.yaml").write_text(f"name: p{level}\nsteps:\n" + f"  - {step}\n" * 20)
    result = cli("pipeline", "run", tmp_path / "p0.yaml", "--out", tmp_path / "nested")
    assert result.exit_code == 2 and "make more than 10,000 steps" in result.output, result.output
    assert not (tmp_path / "nested").exists()
    out = tmp_path / "DS[" / "[/bad]"
    result = cli("data", "export-q", "frozenlake", "--episodes", "2", "--out", out)
    assert result.exit_code == 0 and "[/bad]" in result.output


def test_a_refused_command_leaves_no_folders_behind(cli, tmp_path):
    (tmp_path / "existing.csv").write_text("x")
    result = cli("data", "export-q", "frozenlake", "--episodes", "2", "--out", tmp_path / "nd" / "a" / "b",
                 "--csv", tmp_path / "existing.csv")
    assert result.exit_code == 2 and not (tmp_path / "nd").exists()
    assert cli("data", "export-q", "frozenlake", "--episodes", "2", "--out", tmp_path / "nd" / "a" / "b").exit_code == 0
    assert (tmp_path / "nd" / "a" / "b" / "rlft_codec.json").is_file()


def test_an_out_name_that_is_not_utf8_is_one_line_and_writes_nothing(cli, tmp_path, tmp_path_factory):
    """bash passes such a name through as bytes; Arrow, safetensors and the JSON writers cannot name the file and
    failed half-way (eval left its plot behind). Hostile pass 11, B6."""
    from eval_factories import frozenlake_dataset
    from factories import make_minari_dataset, one_line

    lake = frozenlake_dataset(tmp_path_factory)
    make_minari_dataset("cartpole/utf-v0", env_id="CartPole-v1", episodes=2)
    folder = tmp_path / "ok"
    folder.mkdir()
    bad = str(folder) + "/o\udcfe"  # the byte 0xfe, as Python names what it cannot decode
    for args in (["data", "export-q", "frozenlake", "--episodes", "2", "--out", bad],
                 ["model", "init", "--dataset", str(lake), "--out", bad],
                 ["data", "serialize", "cartpole/utf-v0", "--out", bad],
                 ["eval", "--policy", "random", "--env", "CartPole-v1", "--episodes", "1", "--out", bad + ".json"],
                 ["train", "sft", "--dataset", str(lake), "--model", str(lake), "--out", bad]):
        result = cli(*args)
        one_line(result, 2, "is not valid UTF-8", "o\\xfe", max_lines=3)
        assert list(folder.iterdir()) == [], (args, list(folder.iterdir()))


def test_an_out_that_is_a_link_to_nothing_is_one_line_for_every_kind_of_output(cli, tmp_path, tmp_path_factory):
    """Training wrote through it and failed in a traceback; model init and bc gave a false reason (hostile pass
    12, B6 and U5). The link stays as it was."""
    from eval_factories import frozenlake_dataset
    from factories import one_line

    lake = frozenlake_dataset(tmp_path_factory)
    link = tmp_path / "lk"
    link.symlink_to(tmp_path / "nothere")
    for args in (["train", "sft", "--dataset", lake, "--model", lake, "--out", link],
                 ["train", "grpo", "--dataset", lake, "--model", lake, "--out", link],
                 ["model", "init", "--dataset", lake, "--out", link, "--overwrite"],
                 ["train", "bc", "--dataset", lake, "--out", link, "--overwrite"],
                 ["data", "export-q", "frozenlake", "--episodes", "2", "--out", link, "--overwrite"]):
        one_line(cli(*args), 2, f"--out {link} is a symbolic link to {tmp_path / 'nothere'}, which does not exist")
        assert link.is_symlink() and not (tmp_path / "nothere").exists()


def test_a_resumed_run_that_stopped_keeps_an_edited_summary_of_its_earlier_completion(tmp_path):
    """A completed run (manifest stamped) resumed and stopped: its trainer's files changed, which is its own doing
    and replaceable; its summary.json, which only a completion writes, edited since is the user's (pass 13, U2)."""
    import json

    from rlft.core.errors import OutputExistsError
    from rlft.core.io import refuse_foreign
    from rlft.core.manifest import write_manifest

    run = tmp_path / "run"
    (run / "checkpoints" / "checkpoint-5").mkdir(parents=True)
    (run / "rlft_run.json").write_text(json.dumps({"status": "complete"}))
    (run / "summary.json").write_text('{"loss": 1.0}')
    (run / "model.safetensors").write_bytes(b"w")
    write_manifest(run)
    (run / "rlft_run.json").write_text(json.dumps({"status": "running"}))  # resumed, then stopped
    (run / "checkpoints" / "checkpoint-9").mkdir()
    (run / "checkpoints" / "checkpoint-9" / "optimizer.pt").write_bytes(b"o")
    refuse_foreign(run)
    (run / "summary.json").write_text('{"loss": 1.0, "my_notes": "USER NOTE"}')
    with pytest.raises(OutputExistsError, match="summary.json"):
        refuse_foreign(run)
