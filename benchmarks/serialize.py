"""Serialization speed: rlft's vectorised records per codec against a plain per-step f-string loop, same data,
same process, printed as ratios; then the end-to-end `rlft data serialize` of a 1M-step HalfCheetah-shaped
Minari dataset with its wall time and peak memory (measured in a child process).

Run: ``.venv/bin/python benchmarks/serialize.py [--steps 200000] [--full-steps 1000000]``; the tables are also
written to ``results/benchmarks/serialize.json`` (rendered into the README by ``rlft results render``).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

OBS_DIM, ACT_DIM, EPISODE = 17, 6, 1000
OUT = Path(__file__).resolve().parents[1] / "results" / "benchmarks" / "serialize.json"


def synthetic(steps: int, seed: int = 0):
    from rlft.records.offline import EpisodeChunk

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
    from rlft.records.offline import build_records

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


def synthetic_slice(chunk, a: int, b: int):
    from rlft.records.offline import EpisodeChunk

    return EpisodeChunk(*(getattr(chunk, f)[a:b] for f in ("observations", "actions", "rewards", "terminated",
                                                            "truncated", "episode_id", "step")))


CHILD = """
import json, os, resource, sys, time
from rlft.hub.serialize import SerializeConfig, serialize
t0 = time.perf_counter()
summary = serialize(SerializeConfig(source=sys.argv[1], out=sys.argv[2], format=sys.argv[3], overwrite=True))
wall = time.perf_counter() - t0
print("RESULT", json.dumps({"wall_s": wall, "steps": summary["steps"],
      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def end_to_end(steps: int, fmt: str) -> dict:
    import gymnasium as gym
    import minari
    from minari.data_collector.episode_buffer import EpisodeBuffer

    root = Path(tempfile.mkdtemp(prefix="rlft-bench-"))
    os.environ["MINARI_DATASETS_PATH"] = str(root / "minari")
    rng = np.random.default_rng(0)
    buffers = [
        EpisodeBuffer(id=e, observations=rng.standard_normal((EPISODE + 1, OBS_DIM)),
                      actions=rng.uniform(-1, 1, (EPISODE, ACT_DIM)).astype(np.float32),
                      rewards=rng.standard_normal(EPISODE), terminations=np.zeros(EPISODE, bool),
                      truncations=np.r_[np.zeros(EPISODE - 1, bool), True])
        for e in range(steps // EPISODE)
    ]
    minari.create_dataset_from_buffers("bench/halfcheetah-v0", buffers, env=gym.make("HalfCheetah-v5"),
                                       ref_min_score=-280.178953, ref_max_score=12135.0)
    del buffers
    out = subprocess.run([sys.executable, "-c", CHILD, "bench/halfcheetah-v0", str(root / "out"), fmt],
                         capture_output=True, text=True, env=os.environ, check=True).stdout
    line = next(s for s in out.splitlines() if s.startswith("RESULT"))
    return json.loads(line[len("RESULT "):])


def main() -> None:
    from rlft.core.console import console
    from rlft.results.render import table_markdown
    from rlft.results.tables import column, table, write_benchmark

    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--full-steps", type=int, default=1_000_000)
    parser.add_argument("--no-write", action="store_true", help="print only, leave results/ as it is")
    args = parser.parse_args()
    rows = [(row["method"], {"rate": row["steps/s"], "ratio": row["ratio"]}) for row in in_process(args.steps)]
    tables = [table(f"method ({args.steps:,} steps, 17-dim obs, 6-dim action)",
                    [column("rate", "steps/s", ",.0f"), column("ratio", "speedup vs plain loop", "x")], rows)]
    if args.full_steps:
        result = end_to_end(args.full_steps, "raw")
        tables.append(table("end to end (HDF5 -> Parquet, raw codec)",
                            [column("steps", "steps", ",d"), column("wall", "wall s", ".1f"),
                             column("rate", "steps/s", ",.0f"), column("rss", "peak RSS MB", ".0f")],
                            [("rlft data serialize", {"steps": result["steps"], "wall": result["wall_s"],
                                                      "rate": result["steps"] / result["wall_s"],
                                                      "rss": result["peak_rss_mb"]})]))
    for t in tables:
        console.print("\n".join(table_markdown(t)), markup=False, highlight=False)
    if not args.no_write:
        write_benchmark(OUT, "Serialization: prompt/completion records", tables,
                        "python benchmarks/serialize.py",
                        description="rlft's vectorised records per codec against a plain per-step f-string loop "
                                    "on the same HalfCheetah-shaped data in one process (steady state, untimed "
                                    "warm-up); then the whole rlft data serialize of a "
                                    f"{args.full_steps:,}-step Minari HDF5 dataset in a child process")
        console.print(f"-> {OUT}")


if __name__ == "__main__":
    main()
