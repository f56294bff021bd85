"""What the tenth independent hostile pass found, each now one line with nothing of the user's lost: a user's PNG
beside an --overwrite'd report, a FIFO inside a Minari dataset (a hang), NaN and out-of-space rows trained on
silently, a NaN policy blamed on the env, a remote's non-answers reported as bad input, a model type error three
paragraphs long, an unused --target-return recorded as used, and a timed-out request left to crash the exit."""

# ruff: noqa: F811  (the fixtures imported below are test parameters by name)
from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from factories import make_bandit_dataset, one_line
from test_audit_pass9 import lake  # noqa: F401 - fixtures, used by name
from test_audit_pass9_limits import _Server, hub_at  # noqa: F401


def test_eval_overwrite_keeps_a_users_file_where_the_plot_would_go(cli, lake, tmp_path):
    photo = tmp_path / "holiday.png"
    photo.write_text("my photo bytes")
    one_line(cli("eval", "--policy", "random", "--codec", lake, "--episodes", "2", "--out", tmp_path / "holiday.json",
                 "--overwrite"), 2, "is not a PNG plot an earlier report wrote")
    assert photo.read_text() == "my photo bytes" and not (tmp_path / "holiday.json").exists()
    for _ in range(2):  # an earlier report's plot is replaced
        result = cli("eval", "--policy", "random", "--codec", lake, "--episodes", "2", "--out", tmp_path / "r.json",
                     "--overwrite")
        assert result.exit_code == 0, result.output


def test_a_fifo_inside_a_minari_dataset_is_refused_not_waited_on(cli, tmp_path):
    result = cli("data", "collect", "--env", "CartPole-v1", "--episodes", "2", "--dataset-id", "tt/fifo-v0",
                 "--data-path", tmp_path / "minari")
    assert result.exit_code == 0, result.output
    source = tmp_path / "copy"
    shutil.copytree(tmp_path / "minari" / "tt" / "fifo-v0", source)
    (source / "data" / "main_data.hdf5").unlink()
    os.mkfifo(source / "data" / "main_data.hdf5")
    one_line(cli("data", "info", source), 2, "main_data.hdf5 is not a regular file")
    one_line(cli("data", "serialize", source, "--out", tmp_path / "out"), 2, "main_data.hdf5 is not a regular file")
    assert not (tmp_path / "out").exists()


def _rewrite(dataset: Path, column: str, change) -> None:
    """Change one column of every train shard in place (a damaged or hand-edited dataset)."""
    for shard in sorted((dataset / "data").glob("train-*.parquet")):
        table = pq.read_table(shard)
        values = [np.asarray(v, dtype=np.float64) for v in table.column(column).to_pylist()]
        for i, value in enumerate(values):
            values[i] = change(i, value)
        index = table.schema.get_field_index(column)
        import pyarrow as pa

        pq.write_table(table.set_column(index, column, pa.array([v.tolist() for v in values],
                                                                 table.schema.field(column).type)), shard)


@pytest.mark.parametrize(("column", "change", "words"), [
    ("next_observation", lambda i, v: v * np.nan if i % 5 == 0 else v, "non-finite next_observation"),
    ("observation", lambda i, v: v * np.nan if i % 50 == 3 else v, "non-finite observation"),
    ("action", lambda i, v: v * np.nan if i % 50 == 3 else v, "non-finite action"),
    ("action", lambda i, v: v * 0 + 50.0, "outside the action space [-2, 2]"),
])
def test_offline_rl_and_bc_refuse_nonfinite_rows_and_actions_outside_the_space(cli, tmp_path, column, change, words):
    data = make_bandit_dataset(cli, tmp_path / "bandit", rows=200)
    _rewrite(data, column, change)
    one_line(cli("train", "offline", "--dataset", data, "--algo", "iql", "--steps", "5", "--out", tmp_path / "run"),
             2, words, "row")
    assert not (tmp_path / "run").exists()
    if column != "next_observation":  # behaviour cloning reads no next observation
        one_line(cli("train", "bc", "--dataset", data, "--epochs", "1", "--out", tmp_path / "bc.pt"), 2, words)
        assert not (tmp_path / "bc.pt").exists()
    if "non-finite" in words and column != "next_observation":  # the LLM stages read the same rows (pass 11, U2)
        for stage in ("sft", "grpo"):
            one_line(cli("train", stage, "--dataset", data, "--model", data, "--out", tmp_path / stage), 2, words,
                     "row")
            assert not (tmp_path / stage).exists()


def test_a_policy_that_plays_nan_is_named_instead_of_the_env():
    import gymnasium as gym

    from rlft.core.errors import InvalidInputError
    from rlft.policy.policies import Policy
    from rlft.policy.rollout import rollout

    class Diverged(Policy):
        kind = "offline"

        def act(self, obs, slots):
            return np.full((len(slots), 1), np.nan, np.float32)

    with pytest.raises(InvalidInputError, match="the offline policy played a non-finite action"):
        rollout(Diverged(), [lambda: gym.make("Pendulum-v1")], 1, 0, np.zeros(1, np.float32))


def _html(handler) -> None:
    body = b"<html><body>a login page</body></html>"
    handler.send_response(200)
    handler.send_header("Content-Type", "text/html")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def test_a_hub_that_answers_html_is_a_remote_fault_not_bad_input(cli, tmp_path, hub_at):  # noqa: F811
    with _Server(_html) as server:
        hub_at(server.url, "10")
        result = cli("model", "init", "--dataset", "someone/ds", "--out", tmp_path / "m")
    one_line(result, 1, "answered the download of dataset 'someone/ds' with something that is not a Hub reply",
             "is HF_ENDPOINT a Hugging Face Hub?", max_lines=3)
    assert not (tmp_path / "m").exists()


def test_a_model_type_transformers_does_not_know_is_one_line(cli, lake, tmp_path):
    model = tmp_path / "m"
    assert cli("model", "init", "--dataset", lake, "--out", model).exit_code == 0
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "model_type": "bert_evil"}))
    one_line(cli("eval", "--policy", f"llm:{model}", "--codec", lake, "--episodes", "1", "--out",
                 tmp_path / "e.json"), 2, "bert_evil", max_lines=3)


def test_target_return_is_refused_where_nothing_reads_it(cli, lake, tmp_path):
    model = tmp_path / "m"
    assert cli("model", "init", "--dataset", lake, "--out", model).exit_code == 0
    one_line(cli("eval", "--policy", f"llm:{model}", "--codec", lake, "--episodes", "1", "--target-return", "5",
                 "--out", tmp_path / "e.json"), 2, "--target-return", "writes no return-to-go")
    one_line(cli("eval", "--policy", "random", "--codec", lake, "--episodes", "1", "--target-return", "5"), 2,
             "a random policy does not read it")
    assert not (tmp_path / "e.json").exists()


def test_a_request_left_past_its_deadline_is_known_until_it_ends():
    """The ``rlft`` command ends without Python's finalization while such a request still runs (an upload's
    native threads crashed it there once in 40 timed-out pushes)."""
    from rlft.core import net

    release = threading.Event()
    earlier = list(net._ABANDONED)  # an earlier test's request may still run (a server that never answers)
    with pytest.raises(net.DeadlineError):
        net.within_deadline(release.wait, 0.01)
    assert net.abandoned_requests()
    release.set()
    net._ABANDONED[-1].join()
    net._ABANDONED[:] = [t for t in net._ABANDONED if t not in earlier]  # this test's request alone is judged
    assert not net.abandoned_requests()
    net._ABANDONED.extend(earlier)


@pytest.mark.parametrize("revision", ["../../x", "/main", "a b", "x.lock", "-f"])
def test_a_push_revision_must_be_a_branch_name(cli, lake, revision):
    one_line(cli("data", "push", lake, "--repo-id", "me/x", "--revision", revision), 2, "is not a branch name")


def test_compare_refuses_a_report_with_a_nan_score(cli, lake, tmp_path):
    out = tmp_path / "r.json"
    assert cli("eval", "--policy", "random", "--codec", lake, "--episodes", "2", "--out", out).exit_code == 0
    report = json.loads(out.read_text())
    out.write_text(json.dumps({**report, "return_mean": float("nan")}))
    one_line(cli("eval", "compare", out), 2, "return_mean is nan")


def test_bc_never_logs_into_a_users_folder_named_like_its_log_folder(cli, tmp_path):
    data = make_bandit_dataset(cli, tmp_path / "bandit", rows=100)
    mine = tmp_path / "bc_tb"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    for extra in ([], ["--overwrite"]):
        one_line(cli("train", "bc", "--dataset", data, "--epochs", "1", "--out", tmp_path / "bc.pt", "--report-to",
                     "tensorboard", *extra), 2, "bc_tb")
        assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"] and not (tmp_path / "bc.pt").exists()
    (mine / "notes.txt").unlink()
    mine.rmdir()
    for extra in ([], ["--overwrite"]):  # its own log folder: logged into again with --overwrite
        result = cli("train", "bc", "--dataset", data, "--epochs", "1", "--out", tmp_path / "bc.pt", "--report-to",
                     "tensorboard", *extra)
        assert result.exit_code == 0, result.output


@pytest.mark.parametrize("variables", [{"a": "{b}", "b": "{a}"}, {"a": "{a}"}])
def test_pipeline_variables_in_a_circle_are_named_as_one(cli, tmp_path, variables):
    import yaml

    spec = tmp_path / "p.yaml"
    spec.write_text(yaml.safe_dump({"name": "p", "vars": variables,
                                    "steps": [{"command": "data info", "args": {"dataset": "{a}"}}]}))
    one_line(cli("pipeline", "run", spec, "--out", tmp_path / "out"), 2, "refer to each other in a circle: a")
    assert not (tmp_path / "out").exists()


def test_video_overwrite_leaves_only_this_evaluations_videos(cli, tmp_path):
    pytest.importorskip("moviepy")  # the video extra; the minimum-versions venv goes without it
    folder = tmp_path / "videos"
    folder.mkdir()
    (folder / "episode-0007-seed-7.mp4").write_text("an earlier evaluation's")
    result = cli("eval", "--policy", "random", "--env", "CartPole-v1", "--episodes", "1", "--seed", "5", "--quiet",
                 "--max-episode-steps", "5", "--video", folder, "--overwrite")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in folder.iterdir()) == ["episode-0000-seed-5.mp4"]


def test_a_pipe_where_a_file_is_read_is_named_as_one_not_as_missing(cli, tmp_path):
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    one_line(cli("pipeline", "run", fifo, "--out", tmp_path / "out"), 2, "pipeline file", "is not a regular file")
    one_line(cli("eval", "--policy", "random", "--codec", fifo, "--episodes", "1"), 2, "is not a folder")
    one_line(cli("pipeline", "run", tmp_path / "none.yaml", "--out", tmp_path / "out"), 2, "pipeline file",
             "none.yaml does not exist")


def test_observations_that_are_not_fixed_width_numbers_are_not_read_as_numbers():
    """The LLM stages' finite-row check reads only fixed-width number columns: maps of several sizes (random lakes)
    or structured observations are text to the LLM and cannot be non-finite; refusing them would stop good runs."""
    import pyarrow as pa

    from rlft.train.inputs import _numbers

    table = pa.table({"observation": [[1.0, 2.0], [1.0, 2.0, 3.0]], "action": [[0.5], [float("inf")]]})
    assert _numbers(table, "observation") is None and _numbers(table, "state") is None
    assert not np.isfinite(_numbers(table, "action")).all()
