"""Exact Q*(s, a) for FrozenLake: vectorised value iteration over ``env.unwrapped.P``, polished by an
exact linear solve of the greedy policy's value (policy evaluation), then checked by its Bellman residual."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlft.core.errors import InvalidInputError


@dataclass(frozen=True)
class TabularModel:
    """Dense transition tables padded to K outcomes per (s, a); ``prob`` is 0 on padding."""

    next_state: np.ndarray  # (S, A, K) int
    prob: np.ndarray  # (S, A, K) float
    reward: np.ndarray  # (S, A, K) float
    done: np.ndarray  # (S, A, K) bool: the episode ends on this transition, so no bootstrap

    @property
    def n_states(self) -> int:
        return self.next_state.shape[0]

    @property
    def n_actions(self) -> int:
        return self.next_state.shape[1]

    @classmethod
    def from_env(cls, env) -> TabularModel:
        """Read gymnasium's toy-text ``P[s][a] = [(p, s', r, done), ...]`` into arrays."""
        P = env.unwrapped.P  # noqa: N806 - gymnasium's name for the transition table
        n_s, n_a = len(P), len(P[0])
        k = max(len(P[s][a]) for s in range(n_s) for a in range(n_a))
        ns = np.zeros((n_s, n_a, k), dtype=np.int64)
        pr = np.zeros((n_s, n_a, k))
        rw = np.zeros((n_s, n_a, k))
        dn = np.ones((n_s, n_a, k), dtype=bool)
        for s in range(n_s):
            for a in range(n_a):
                for i, (p, s2, r, d) in enumerate(P[s][a]):
                    ns[s, a, i], pr[s, a, i], rw[s, a, i], dn[s, a, i] = s2, p, r, d
        return cls(ns, pr, rw, dn)

    def backup(self, v: np.ndarray, gamma: float) -> np.ndarray:
        """Q(s, a) = sum_k p_k (r_k + gamma * (1 - done_k) * V(s'_k)) for all s, a at once."""
        return np.sum(self.prob * (self.reward + gamma * ~self.done * v[self.next_state]), axis=-1)


@dataclass(frozen=True)
class QSolution:
    q: np.ndarray  # (S, A)
    v: np.ndarray  # (S,)
    gamma: float
    iterations: int
    residual: float  # max |Q - backup(max_a Q)|
    method: str

    def optimal_mask(self, atol: float = 1e-9) -> np.ndarray:
        """All actions within ``atol`` of the best: ties are real and every tied action is optimal."""
        return self.q >= self.q.max(axis=1, keepdims=True) - atol

    def greedy_policy(self) -> np.ndarray:
        """The first optimal action of each state (gymnasium's action order breaks ties)."""
        return self.q.argmax(axis=1)


def check_gamma(gamma: float) -> float:
    if not (0.0 < gamma <= 1.0) or not np.isfinite(gamma):
        raise InvalidInputError(f"gamma must be in (0, 1], got {gamma}")
    return float(gamma)


def value_iteration(
    model: TabularModel, gamma: float, tol: float = 1e-10, max_iterations: int = 1_000_000
) -> tuple[np.ndarray, int]:
    """Iterate V <- max_a backup(V) until the largest change is below ``tol``; return (V, iterations)."""
    v = np.zeros(model.n_states)
    for it in range(1, max_iterations + 1):
        v_new = model.backup(v, gamma).max(axis=1)
        delta = np.max(np.abs(v_new - v))
        v = v_new
        if delta < tol:
            return v, it
    return v, max_iterations


def policy_evaluation(model: TabularModel, policy: np.ndarray, gamma: float) -> np.ndarray:
    """Exact V^pi by solving (I - gamma P_pi) V = R_pi (sparse LU: a 64x64 map has 4,096 states but only
    3 successors per state). Raises ``np.linalg.LinAlgError`` if the system is singular (gamma = 1 loops)."""
    import warnings

    from scipy import sparse
    from scipy.sparse.linalg import MatrixRankWarning, spsolve

    n = model.n_states
    s_idx = np.arange(n)
    ns, pr = model.next_state[s_idx, policy], model.prob[s_idx, policy]
    rw, dn = model.reward[s_idx, policy], model.done[s_idx, policy]
    r_pi = np.sum(pr * rw, axis=1)
    p_pi = sparse.csr_matrix(((pr * ~dn).ravel(), (np.repeat(s_idx, ns.shape[1]), ns.ravel())), shape=(n, n))
    with warnings.catch_warnings():
        warnings.simplefilter("error", MatrixRankWarning)
        try:
            v = spsolve((sparse.identity(n, format="csc") - gamma * p_pi).tocsc(), r_pi)
        except MatrixRankWarning as exc:
            raise np.linalg.LinAlgError("singular policy-evaluation system") from exc
    if not np.all(np.isfinite(v)):
        raise np.linalg.LinAlgError("singular policy-evaluation system")
    return v


def solve_q(model: TabularModel, gamma: float, tol: float = 1e-10) -> QSolution:
    """Q* by value iteration, then polished to machine precision by exact evaluation of its greedy policy.

    The polish is kept only if it does not increase the Bellman optimality residual (with gamma = 1 the
    linear system can be singular; the value-iteration answer is kept then).
    """
    gamma = check_gamma(gamma)
    v, iterations = value_iteration(model, gamma, tol)
    q = model.backup(v, gamma)
    method = f"value iteration (tol {tol:g})"
    residual = bellman_residual(model, q, gamma)
    try:
        v_exact = policy_evaluation(model, q.argmax(axis=1), gamma)
        q_exact = model.backup(v_exact, gamma)
        res_exact = bellman_residual(model, q_exact, gamma)
        if np.all(np.isfinite(q_exact)) and res_exact <= residual:
            q, residual, method = q_exact, res_exact, method + " + exact linear solve of the greedy policy"
    except np.linalg.LinAlgError:
        pass
    return QSolution(q=q, v=q.max(axis=1), gamma=gamma, iterations=iterations, residual=residual, method=method)


def bellman_residual(model: TabularModel, q: np.ndarray, gamma: float) -> float:
    """max |Q - T Q| where T is the Bellman optimality operator."""
    return float(np.max(np.abs(q - model.backup(q.max(axis=1), gamma))))


def success_probability(model: TabularModel, policy: np.ndarray, start: int, goal_mask: np.ndarray, horizon: int):
    """Exact probability that ``policy`` reaches a goal state within ``horizon`` steps (finite-horizon DP)."""
    s_idx = np.arange(model.n_states)
    ns, pr, dn = model.next_state[s_idx, policy], model.prob[s_idx, policy], model.done[s_idx, policy]
    reach = np.zeros(model.n_states)  # probability of success with h steps left
    for _ in range(horizon):
        hit = goal_mask[ns].astype(float)
        reach = np.sum(pr * np.where(dn, hit, reach[ns]), axis=1)
    return float(reach[start])


def measure_success_rate(make_env, policy: np.ndarray, episodes: int, seed: int, on_episode=None) -> dict:
    """Run ``policy`` (state -> action) in the real environment; success = an episode ending with reward > 0."""
    env = make_env()
    successes, lengths = 0, []
    try:
        for ep in range(episodes):
            state, _ = env.reset(seed=seed + ep)
            steps, done = 0, False
            while not done:
                state, reward, terminated, truncated, _ = env.step(int(policy[state]))
                steps += 1
                done = terminated or truncated
            successes += int(reward > 0)
            lengths.append(steps)
            if on_episode is not None:
                on_episode()
    finally:
        env.close()
    rate = successes / episodes
    return {
        "episodes": episodes,
        "seed": seed,
        "success_rate": rate,
        "success_rate_stderr": float(np.sqrt(rate * (1 - rate) / episodes)),
        "mean_episode_length": float(np.mean(lengths)),
    }
