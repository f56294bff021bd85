"""Seconds per exact FrozenLake solve on random maps 8x8..64x64, against a plain per-state Python loop.

Run: ``.venv/bin/python benchmarks/value_iteration.py``. Maps come from gymnasium's ``generate_random_map``
(seeded); both solvers run in this process on the same transition tables with the same tolerance. The table is
also written to ``results/benchmarks/value_iteration.json`` (rendered into the README by ``rlft results render``).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from gymnasium.envs.toy_text.frozen_lake import generate_random_map  # noqa: E402

from rlft.datasets.frozenlake_q.solve import TabularModel, solve_q  # noqa: E402
from rlft.envs.frozenlake import LakeMap  # noqa: E402

GAMMA, TOL = 0.99, 1e-10
OUT = Path(__file__).resolve().parents[1] / "results" / "benchmarks" / "value_iteration.json"


def plain_value_iteration(P, gamma: float, tol: float) -> np.ndarray:  # noqa: N803 - gymnasium's name
    """The textbook loop over P[s][a] (baseline)."""
    v = [0.0] * len(P)
    while True:
        delta, new = 0.0, [0.0] * len(P)
        for s in range(len(P)):
            best = max(
                sum(p * (r + (0.0 if d else gamma * v[s2])) for p, s2, r, d in P[s][a]) for a in range(len(P[s]))
            )
            new[s] = best
            delta = max(delta, abs(best - v[s]))
        v = new
        if delta < tol:
            return np.array(v)


def timed(fn, repeat: int = 3) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    from rlft.core.console import console
    from rlft.results.render import table_markdown
    from rlft.results.tables import column, table, write_benchmark

    rows = []
    for size in (8, 16, 32, 64):
        lake = LakeMap(f"random{size}", tuple(generate_random_map(size=size, p=0.8, seed=size)))
        env = lake.make_env(True)
        model = TabularModel.from_env(env)
        t_rlft, sol = timed(lambda model=model: solve_q(model, GAMMA, TOL))
        t_plain, v_plain = timed(lambda env=env: plain_value_iteration(env.unwrapped.P, GAMMA, TOL), repeat=1)
        rows.append((f"{size}x{size}", {"states": lake.n_states, "sweeps": sol.iterations, "rlft": t_rlft,
                                        "plain": t_plain, "speedup": t_plain / t_rlft,
                                        "max_dv": float(np.max(np.abs(sol.v - v_plain)))}))
        env.close()
    result = table("map", [column("states", "states", ",d"), column("sweeps", "sweeps", "d"),
                           column("rlft", "rlft s/solve", ".3f"), column("plain", "plain loop s/solve", ".2f"),
                           column("speedup", "speedup", "x"), column("max_dv", "max abs(V diff)", ".0e")], rows)
    console.print("\n".join(table_markdown(result)), markup=False, highlight=False)
    write_benchmark(OUT, f"Exact FrozenLake Q* on random maps (slippery, gamma {GAMMA}, tolerance {TOL:g})", [result],
                    "python benchmarks/value_iteration.py",
                    description="rlft's vectorised value iteration against the textbook per-state loop over "
                                "P[s][a], same maps (generate_random_map, p=0.8, seeded) and tolerance, same process; "
                                "rlft best of 3 runs, the loop 1 run")
    console.print(f"-> {OUT}")


if __name__ == "__main__":
    main()
