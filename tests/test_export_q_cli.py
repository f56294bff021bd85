"""`rlft data export-q frozenlake`: the dataset folder, its card and codec, and the CLI's errors."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from factories import SMALL_5x3, write_map
from rlft.codecs import load_codec


def _header(card_text: str) -> dict:
    assert card_text.startswith("---\n")
    return yaml.safe_load(card_text.split("---\n")[1])


def test_export_writes_hub_layout_that_loads(cli, tmp_path):
    import datasets

    out, csv = tmp_path / "fl4", tmp_path / "fl4.csv"
    result = cli("data", "export-q", "frozenlake", "--out", out, "--csv", csv, "--episodes", "200")
    assert result.exit_code == 0, result.output
    assert "0.542026" in result.output
    assert sorted(p.name for p in out.iterdir()) == [".rlft_manifest.json", "README.md", "data", "rlft_codec.json",
                                                     "rlft_info.json"]

    ds = datasets.load_dataset(str(out), cache_dir=str(out) + "-hf-cache")
    train = ds["train"]
    assert len(train) == 11  # 16 cells - 4 holes - 1 goal
    row = train.filter(lambda r: r["state"] == 0)[0]
    assert row["q_value_left"] == pytest.approx(0.542026, abs=1e-6)
    assert row["v"] == pytest.approx(max(row["q_values"]))
    assert row["action"] in row["optimal_actions"]
    tied = train.filter(lambda r: r["state"] == 6)[0]
    assert tied["optimal_actions"] == [0, 2]

    header = _header((out / "README.md").read_text())
    assert header["configs"][0]["data_files"][0] == {"split": "train", "path": "data/train-*.parquet"}
    assert header["license"] and "reinforcement-learning" in header["task_categories"]
    card = (out / "README.md").read_text()
    for needle in ("V*(start)", "0.542026", "Columns", "q_value_left", "optimal success rate (measured)"):
        assert needle in card

    codec = load_codec(out)
    for r in train:
        assert codec.decode_action(r["completion"]) == r["action"]
        assert codec.encode_observation(r["state"]).startswith(r["state_str"] + "\nYou are at row")

    frame = pd.read_csv(csv)
    assert {"state_str", "action", "q_value_left", "q_value_down", "q_value_right", "q_value_up"} <= set(frame)
    assert frame.loc[frame.state == 0, "state_str"].item() == "S F F F|F H F H|F F F H|H F F G"


def test_8x8_and_custom_map_and_plain_prompts(cli, tmp_path):
    import datasets

    out8 = tmp_path / "fl8"
    assert cli("data", "export-q", "frozenlake", "--map", "8x8", "--out", out8, "--episodes", "50").exit_code == 0
    assert len(datasets.load_dataset(str(out8), cache_dir=str(out8) + "-hf-cache")["train"]) == 64 - 10 - 1

    custom = tmp_path / "custom"
    map_file = write_map(tmp_path, SMALL_5x3)
    result = cli("data", "export-q", "frozenlake", "--map", map_file, "--no-slippery", "--gamma", "0.9",
                 "--prompt-style", "plain", "--out", custom, "--episodes", "20")
    assert result.exit_code == 0, result.output
    train = datasets.load_dataset(str(custom), cache_dir=str(custom) + "-hf-cache")["train"]
    assert len(train) == 15 - 2 - 1
    assert isinstance(train[0]["prompt"], str) and train[0]["completion"].startswith("<answer>")
    info = json.loads((custom / "rlft_info.json").read_text())
    # deterministic map: the greedy policy always reaches the goal, measured and exact
    assert info["success_rate"] == 1.0 and info["exact_success"] == pytest.approx(1.0)
    assert info["success_stderr"] == 0.0


@pytest.mark.parametrize(
    "args,message",
    [
        (["--map", "5x5"], "unknown map"),
        (["--gamma", "0"], "gamma"),
        (["--gamma", "1.5"], "gamma"),
        (["--prompt-style", "xml"], "prompt-style"),
        (["--wording", "terse"], "--wording must be one of gemma, compact"),
        (["--completions", "some"], "--completions must be one of optimal, all"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(cli, tmp_path, args, message):
    out = tmp_path / "out"
    result = cli("data", "export-q", "frozenlake", "--out", out, *args)
    assert result.exit_code == 2
    assert message in result.output
    assert not out.exists()


def test_compact_wording_and_all_completions(cli, tmp_path):
    import json

    import pyarrow.parquet as pq

    from rlft.codecs.base import load_codec

    out = tmp_path / "all"
    result = cli("data", "export-q", "frozenlake", "--out", out, "--episodes", "20", "--wording", "compact",
                 "--completions", "all")
    assert result.exit_code == 0, result.output
    rows = pq.read_table(next((out / "data").glob("*.parquet"))).to_pylist()
    assert len(rows) == 44  # 11 decision states x 4 actions
    by_state = {}
    for row in rows:
        by_state.setdefault(row["state"], []).append(row)
    assert len(by_state) == 11
    for state_rows in by_state.values():  # every action once, all with the state's true optimal set
        assert sorted(r["action"] for r in state_rows) == [0, 1, 2, 3]
        assert {tuple(r["optimal_actions"]) for r in state_rows} == {tuple(state_rows[0]["optimal_actions"])}
        assert [r["completion"][-1]["content"] for r in state_rows] == [
            f"<answer>{name}</answer>" for name in ("LEFT", "DOWN", "RIGHT", "UP")]
    codec = load_codec(out)
    system, user = rows[0]["prompt"]
    assert system["content"] == codec.template.system and "slippery" in system["content"]
    assert user["content"] == "S F F F\nF H F H\nF F F H\nH F F G\nYou are at row 0, column 0."
    assert codec.build_prompt(0) == rows[0]["prompt"]  # evaluation builds the same prompt from the saved codec
    info = json.loads((out / "rlft_info.json").read_text())
    assert (info["wording"], info["completions"], info["n_rows"], info["n_states"], info["n_tied"]) == (
        "compact", "all", 44, 11, 1)
    assert "one row per\nnon-terminal state and action" in (out / "README.md").read_text()


def test_bad_map_file_exits_2(cli, tmp_path):
    out = tmp_path / "out"
    result = cli("data", "export-q", "frozenlake", "--map", write_map(tmp_path, ["SFQ", "FFG"]), "--out", out)
    assert result.exit_code == 2 and "outside S/F/H/G" in result.output
    assert not out.exists()


def test_unknown_env_exits_2(cli, tmp_path):
    result = cli("data", "export-q", "cartpole", "--out", tmp_path / "o")
    assert result.exit_code == 2 and "frozenlake" in result.output


def test_existing_output_is_refused_then_replaced_with_overwrite(cli, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("precious")
    result = cli("data", "export-q", "frozenlake", "--out", out, "--episodes", "10")
    assert result.exit_code == 2 and "--overwrite" in result.output
    assert (out / "keep.txt").read_text() == "precious"

    result = cli("data", "export-q", "frozenlake", "--out", out, "--episodes", "10", "--overwrite")
    assert result.exit_code == 2 and "holds files rlft did not write (keep.txt)" in result.output
    assert (out / "keep.txt").read_text() == "precious"  # a folder rlft did not write is never replaced
    result = cli("data", "export-q", "frozenlake", "--out", tmp_path / "new", "--episodes", "10")
    assert result.exit_code == 0
    result = cli("data", "export-q", "frozenlake", "--out", tmp_path / "new", "--episodes", "10", "--overwrite")
    assert result.exit_code == 0  # its own output is replaced
    assert (tmp_path / "new" / "README.md").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp folders left behind


def test_failure_while_writing_keeps_the_old_folder(tmp_path, monkeypatch):
    from rlft.datasets import folder
    from rlft.datasets.frozenlake_q.export import ExportQConfig, export_frozenlake_q

    out = tmp_path / "out"
    export_frozenlake_q(ExportQConfig(out=out, episodes=10))
    before = (out / "README.md").read_text()

    def broken(self, spec):
        raise RuntimeError("disk full")

    monkeypatch.setattr(folder.DatasetFolderWriter, "write_card", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        export_frozenlake_q(ExportQConfig(out=out, episodes=10, gamma=0.5, overwrite=True))
    assert (out / "README.md").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_think_completions_give_a_true_reason_from_the_q_values(cli, tmp_path):
    import re

    import pyarrow.parquet as pq

    from rlft.codecs import load_codec
    from rlft.envs.frozenlake import ACTION_NAMES

    out = tmp_path / "q"
    assert cli("data", "export-q", "frozenlake", "--out", out, "--think", "--completions", "all",
               "--episodes", "10").exit_code == 0
    rows = pq.read_table(next((out / "data").glob("train-*.parquet"))).to_pylist()
    codec = load_codec(out)
    pattern = re.compile(r"<think>At row (\d), column (\d) the expected returns are (.*?); the highest is (.*?)\."
                         r"(?: This answer is (\w+), not the best\.)?</think><answer>(\w+)</answer>")
    for row in rows:
        text = row["completion"][-1]["content"]
        match = pattern.fullmatch(text)
        assert match, text
        r, c, values, best, not_best, answer = match.groups()
        assert (int(r), int(c)) == (row["row"], row["col"]) and answer == ACTION_NAMES[row["action"]]
        q = [row[f"q_value_{name.lower()}"] for name in ACTION_NAMES]
        assert values == ", ".join(f"{n} {v:.3f}" for n, v in zip(ACTION_NAMES, q, strict=True))
        named = {b.strip() for b in best.replace(" (tied)", "").split(" and ")}
        assert named == {ACTION_NAMES[a] for a in row["optimal_actions"]}
        assert (not_best is not None) == (row["action"] not in row["optimal_actions"])
        assert codec.decode_action(row["completion"]) == row["action"]  # the think block is read past


def test_position_wording_puts_the_map_in_the_system_message(cli, tmp_path):
    """Episodes played as conversations repeat the user turn every step: the position wording keeps it short."""
    import pyarrow.parquet as pq

    from rlft.codecs.base import load_codec

    out = tmp_path / "pos"
    result = cli("data", "export-q", "frozenlake", "--out", out, "--episodes", "5", "--wording", "position")
    assert result.exit_code == 0, result.output
    rows = pq.read_table(next((out / "data").glob("*.parquet"))).to_pylist()
    codec = load_codec(out)
    system, user = rows[0]["prompt"]
    assert "S F F F\nF H F H\nF F F H\nH F F G" in system["content"] and "slippery" in system["content"]
    assert user["content"] == "You are at row 0, column 0."
    assert codec.encode_observation(6) == "You are at row 1, column 2."
    assert codec.build_prompt(0) == rows[0]["prompt"]
    assert codec.show_grid is False and load_codec(out).params()["show_grid"] is False
