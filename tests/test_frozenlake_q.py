"""Exact Q* for FrozenLake, checked against independent computations and known values."""

from __future__ import annotations

import numpy as np
import pytest

from rlft.datasets.frozenlake_q.solve import (
    TabularModel,
    bellman_residual,
    measure_success_rate,
    policy_evaluation,
    solve_q,
    success_probability,
)
from rlft.envs.frozenlake import LakeMap, load_map


def _solve(rows, slippery=True, gamma=0.99):
    lake = LakeMap("t", tuple(rows)) if isinstance(rows, list) else load_map(rows)
    env = lake.make_env(slippery)
    model = TabularModel.from_env(env)
    return lake, model, solve_q(model, gamma)


def test_known_value_4x4_slippery():
    lake, _, sol = _solve("4x4")
    assert sol.v[lake.start_state] == pytest.approx(0.542026, abs=5e-7)


@pytest.mark.parametrize("spec,slippery,gamma", [("4x4", True, 0.99), ("8x8", True, 0.95), ("8x8", False, 0.9),
                                                 ("4x4", True, 1.0)])
def test_bellman_residual_and_policy_evaluation_agree(spec, slippery, gamma):
    lake, model, sol = _solve(spec, slippery, gamma)
    assert bellman_residual(model, sol.q, gamma) < 1e-8
    # Independent check: the exact value of the greedy policy equals V*.
    if gamma < 1:
        v_pi = policy_evaluation(model, sol.greedy_policy(), gamma)
        np.testing.assert_allclose(v_pi, sol.v, atol=1e-9)
    # Terminal states have no value and every action ties there.
    for s in range(lake.n_states):
        if lake.is_terminal(s):
            assert sol.v[s] == 0.0


def test_value_iteration_alone_is_close_to_the_polished_solution():
    from rlft.datasets.frozenlake_q.solve import value_iteration

    _, model, sol = _solve("8x8")
    v, _ = value_iteration(model, 0.99, tol=1e-12)
    np.testing.assert_allclose(v, sol.v, atol=1e-9)


def test_deterministic_corridor_is_gamma_to_the_distance():
    lake, _, sol = _solve(["SFFFG"], slippery=False, gamma=0.9)
    # From cell c, the goal is 4 - c steps away; the reward 1 arrives on the last step: Q = gamma^(d-1).
    for c in range(4):
        d = 4 - c
        assert sol.q[c, 2] == pytest.approx(0.9 ** (d - 1), abs=1e-12)  # RIGHT
    assert list(sol.greedy_policy()[:4]) == [2, 2, 2, 2]


def test_deterministic_shortest_path_on_8x8():
    lake, _, sol = _solve("8x8", slippery=False, gamma=0.99)
    # The shortest path on gymnasium's 8x8 map is 14 moves (Manhattan distance, no hole in the way).
    assert sol.v[lake.start_state] == pytest.approx(0.99**13, abs=1e-12)


def test_ties_are_reported():
    _, _, sol = _solve("4x4")
    mask = sol.optimal_mask()
    # State 6 (row 1, col 2) of the slippery 4x4 map: LEFT and RIGHT are exactly tied.
    assert mask[6].tolist() == [True, False, True, False]


def test_measured_success_matches_exact_probability():
    lake, model, sol = _solve("4x4")
    policy = sol.greedy_policy()
    goal = np.array([c == "G" for c in "".join(lake.rows)])
    exact = success_probability(model, policy, lake.start_state, goal, 100)
    assert exact == pytest.approx(0.7402, abs=1e-3)
    measured = measure_success_rate(lambda: lake.make_env(True), policy, 1000, seed=0)
    assert abs(measured["success_rate"] - exact) < 4 * measured["success_rate_stderr"]


def test_gamma_outside_range_is_refused():
    from rlft.core.errors import InvalidInputError

    _, model, _ = _solve("4x4")
    for bad in (0.0, -0.1, 1.5, float("nan")):
        with pytest.raises(InvalidInputError, match="gamma"):
            solve_q(model, bad)
