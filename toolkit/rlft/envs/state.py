"""Put a real gymnasium environment into a recorded state, so the true reward of any action can be measured.

Supported environments, each restored from what a dataset row records:

* FrozenLake (toy-text): the state is the observation itself (the cell index).
* CartPole (classic control): the observation *is* the state ``(x, x_dot, theta, theta_dot)``.
* PointMaze (gymnasium-robotics, Dict observations): ``observation`` is the ball's ``qpos`` then ``qvel`` and
  ``desired_goal`` the goal; both are set, then the recomputed observation is compared with the recorded one.
* MuJoCo locomotion (HalfCheetah, Hopper, Walker2d, Swimmer, ...): the observation is ``qpos[k:]`` followed by
  ``qvel``, where the first ``k`` coordinates (the x, or x and y, position) are left out of the observation.
  Those coordinates do not enter the dynamics or the reward (the forward reward is a difference of x before and
  after the step), so they are set to the model's initial values. After restoring, the observation is
  recomputed and compared with the recorded one: environments whose observation does not determine the
  state (clipped velocities such as Hopper's at |v| > 10, contact forces, sin/cos encodings) are refused
  with a clear error rather than silently restored wrong.

Every restore first calls ``env.reset(seed=seed)``: the environment's random generator (FrozenLake's slippery
ice) is then seeded, so two restores with the same seed and actions give the same transitions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlft.core.errors import InvalidInputError

# A restored MuJoCo state must reproduce the recorded observation up to float32 rounding of stored data.
_OBS_RTOL = 1e-4
_OBS_ATOL = 1e-4


def _unwrapped(env):
    return getattr(env, "unwrapped", env)


def _env_name(env) -> str:
    spec = getattr(env, "spec", None)
    return spec.id if spec is not None else type(_unwrapped(env)).__name__


def state_kind(env) -> str:
    """``frozenlake``, ``cartpole`` or ``mujoco`` for a supported environment; InvalidInputError otherwise."""
    base = _unwrapped(env)
    name = type(base).__name__
    if name == "FrozenLakeEnv":
        return "frozenlake"
    if name == "CartPoleEnv":
        return "cartpole"
    if name == "PointMazeEnv":
        return "pointmaze"
    if hasattr(base, "set_state") and hasattr(base, "model") and hasattr(base, "data"):
        return "mujoco"
    raise InvalidInputError(
        f"cannot restore a recorded state into {_env_name(env)}",
        hint="supported: FrozenLake, CartPole, PointMaze and MuJoCo locomotion envs (HalfCheetah, Hopper, ...)",
    )


def _restore_mujoco(env, observation: np.ndarray) -> None:
    base = _unwrapped(env)
    nq, nv = int(base.model.nq), int(base.model.nv)
    obs = np.asarray(observation, dtype=np.float64).ravel()
    hidden = nq + nv - obs.size  # positions left out of the observation (x, or x and y)
    if not 0 <= hidden <= nq:
        raise InvalidInputError(
            f"{_env_name(env)}: an observation of {obs.size} values cannot be qpos[k:] + qvel "
            f"(nq={nq}, nv={nv})"
        )
    qpos = np.array(base.init_qpos, dtype=np.float64).ravel().copy()
    qpos[hidden:] = obs[: nq - hidden]
    qvel = obs[nq - hidden :].copy()
    base.set_state(qpos, qvel)
    again = np.asarray(base._get_obs(), dtype=np.float64).ravel()
    if again.shape != obs.shape or not np.allclose(again, obs, rtol=_OBS_RTOL, atol=_OBS_ATOL):
        worst = int(np.argmax(np.abs(again - obs))) if again.shape == obs.shape else -1
        raise InvalidInputError(
            f"{_env_name(env)}: the observation does not determine the simulator state "
            f"(restored observation differs at index {worst})",
            hint="its observation clips velocities or holds values that are not qpos/qvel",
        )


def _restore_pointmaze(env, observation) -> dict:
    base = _unwrapped(env)
    try:
        point = np.asarray(observation["observation"], dtype=np.float64).ravel()
        goal = np.asarray(observation["desired_goal"], dtype=np.float64).ravel()
    except (KeyError, TypeError, IndexError) as exc:
        raise InvalidInputError(f"{_env_name(env)}: the state is a dict with observation and desired_goal, got "
                                f"{type(observation).__name__}") from exc
    if point.shape != (4,) or goal.shape != (2,) or not (np.isfinite(point).all() and np.isfinite(goal).all()):
        raise InvalidInputError(f"{_env_name(env)}: observation must be 4 finite numbers and desired_goal 2")
    base.goal = goal.copy()
    base.update_target_site_pos()
    base.point_env.set_state(point[:2], point[2:])
    restored = base._get_obs(base.point_env._get_obs()[0])
    if not np.allclose(restored["observation"], point, rtol=_OBS_RTOL, atol=_OBS_ATOL):
        raise InvalidInputError(f"{_env_name(env)}: the recorded observation could not be restored")
    return restored


def restore_state(env, observation, seed: int | None = None):
    """Reset ``env`` (seeded) and set its state to the one ``observation`` records; return the observation.

    ``observation`` is a FrozenLake cell index, a CartPole 4-vector, or a MuJoCo observation (see the module
    docstring). Raises :class:`InvalidInputError` for unsupported environments or observations.
    """
    kind = state_kind(env)
    env.reset(seed=seed)
    base = _unwrapped(env)
    if kind == "frozenlake":
        value = np.asarray(observation).ravel()
        if value.size != 1 or value[0] != int(value[0]) or not 0 <= int(value[0]) < base.observation_space.n:
            raise InvalidInputError(
                f"FrozenLake state must be one integer in 0..{base.observation_space.n - 1}, got {observation!r}"
            )
        base.s = int(value[0])
        base.lastaction = None
        return int(base.s)
    if kind == "cartpole":
        state = np.asarray(observation, dtype=np.float64).ravel()
        if state.shape != (4,) or not np.all(np.isfinite(state)):
            raise InvalidInputError(f"CartPole state must be 4 finite numbers, got {observation!r}")
        base.state = state
        base.steps_beyond_terminated = None
        return np.array(state, dtype=np.float32)
    if kind == "pointmaze":
        return _restore_pointmaze(env, observation)
    obs = np.asarray(observation, dtype=np.float64)
    if not np.all(np.isfinite(obs)):
        raise InvalidInputError(f"{_env_name(env)}: observation holds NaN or inf")
    _restore_mujoco(env, obs)
    return np.asarray(base._get_obs())


Policy = Callable[[Any], Any]
LOOKAHEAD_POLICIES = ("repeat", "random")


@dataclass
class StepResult:
    """What stepping from a restored state gave: the (discounted) reward sum and the number of steps taken."""

    reward: float
    steps: int
    terminated: bool


def step_from_state(
    env,
    observation,
    action,
    horizon: int = 1,
    policy: str | Policy = "repeat",
    gamma: float = 1.0,
    seed: int | None = None,
) -> StepResult:
    """Restore ``observation``, take ``action``, then continue ``horizon - 1`` steps with ``policy``.

    ``policy`` is ``"repeat"`` (keep taking ``action``), ``"random"`` (the action space's sampler, seeded with
    ``seed``) or a callable ``policy(observation) -> action``. The result is the sum of ``gamma**t * r_t``
    over the steps taken; the rollout stops early when the episode terminates or is truncated.
    """
    if horizon < 1:
        raise InvalidInputError(f"horizon must be at least 1, got {horizon}")
    if isinstance(policy, str) and policy not in LOOKAHEAD_POLICIES:
        raise InvalidInputError(f"lookahead policy must be one of {LOOKAHEAD_POLICIES} or a callable, got {policy!r}")
    restore_state(env, observation, seed=seed)
    if policy == "random":
        env.action_space.seed(seed)
    total, discount, steps, terminated = 0.0, 1.0, 0, False
    current = action
    for t in range(horizon):
        obs, reward, terminated, truncated, _ = env.step(current)
        total += discount * float(reward)
        discount *= gamma
        steps = t + 1
        if terminated or truncated or steps == horizon:
            break
        if policy == "repeat":
            current = action
        elif policy == "random":
            current = env.action_space.sample()
        else:
            current = policy(obs)
    return StepResult(total, steps, bool(terminated))


def lookahead_values(envs: list, observation, candidates: np.ndarray, act, horizon: int, gamma: float) -> np.ndarray:
    """``Q_k(s, c)`` of each candidate action (one env each): played from ``observation``, then ``act(obs_batch)``
    for ``horizon - 1`` steps, all envs in lockstep; an env whose episode ends stops adding reward."""
    for env in envs:
        restore_state(env, observation, seed=0)
    values = np.zeros(len(envs))
    alive = np.ones(len(envs), dtype=bool)
    actions, discount = candidates, 1.0
    for t in range(horizon):
        observations = []
        for j, env in enumerate(envs):
            if alive[j]:
                obs, reward, terminated, truncated, _ = env.step(actions[j])
                values[j] += discount * float(reward)
                alive[j] = not (terminated or truncated)
                observations.append(obs)
            else:  # the expert still needs a full batch; an ended env's reward no longer counts
                observations.append(observations[-1] if observations else np.asarray(observation))
        discount *= gamma
        if t + 1 < horizon and alive.any():
            actions = act(np.stack(observations))
    return values


def perturbation_values(envs: list, observation, action: np.ndarray, rng, noise: float, low, high, act,
                        horizon: int, gamma: float, mirrored: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(proposals, values): ``action`` and ``len(envs) - 1`` Gaussian perturbations of it (std ``noise`` of each
    dimension's half-range), unclipped, and the :func:`lookahead_values` of their clipped versions (what the env
    plays). ``mirrored`` draws them in opposite pairs (``len(envs) - 1`` even): their plain mean is ``action``, so
    a weighted mean of them moves only as far as the values differ. ``rlft data improve`` and ``rlft eval
    --search`` both score their candidates this way."""
    action = np.asarray(action, dtype=np.float32)
    scale = noise * (np.asarray(high) - np.asarray(low)) / 2
    if mirrored:
        if (len(envs) - 1) % 2:
            raise InvalidInputError(f"mirrored perturbations come in opposite pairs beside the action: they need an "
                                    f"odd number of candidates, got {len(envs)}")
        half = scale * rng.standard_normal(((len(envs) - 1) // 2, action.size))
        draws = np.concatenate([half, -half])
    else:
        draws = scale * rng.standard_normal((len(envs) - 1, action.size))
    proposals = np.concatenate([action[None], action + draws])
    values = lookahead_values(envs, np.asarray(observation, dtype=np.float64),
                              np.clip(proposals, low, high).astype(np.float32), act, horizon, gamma)
    return proposals, values
