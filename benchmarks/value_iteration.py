"""Seconds per exact FrozenLake solve on random maps 8x8..64x64, against a plain per-state Python loop.

Run: ``.venv/bin/python benchmarks/value_iteration.py``. Maps come from gymnasium's ``generate_random_map``
(seeded); both solvers run in this process on the same transition tables with the same tolerance.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import time  # noqa: E402

import numpy as np  # noqa: E402
from gymnasium.envs.toy_text.frozen_lake import generate_random_map  # noqa: E402

from rlft.envs.frozenlake import LakeMap  # noqa: E402
from rlft.sources.frozenlake_q import TabularModel, solve_q  # noqa: E402

GAMMA, TOL = 0.99, 1e-10


def plain_value_iteration(P, gamma: float, tol: float) -> np.ndarray:
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
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"FrozenLake exact Q* (slippery, gamma {GAMMA}, tol {TOL:g})")
    for col in ("map", "states", "sweeps", "rlft s/solve", "plain loop s/solve", "speedup", "max |dV|"):
        table.add_column(col, justify="right")
    for size in (8, 16, 32, 64):
        lake = LakeMap(f"random{size}", tuple(generate_random_map(size=size, p=0.8, seed=size)))
        env = lake.make_env(True)
        model = TabularModel.from_env(env)
        t_rlft, sol = timed(lambda model=model: solve_q(model, GAMMA, TOL))
        t_plain, v_plain = timed(lambda env=env: plain_value_iteration(env.unwrapped.P, GAMMA, TOL), repeat=1)
        table.add_row(
            f"{size}x{size}", str(lake.n_states), str(sol.iterations), f"{t_rlft:.4f}", f"{t_plain:.3f}",
            f"{t_plain / t_rlft:.0f}x", f"{np.max(np.abs(sol.v - v_plain)):.1e}",
        )
        env.close()
    Console().print(table)


if __name__ == "__main__":
    main()
