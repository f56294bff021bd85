"""Hostile pass 21's findings (an independent rerun from a fresh clone, aimed at the model commands, eval's side
outputs and subcommands, results checks, pipelines, hyperparameter files, thread settings and interrupts), each the
case that found it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from eval_factories import frozenlake_dataset, minari_dataset_folder, tiny_model
from factories import one_line


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    lake = frozenlake_dataset(tmp_path_factory)
    return {"lake": lake, "tiny": tiny_model(tmp_path_factory, lake, "pass21"),
            "binned": minari_dataset_folder(tmp_path_factory, "Pendulum-v1", fmt="binned", episodes=2, max_steps=10,
                                            bins=8)}


def test_add_bins_refuses_a_lora_run_and_never_writes_over_its_base(cli, world, tmp_path):
    """F1: add-bins on a LoRA run saved an adapter with resized embeddings that no base fits (exit 0); F2: --out the
    run's base model with --overwrite replaced the base's weights by that adapter."""
    base = tmp_path / "base"
    shutil.copytree(world["tiny"], base)
    lora = tmp_path / "lora"
    assert cli("train", "sft", "--dataset", world["lake"], "--model", base, "--out", lora, "--lora", "--max-steps",
               "1").exit_code == 0
    before = sorted(p.name for p in base.iterdir())
    one_line(cli("model", "add-bins", "--model", lora, "--dataset", world["binned"], "--out", base, "--overwrite"), 2,
             "base model", "writing there would destroy it")
    assert sorted(p.name for p in base.iterdir()) == before
    one_line(cli("model", "add-bins", "--model", lora, "--dataset", world["binned"], "--out", tmp_path / "tb"), 2,
             "is a LoRA run", "rlft model merge")
    assert not (tmp_path / "tb").exists()


def test_a_pipeline_value_with_a_space_stays_one_word_of_its_command(cli, world, tmp_path):
    """F4: command strings were split after their variables were filled: an --out with a space broke the last step
    after every other had run, and a --set value could add options to a command."""
    report = tmp_path / "r.json"
    assert cli("eval", "--policy", "random", "--env", "CartPole-v1", "--episodes", "1", "--out", report,
               "--quiet").exit_code == 0
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text('name: p\nvars: {report: "x"}\nsteps:\n  - command: "eval compare {report}"\n')
    spaced = tmp_path / "my reports" / "r.json"
    spaced.parent.mkdir()
    shutil.copy(report, spaced)
    result = cli("pipeline", "run", pipeline, "--out", tmp_path / "o", "--set", f"report={spaced}")
    assert result.exit_code == 0, result.output
    result = cli("pipeline", "run", pipeline, "--out", tmp_path / "o", "--set", f"report={report} --png x.png")
    assert result.exit_code == 2 and "does not exist" in " ".join(result.output.split()), result.output
    assert not (tmp_path / "x.png").exists()


def test_an_eval_step_with_a_list_for_one_value_is_refused(cli, tmp_path):
    """F5: the preflight refused a YAML list for a single-valued option for every command but rlft eval, which kept
    the last value."""
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text("steps:\n  - command: eval\n    args: {policy: random, env: CartPole-v1, episodes: [1, 2], "
                        "out: '{out}/r.json'}\n")
    one_line(cli("pipeline", "run", pipeline, "--out", tmp_path / "o"), 2, "--episodes takes one value")
    assert not (tmp_path / "o").exists()


def test_evals_own_options_before_a_subcommand_are_refused(cli, tmp_path):
    """F6: `rlft eval --policy random --out z.json compare r.json` ran the comparison alone and exited 0."""
    report = tmp_path / "r.json"
    assert cli("eval", "--policy", "random", "--env", "CartPole-v1", "--episodes", "1", "--out", report,
               "--quiet").exit_code == 0
    one_line(cli("eval", "--policy", "random", "--episodes", "5", "--out", tmp_path / "z.json", "compare", report), 2,
             "--policy, --episodes, --out: option(s) of rlft eval", "rlft eval compare does not read them")
    assert not (tmp_path / "z.json").exists()
    assert cli("eval", "compare", report).exit_code == 0


def test_reports_named_apart_by_their_suffix_case_lock_their_shared_plot(tmp_path):
    """F7: r.json and r.JSON are two reports of one r.png and r_tb/: each locked only its JSON, so two at once wrote
    the same plot. The plot and the log folder are locked as the report is."""
    import subprocess
    import sys

    from rlft.core.errors import OutputError
    from rlft.evaluate.report import check_side_files

    script = tmp_path / "rlft"  # a live process running a program named rlft: the other report's writer
    script.write_text("import sys\nprint('ready', flush=True)\nsys.stdin.read()\n")
    writer = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert writer.stdout.readline().strip() == b"ready"  # it runs as "rlft" now, not the interpreter starting
        (tmp_path / ".r.png.rlft-lock").write_text(f"{writer.pid}\n")
        with pytest.raises(OutputError, match="is being written by another rlft process"):
            check_side_files(tmp_path / "r.JSON", overwrite=True)
    finally:
        writer.communicate(b"")


def _record(cli, tmp_path: Path, seed: int, labels: tuple[str, ...], results: Path) -> None:
    args = []
    for label in labels:
        report = tmp_path / f"{label}-{seed}.json"
        assert cli("eval", "--policy", "random", "--env", "CartPole-v1", "--episodes", "1", "--seed", str(seed),
                   "--out", report, "--quiet").exit_code == 0
        args += ["--report", f"{label}={report}"]
    assert cli("results", "record", "exp", "--seed", str(seed), *args, "--results-dir", results, "--reproduce",
               "make x").exit_code == 0


def test_results_check_refuses_a_record_without_a_committed_policy(cli, tmp_path):
    """F8: a seed recorded without the LLM, the subject of the experiment, "reproduced" it."""
    for seed in range(3):
        _record(cli, tmp_path, seed, ("llm", "q"), tmp_path / "res")
    _record(cli, tmp_path, 5, ("q",), tmp_path / "new")
    one_line(cli("results", "check", "exp", "--results-dir", tmp_path / "res", "--record",
                 tmp_path / "new" / "exp" / "seed-5.json"), 1, "seed 5 does not reproduce exp",
             "not played (every committed seed has it): llm")


def test_grpo_refuses_a_critic_no_reward_reads(cli, world, tmp_path):
    """F9: --critic RUN without the critic reward trained with exit 0 and recorded the critic as used."""
    one_line(cli("train", "grpo", "--dataset", world["lake"], "--model", world["tiny"], "--out", tmp_path / "g",
                 "--critic", tmp_path / "nowhere", "--max-steps", "1"), 2,
             "--critic does nothing here: it applies with the critic reward")
    assert not (tmp_path / "g").exists()


@pytest.mark.parametrize(("body", "words"), [
    ("  policy_kwargs: {net_arch: [100000, 100000]}\n", ["10,000,000,000 weights", "50,000,000"]),
    ("  policy_kwargs: {net_arch: {pi: [64, 200000], vf: [64]}}\n", ["each width must be a whole number"]),
    ("  n_steps: 10000000\n  batch_size: 64\n", ["one rollout is n_steps x n_envs", "--timesteps 64"]),
])
@pytest.mark.parametrize("command", [["expert", "train", "--algo", "ppo", "--eval-episodes", "1"],
                                     ["train", "online", "--eval-episodes", "1"]])
def test_a_hyperparameter_file_cannot_ask_for_a_giant_network_or_rollout(cli, tmp_path, body, words, command):
    """F10: a net_arch of [100000, 100000] was a 40 GB allocation and a traceback; F11: n_steps 10^7 ran a whole
    rollout of 8 x 10^7 steps at --timesteps 64. Both refused before anything is built."""
    hp = tmp_path / "hp.yaml"
    hp.write_text("CartPole-v1:\n  policy: MlpPolicy\n  n_envs: 1\n" + body)
    out = tmp_path / ("e.zip" if command[0] == "expert" else "run")
    env = ["--env", "CartPole-v1"]
    one_line(cli(*command, *env, "--out", out, "--timesteps", "64", "--hyperparams", hp), 2, *words)
    assert not out.exists()


def test_a_thread_count_past_the_machine_is_capped_with_a_note(monkeypatch, capsys):
    """F12: RLFT_NUM_THREADS=100000 made OpenBLAS fail to start its threads and the process segfaulted."""
    import os

    from rlft.core.seeding import THREADS_PER_CORE, limit_threads

    monkeypatch.setenv("RLFT_NUM_THREADS", "100000")
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(var, "1")
    try:
        assert limit_threads() == THREADS_PER_CORE * os.cpu_count()
        assert "100,000 threads asked for" in capsys.readouterr().err
    finally:
        monkeypatch.delenv("RLFT_NUM_THREADS")
        limit_threads(1)


def test_an_interrupt_turned_into_another_error_ends_as_the_interrupt(capsys):
    """F13: a Ctrl-C landing inside torchrl's vmapped IQL loss became "RuntimeError: Converting a tensordict to
    boolean value is not permitted", printed as a traceback instead of the Interrupted line."""
    import typer

    from rlft.cli.common import handle_errors

    def train():
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise RuntimeError("Converting a tensordict to boolean value is not permitted") from None

    with pytest.raises(typer.Exit) as ended:
        handle_errors(train)()
    assert ended.value.exit_code == 130 and "Interrupted" in capsys.readouterr().err



def test_products_of_training_sizes_are_bounded_before_work_starts(cli, world, tmp_path_factory, tmp_path):
    """F14: each size passed its own range and their product ran until killed: offline's 10^7 steps of 10^6 rows and
    10^6 check episodes after every step, bc's 100,000 epochs of batch 1, GRPO's 100,000 x 100,000 completions."""
    offline = ("train", "offline", "--dataset", world["binned"], "--out", tmp_path / "off", "--hidden", "8,8")
    one_line(cli(*offline, "--steps", "10000000", "--batch-size", "1000000"), 2,
             "10,000,000,000,000 sampled transitions, more than 1,000,000,000")
    one_line(cli(*offline, "--steps", "20", "--check-steps", "1", "--check-episodes", "1000000"), 2,
             "would play 20,000,000 episodes")
    rows = minari_dataset_folder(tmp_path_factory, "Pendulum-v1", episodes=6, max_steps=100)  # 400 training rows
    one_line(cli("train", "bc", "--dataset", rows, "--out", tmp_path / "bc.pt", "--epochs", "100000",
                 "--batch-size", "1"), 2, "gradient steps, more than 10,000,000")
    one_line(cli("train", "grpo", "--dataset", world["lake"], "--model", world["tiny"], "--out", tmp_path / "g",
                 "--num-generations", "100000", "--batch-size", "100000", "--max-steps", "1"), 2,
             "100,000 completions per step, more than 16,384")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_report_paired_with_itself_and_an_empty_width_are_refused(cli, world, tmp_path):
    """U2: --paired q,q recorded a report minus itself (a zero difference); U4: --hidden 1,,2 became [1, 2]."""
    report = tmp_path / "r.json"
    assert cli("eval", "--policy", "random", "--env", "CartPole-v1", "--episodes", "1", "--out", report,
               "--quiet").exit_code == 0
    one_line(cli("results", "record", "exp", "--seed", "0", "--report", f"q={report}", "--paired", "q,q",
                 "--results-dir", tmp_path / "res", "--reproduce", "make x"), 2, "pairs a report with itself")
    one_line(cli("train", "bc", "--dataset", world["lake"], "--out", tmp_path / "bc.pt", "--hidden", "1,,2"), 2,
             "hidden[1]")
    assert not (tmp_path / "res").exists() and not (tmp_path / "bc.pt").exists()
