"""Process exit: the ``rlft`` command (``rlft.cli.main:run``, which freezes the garbage collector as its last exit
handler) against the plain Typer app (``app()``, Python's ordinary exit), same commands, in turns.

Two commands: ``rlft data serialize`` of a 1,000-step HalfCheetah-shaped Minari dataset (numpy, pyarrow, minari,
typer loaded) and ``rlft model init`` on that dataset (torch and transformers loaded). For each: the exit time
(from the last exit handler to the process being reaped) and the whole command's wall time, medians of
``--repeat`` rounds; ratios are medians of the per-round ratios (this machine's speed drifts, a round's two runs
share the drift).

Run: ``.venv/bin/python benchmarks/exit.py [--repeat 9]``; the table is also written to
``results/benchmarks/exit.json`` (rendered into the README by ``rlft results render``).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "results" / "benchmarks" / "exit.json"

# The first exit handler registered runs last: it stamps the moment only interpreter finalization is left.
WRAPPER = """
import atexit, os, sys, time
atexit.register(lambda: os.write(2, f"\\nEXIT-STAMP {time.time()!r}\\n".encode()))
from rlft.cli import main
entry, sys.argv = sys.argv[1], ["rlft", *sys.argv[2:]]
main.run() if entry == "run" else main.app()
"""


def timed(entry: str, args: list[str], env: dict) -> tuple[float, float]:
    """(wall seconds, exit seconds) of one command started through ``entry`` (``run`` or ``app``)."""
    t0 = time.time()
    done = subprocess.run([sys.executable, "-c", WRAPPER, entry, *args], env=env, capture_output=True, text=True)
    t1 = time.time()
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {done.stderr[-2000:]}")
    stamp = next(float(line.split()[1]) for line in done.stderr.splitlines()[::-1] if line.startswith("EXIT-STAMP"))
    return t1 - t0, t1 - stamp


def measure(commands: dict[str, list[str]], env: dict, repeat: int) -> list[tuple[str, dict]]:
    rows = []
    for label, args in commands.items():
        timed("run", args, env)  # warm-up: page cache, compiled bytecode
        # the two take turns going first, so neither is always the one after a warm page cache
        rounds = [{entry: timed(entry, args, env) for entry in (("app", "run"), ("run", "app"))[i % 2]}
                  for i in range(repeat)]
        wall = {e: np.array([r[e][0] for r in rounds]) for e in ("app", "run")}
        exit_s = {e: np.array([r[e][1] for r in rounds]) for e in ("app", "run")}
        rows.append((label, {
            "exit_app": float(np.median(exit_s["app"])), "exit_run": float(np.median(exit_s["run"])),
            "wall_app": float(np.median(wall["app"])), "wall_run": float(np.median(wall["run"])),
            "ratio": float(np.median(wall["app"] / wall["run"])),
        }))
    return rows


def main() -> None:
    from bench_fixtures import print_tables
    from rlft.core.console import console
    from rlft.results.tables import column, table, write_benchmark
    from serialize import make_minari  # benchmarks/serialize.py: the same HalfCheetah-shaped dataset

    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=9, help="rounds per command (medians are kept)")
    parser.add_argument("--no-write", action="store_true", help="print only, leave results/ as it is")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="rlft-bench-exit-"))
    env = {**os.environ, "MINARI_DATASETS_PATH": str(root / "minari"), "OMP_NUM_THREADS": "1",
           "HF_HUB_OFFLINE": "1"}
    os.environ["MINARI_DATASETS_PATH"] = env["MINARI_DATASETS_PATH"]
    make_minari(1_000, "bench/halfcheetah1000-v0")
    dataset = root / "dataset"
    subprocess.run([str(Path(sys.executable).with_name("rlft")), "data", "serialize", "bench/halfcheetah1000-v0",
                    "--out", str(dataset)], env=env, check=True, capture_output=True)
    commands = {
        "rlft data serialize (1,000 steps)": ["data", "serialize", "bench/halfcheetah1000-v0", "--out",
                                              str(root / "out"), "--overwrite"],
        "rlft model init (torch, transformers)": ["model", "init", "--dataset", str(dataset), "--out",
                                                  str(root / "model"), "--overwrite"],
    }
    tables = [table("command", [
        column("exit_app", "exit s, plain app()", ".3f"), column("exit_run", "exit s, rlft run()", ".3f"),
        column("wall_app", "command s, plain app()", ".2f"), column("wall_run", "command s, rlft run()", ".2f"),
        column("ratio", "speedup", "x")], measure(commands, env, args.repeat))]
    print_tables(tables)
    if not args.no_write:
        write_benchmark(OUT, "Process exit: the rlft command against the plain Typer app", tables,
                        "python benchmarks/exit.py",
                        description="Whole commands started through `rlft.cli.main:run` (the `rlft` command, which "
                                    "freezes the garbage collector as its last exit handler) and through the "
                                    f"plain Typer `app()`, in turns, medians of {args.repeat} rounds (ratios: "
                                    "median of the per-round ratios); exit s is the time from the last exit "
                                    "handler to the process being reaped (interpreter finalization)")
        console.print(f"-> {OUT}")


if __name__ == "__main__":
    main()
