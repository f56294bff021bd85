"""Serialization speed: rlft's vectorised records per codec against a plain per-step f-string loop, same data,
same process, printed as ratios; then whole processes: ``rlft data serialize`` against a plain script doing the
same job (open the Minari dataset, one f-string prompt per step, pandas to Parquet), each started as a command,
on a small and a large HalfCheetah-shaped dataset (start-up included), and the peak memory of the large one;
then the command on the large one with each codec fitted on the data (two passes over the episodes).

Run: ``.venv/bin/python benchmarks/serialize.py [--steps 200000] [--full-steps 1000000]``; the tables are also
written to ``results/benchmarks/serialize.json`` (rendered into the README by ``rlft results render``).
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

OBS_DIM, ACT_DIM, EPISODE = 17, 6, 1000
OUT = Path(__file__).resolve().parents[1] / "results" / "benchmarks" / "serialize.json"


def synthetic(steps: int, seed: int = 0):
    from rlft.datasets.offline import EpisodeChunk

    rng = np.random.default_rng(seed)
    episodes = steps // EPISODE
    return EpisodeChunk(
        observations=rng.standard_normal((steps, OBS_DIM)) * 3,
        actions=rng.uniform(-1, 1, (steps, ACT_DIM)).astype(np.float32),
        rewards=rng.standard_normal(steps),
        terminated=np.zeros(steps, bool),
        truncated=np.tile(np.r_[np.zeros(EPISODE - 1, bool), True], episodes),
        episode_id=np.repeat(np.arange(episodes), EPISODE),
        step=np.tile(np.arange(EPISODE), episodes),
    )


def plain_loop(chunk) -> list[tuple[str, str]]:
    """The baseline every earlier script wrote: one f-string per value, one prompt per step."""
    rows = []
    for obs, act in zip(chunk.observations, chunk.actions, strict=True):
        obs_text = " ".join(f"{v:.3f}" for v in obs)
        act_text = " ".join(f"{v:.3f}" for v in act)
        rows.append((f"<observation>{obs_text}</observation>\n", f"<action>{act_text}</action>"))
    return rows


def codecs_for(chunk):
    from gymnasium import spaces

    from rlft.codecs.factory import make_codec

    obs_space = spaces.Box(-np.inf, np.inf, (OBS_DIM,), np.float64)
    act_space = spaces.Box(-1, 1, (ACT_DIM,), np.float32)
    sample = slice(0, 200_000)
    for fmt in ("raw", "discretized", "tokenized"):
        yield fmt, make_codec(fmt, obs_space, act_space, observations=chunk.observations[sample],
                              actions=chunk.actions[sample], env_id="HalfCheetah-v5")


def in_process(steps: int) -> list[dict]:
    from rlft.datasets.offline import build_records

    chunk = synthetic(steps)
    plain_loop(synthetic_slice(chunk, 0, 2_000))  # warm-up, untimed (as for the codecs below)
    t0 = time.perf_counter()
    plain_loop(chunk)
    base = time.perf_counter() - t0
    rows = [{"method": "plain per-step f-string loop (raw)", "steps/s": steps / base, "ratio": 1.0}]
    for fmt, codec in codecs_for(chunk):
        build_records(synthetic_slice(chunk, 0, 2_000), codec)  # warm-up: imports and kernel lookups, untimed
        t0 = time.perf_counter()
        for start in range(0, steps, 100_000):  # the chunk size serialize uses
            sub = synthetic_slice(chunk, start, start + 100_000)
            build_records(sub, codec)
        dt = time.perf_counter() - t0
        rows.append({"method": f"rlft build_records ({fmt})", "steps/s": steps / dt, "ratio": base / dt})
    return rows


DICT_FIELDS = {"achieved_goal": 2, "desired_goal": 2, "observation": 4}  # PointMaze's Dict observation


def dict_rows(steps: int) -> tuple[dict, object]:
    """A PointMaze-shaped Dict observation batch, and the same values as flat rows in an EpisodeChunk."""
    rng = np.random.default_rng(1)
    obs = {k: rng.standard_normal((steps, d)) * 2 for k, d in DICT_FIELDS.items()}
    chunk = synthetic(steps)
    flat = np.concatenate([obs[k] for k in DICT_FIELDS], axis=1)
    from rlft.datasets.offline import EpisodeChunk

    return obs, EpisodeChunk(flat, chunk.actions[:, :2], *(getattr(chunk, f) for f in (
        "rewards", "terminated", "truncated", "episode_id", "step")))


def plain_dict_loop(obs: dict, actions) -> list[tuple[str, str]]:
    """The per-step baseline for Dict observations: one f-string per value, each field in its tags."""
    rows = []
    keys = list(DICT_FIELDS)
    for t in range(len(actions)):
        fields = " ".join(f"<{k}>" + " ".join(f"{v:.3f}" for v in obs[k][t]) + f"</{k}>" for k in keys)
        act_text = " ".join(f"{v:.3f}" for v in actions[t])
        rows.append((f"<observation>{fields}</observation>\n", f"<action>{act_text}</action>"))
    return rows


def in_process_dict(steps: int) -> list[dict]:
    """Dict observations (three fields) against a plain loop, next to the flat case of the same width."""
    from gymnasium import spaces

    from rlft.codecs.factory import make_codec
    from rlft.datasets.offline import build_records

    obs, chunk = dict_rows(steps)
    plain_dict_loop({k: v[:2_000] for k, v in obs.items()}, chunk.actions[:2_000])  # warm-up, untimed
    t0 = time.perf_counter()
    plain_dict_loop(obs, chunk.actions)
    base = time.perf_counter() - t0
    rows = [{"method": "plain per-step loop, Dict obs (3 fields, 8 values)", "steps/s": steps / base, "ratio": 1.0}]
    act = spaces.Box(-1, 1, (2,), np.float32)
    dict_space = spaces.Dict({k: spaces.Box(-np.inf, np.inf, (d,), np.float64) for k, d in DICT_FIELDS.items()})
    flat_space = spaces.Box(-np.inf, np.inf, (sum(DICT_FIELDS.values()),), np.float64)
    for label, space in (("Dict obs", dict_space), ("flat Box obs, same 8 values", flat_space)):
        codec = make_codec("raw", space, act, env_id="PointMaze_UMaze-v3")
        build_records(synthetic_slice(chunk, 0, 2_000), codec)  # warm-up, untimed
        t0 = time.perf_counter()
        for start in range(0, steps, 100_000):
            build_records(synthetic_slice(chunk, start, start + 100_000), codec)
        dt = time.perf_counter() - t0
        rows.append({"method": f"rlft build_records (raw, {label})", "steps/s": steps / dt, "ratio": base / dt})
    return rows


def synthetic_slice(chunk, a: int, b: int):
    from rlft.datasets.offline import EpisodeChunk

    return EpisodeChunk(*(getattr(chunk, f)[a:b] for f in ("observations", "actions", "rewards", "terminated",
                                                            "truncated", "episode_id", "step")))


PLAIN_SCRIPT = """
import sys
import minari
import pandas as pd
ds = minari.load_dataset(sys.argv[1])
rows = []
for ep in ds.iterate_episodes():
    for t in range(len(ep.actions)):
        obs = " ".join(f"{v:.3f}" for v in ep.observations[t])
        act = " ".join(f"{v:.3f}" for v in ep.actions[t])
        rows.append({"prompt": f"<observation>{obs}</observation>\\n", "completion": f"<action>{act}</action>",
                     "episode_id": ep.id, "step": t, "reward": float(ep.rewards[t])})
pd.DataFrame(rows).to_parquet(sys.argv[2])
"""


# The part every serializer of a Minari dataset pays: the interpreter, minari, and reading every episode.
READ_ONLY_SCRIPT = """
import sys
import minari
for ep in minari.load_dataset(sys.argv[1]).iterate_episodes():
    pass
"""


def make_minari(steps: int, dataset_id: str) -> None:
    """A HalfCheetah-shaped Minari dataset (HDF5) of ``steps`` steps in episodes of 1,000 (random numbers)."""
    import gymnasium as gym
    import minari
    from minari.data_collector.episode_buffer import EpisodeBuffer

    rng = np.random.default_rng(0)
    length = min(EPISODE, steps)
    buffers = [
        EpisodeBuffer(id=e, observations=rng.standard_normal((length + 1, OBS_DIM)),
                      actions=rng.uniform(-1, 1, (length, ACT_DIM)).astype(np.float32),
                      rewards=rng.standard_normal(length), terminations=np.zeros(length, bool),
                      truncations=np.r_[np.zeros(length - 1, bool), True])
        for e in range(max(1, steps // length))
    ]
    minari.create_dataset_from_buffers(dataset_id, buffers, env=gym.make("HalfCheetah-v5"),
                                       ref_min_score=-280.178953, ref_max_score=12135.0)


WRAPPER = """
import resource, subprocess, sys, time
t0 = time.perf_counter()
subprocess.run(sys.argv[1:], check=True, capture_output=True)
print(time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
"""


def timed_process(cmd: list[str], env: dict) -> tuple[float, float]:
    """(wall seconds, peak RSS MB) of one command, run under a wrapper process whose only child it is."""
    out = subprocess.run([sys.executable, "-c", WRAPPER, *cmd], env=env, check=True, capture_output=True, text=True)
    wall, rss = out.stdout.split()
    return float(wall), float(rss)


def reading(dataset_id: str, repeat: int) -> list[tuple[str, dict]]:
    """Reading every episode of ``dataset_id`` in this process: Minari's own iterator against rlft's (which reads
    flat HDF5 episodes through h5py's low-level API), in turns, medians of ``repeat``; the file is in the page
    cache after the first read, as it is for the whole-process runs."""
    import minari

    from rlft.sources.minari_source import iterate_episodes

    dataset = minari.load_dataset(dataset_id)
    readers = {"Minari's iterate_episodes": lambda: list(dataset.iterate_episodes()),
               "rlft's iterate_episodes": lambda: list(iterate_episodes(dataset, dataset_id))}
    times: dict[str, list[float]] = {name: [] for name in readers}
    for _ in range(repeat + 1):  # the first round warms the page cache and is not kept
        for name, read in readers.items():
            t0 = time.perf_counter()
            read()
            times[name].append(time.perf_counter() - t0)
    base = float(np.median(times["Minari's iterate_episodes"][1:]))
    return [(name, {"seconds": float(np.median(t[1:])), "ratio": base / float(np.median(t[1:]))})
            for name, t in times.items()]


# The codecs fitted on the data take two passes over the episodes (fit, then encode); raw takes one.
FITTED_CODECS = {"discretized (bin edges from data: two passes)": ["--format", "discretized"],
                 "tokenized (ranges from data: two passes)": ["--format", "tokenized"]}


def whole_process(sizes: list[int], repeat: int) -> tuple[list[tuple[str, dict]], list[tuple[str, dict]]]:
    """Median wall times of ``rlft data serialize``, the plain script and the read-only script, per dataset size;
    and, on the largest, of the command with each codec that is fitted on the data.

    The commands run in turn, ``repeat`` rounds, and each ratio is the median of the per-round ratios: this
    machine's speed drifts by tens of percent over a minute, and a round's runs share the drift."""
    root = Path(tempfile.mkdtemp(prefix="rlft-bench-"))
    env = {**os.environ, "MINARI_DATASETS_PATH": str(root / "minari"), "OMP_NUM_THREADS": "1"}
    os.environ["MINARI_DATASETS_PATH"] = env["MINARI_DATASETS_PATH"]
    rlft = str(Path(sys.executable).with_name("rlft"))
    rows, codec_rows = [], []
    for steps in sizes:
        dataset_id = f"bench/halfcheetah{steps}-v0"
        make_minari(steps, dataset_id)
        serialize = [rlft, "data", "serialize", dataset_id, "--out", str(root / f"out{steps}"), "--overwrite"]
        commands = {
            "rlft": serialize,
            "plain": [sys.executable, "-c", PLAIN_SCRIPT, dataset_id, str(root / f"plain{steps}.parquet")],
            "read": [sys.executable, "-c", READ_ONLY_SCRIPT, dataset_id],
        }
        if steps == sizes[-1]:
            commands.update({label: serialize + args for label, args in FITTED_CODECS.items()})
        rounds = [{name: timed_process(cmd, env) for name, cmd in commands.items()} for _ in range(repeat)]
        wall = {name: np.array([r[name][0] for r in rounds]) for name in commands}
        rows.append((f"{steps:,} steps", {
            "rlft": float(np.median(wall["rlft"])), "plain": float(np.median(wall["plain"])),
            "ratio": float(np.median(wall["plain"] / wall["rlft"])), "read": float(np.median(wall["read"])),
            "ceiling": float(np.median(wall["plain"] / wall["read"])),
            "rss": max(r["rlft"][1] for r in rounds)}))
    for label in ["rlft", *FITTED_CODECS]:
        codec_rows.append(("raw (nothing fitted: one pass)" if label == "rlft" else label, {
            "seconds": float(np.median(wall[label])), "ratio": float(np.median(wall["plain"] / wall[label])),
            "rss": max(r[label][1] for r in rounds)}))
    return rows, codec_rows


def main() -> None:
    from bench_fixtures import print_tables
    from rlft.core.console import console
    from rlft.results.tables import column, table, write_benchmark

    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200_000, help="steps of the in-process comparison")
    parser.add_argument("--process-steps", default="1000,300000", help="dataset sizes of the whole-process runs")
    parser.add_argument("--repeat", type=int, default=7, help="whole-process rounds (medians are kept)")
    parser.add_argument("--no-write", action="store_true", help="print only, leave results/ as it is")
    args = parser.parse_args()
    rows = [(row["method"], {"rate": row["steps/s"], "ratio": row["ratio"]}) for row in in_process(args.steps)]
    tables = [table(f"method ({args.steps:,} steps, 17-dim obs, 6-dim action)",
                    [column("rate", "steps/s", ",.0f"), column("ratio", "speedup vs plain loop", "x")], rows)]
    rows = [(row["method"], {"rate": row["steps/s"], "ratio": row["ratio"]}) for row in in_process_dict(args.steps)]
    tables.append(table(f"structured observations ({args.steps:,} steps, PointMaze-shaped Dict, 2-dim action)",
                        [column("rate", "steps/s", ",.0f"), column("ratio", "speedup vs plain loop", "x")], rows))
    sizes = [int(s) for s in args.process_steps.split(",") if s]
    if sizes:
        rows, codec_rows = whole_process(sizes, args.repeat)
        tables.append(table("whole process (start-up included)",
                            [column("rlft", "rlft data serialize s", ".2f"), column("plain", "plain script s", ".2f"),
                             column("ratio", "speedup", "x"), column("read", "read-only script s", ".2f"),
                             column("ceiling", "plain / read-only", "x"), column("rss", "rlft peak RSS MB", ".0f")],
                            rows))
        tables.append(table(f"rlft data serialize --format, {sizes[-1]:,} steps, whole process",
                            [column("seconds", "s", ".2f"), column("ratio", "speedup vs plain script (raw)", "x"),
                             column("rss", "peak RSS MB", ".0f")], codec_rows))
        tables.append(table(f"reading the {sizes[-1]:,}-step dataset's episodes (in process)",
                            [column("seconds", "seconds", ".3f"), column("ratio", "speedup", "x")],
                            reading(f"bench/halfcheetah{sizes[-1]}-v0", args.repeat)))
    print_tables(tables)
    if not args.no_write:
        write_benchmark(OUT, "Serialization: prompt/completion records", tables,
                        "python benchmarks/serialize.py",
                        description="rlft's vectorised records per codec against a plain per-step f-string loop on "
                                    "the same HalfCheetah-shaped data in one process (steady state, untimed "
                                    "warm-up); then whole commands, medians of "
                                    f"{args.repeat} rounds (ratios: median of the per-round ratios): "
                                    "`rlft data serialize` of a Minari HDF5 dataset against a plain "
                                    "script that opens it with minari, writes one f-string prompt per step and "
                                    "saves Parquet with pandas; the read-only script only imports minari and reads "
                                    "every episode, the floor any Minari-based serializer pays (plain / read-only is "
                                    "the speedup a serializer costing nothing more would reach); the --format "
                                    "table: the command per codec against the same plain script (raw reads the "
                                    "episodes once; the codecs fitted on the data read them in two passes, fit "
                                    "then encode)")
        console.print(f"-> {OUT}")


if __name__ == "__main__":
    main()
