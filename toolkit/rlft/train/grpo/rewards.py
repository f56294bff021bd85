"""Control rewards for GRPO, all driven by the dataset's codec (never by re-parsing text by hand).

TRL calls each reward as ``f(prompts=..., completions=..., completion_ids=..., **columns)`` where every other
dataset column arrives as a list with one entry per completion. Each reward here is a callable object with a
``__name__`` (TRL logs ``rewards/<name>/mean``), the dataset ``columns`` it needs, and documented bounds
``[low, high]``. Every value is finite and inside its bounds: a completion the codec cannot decode gets
``low``, never an exception, NaN or an unbounded number.

=============  ====================================================================  ==========  ===========
name           value                                                                 bounds      columns
=============  ====================================================================  ==========  ===========
format         1 if the completion decodes to a valid action with the codec, else 0  [0, 1]      (none)
bc             closeness to the dataset action. Discrete: 1 for the dataset action   [0, 1]      action
               (or any action in ``optimal_actions`` when the row has that column),
               else 0. Box: mean over dimensions of ``1 - |a - a*| / (high - low)``
               clipped to [0, 1] (dimensions with an infinite bound use
               ``exp(-|a - a*|)``)
q-advantage    ``(1 - b) * (Q(a) - Qmin) / (Qmax - Qmin) + b * [a optimal]`` with   [0, 1]      q_values
               bonus ``b`` (default 0.1); an action is optimal when it is in the
               row's ``optimal_actions`` (ties: every tied action is optimal) or,
               without that column, within 1e-9 of Qmax. All Q equal: 1
env            the true environment reward of the action: the recorded state is      per env     observation
               restored into a real gymnasium env (``rlft.envs.state``) and the      (see        or state
               action taken; with ``horizon`` k > 1 the rollout continues k-1 steps  below)
               with a lookahead policy (``repeat`` the action, ``random``, an SB3
               checkpoint (``.zip``: the expert continues, so the value estimates
               the expert's Q(s, a)) or a callable), summing ``gamma**t r_t``.
               All actions from one state share the random numbers of their
               rollouts, and a repeated (state, action) pair its rollout (common
               random numbers: rewards differ by the action, not by luck). The sum is clipped to the env's
               bounds: per-step bounds ``[lo, hi]`` (FrozenLake and CartPole [0, 1],
               HalfCheetah [-20, 20], others [-100, 100], or ``bounds=``) give
               ``[min(lo, k*lo), max(hi, k*hi)]``; ``samples`` > 1 averages several
               seeded rollouts (slippery FrozenLake is stochastic)
critic         Q(s, a) of an offline critic (``rlft train offline``, ``--critic      Q range     observation
               RUN``): the minimum over its Q networks, in the data's reward units;  of the
               GRPO compares the answers to one state, so Q - V would give the same  data's
               advantages. No environment is stepped: any env, restorable or not     rows
=============  ====================================================================  ==========  ===========

Besides their own means, rewards report two rates through TRL's ``log_metric``: ``parse_rate`` (fraction of
completions that decode) and, when the dataset has ``optimal_actions``, ``optimal_action_rate`` (fraction whose
action is optimal, ties included). Several rewards log the same rate for the same completions, so TRL's mean
over them is that rate.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rlft.codecs.base import Codec
from rlft.codecs.structured import unflatten
from rlft.core.errors import InvalidInputError
from rlft.envs.state import LOOKAHEAD_POLICIES, state_kind, step_from_state
from rlft.sources.experts import load_expert
from rlft.train.grpo.reward_base import OPTIMAL_ATOL, Reward, _is_in, parse_names


class FormatReward(Reward):
    """1 if the completion decodes to a valid action with the codec's answer template, else 0."""

    name = "format"

    def score(self, action, row, index) -> float:
        return 1.0


def _whole_action(value, n: int) -> bool:
    try:
        return float(value) == int(value) and 0 <= int(value) < n
    except (TypeError, ValueError, OverflowError):
        return False


class BCReward(Reward):
    """Closeness of the decoded action to the dataset ``action`` (behaviour cloning as a reward)."""

    name = "bc"
    columns = (("action",),)
    scores_actions_offline = True

    def __init__(self, codec: Codec):
        super().__init__(codec)
        space = codec.action_space
        if space["type"] == "box":
            low, high = np.asarray(space["low"], np.float64), np.asarray(space["high"], np.float64)
            self.width = np.where(np.isfinite(low) & np.isfinite(high) & (high > low), high - low, np.inf)

    def preflight(self, rows) -> None:
        """Every recorded action must be one the codec's action space holds: one outside it (Discrete(2) data
        holding 99) would give every answer of its row the floor, a run that trains on nothing."""
        super().preflight(rows)
        if "action" not in getattr(rows, "column_names", ()):
            return
        space = self.codec.action_space
        if space["type"] == "discrete":
            n = int(space["n"])
            bad = [i for i, a in enumerate(rows["action"]) if not _whole_action(a, n)]
            what = f"integers 0..{n - 1}"
        else:
            width = int(np.prod(np.shape(space["low"]))) if np.shape(space["low"]) else 1
            arrays = (np.asarray(a, dtype=np.float64) for a in rows["action"])
            bad = [i for i, a in enumerate(arrays) if a.size != width or not np.all(np.isfinite(a))]
            what = f"{width} finite numbers"
        if bad:
            raise InvalidInputError(f"reward 'bc': {len(bad):,} recorded action(s) are not {what} of the codec's "
                                    f"action space (first at row {bad[0]}): every answer there would score the floor",
                                    hint="serialize the data again, or check the dataset's action column")

    def score(self, action, row, index) -> float:
        target = row["action"]
        if self.codec.is_discrete_action:
            if int(action) == int(target):
                return 1.0
            return 1.0 if row.get("optimal_actions") is not None and _is_in(action, row["optimal_actions"]) else 0.0
        a = np.asarray(action, dtype=np.float64).ravel()
        t = np.asarray(target, dtype=np.float64).ravel()
        if a.shape != t.shape or not np.all(np.isfinite(t)):
            return self.low
        d = np.abs(a - t)
        finite = np.isfinite(self.width)
        close = np.where(finite, 1.0 - d / np.where(finite, self.width, 1.0), np.exp(-d))
        return float(np.clip(close, 0.0, 1.0).mean())


class QAdvantageReward(Reward):
    """Normalized Q-advantage of the decoded action, with a bonus for an optimal action (ties included)."""

    name = "q-advantage"
    columns = (("q_values",),)

    def __init__(self, codec: Codec, bonus: float = 0.1):
        super().__init__(codec)
        if not 0.0 <= bonus <= 1.0:
            raise InvalidInputError(f"q-advantage bonus must be in [0, 1], got {bonus}")
        if not codec.is_discrete_action:
            raise InvalidInputError("the q-advantage reward needs a discrete action space")
        self.bonus = bonus

    def score(self, action, row, index) -> float:
        q = np.asarray(row["q_values"], dtype=np.float64).ravel()
        a = int(action)
        if not 0 <= a < len(q) or not np.all(np.isfinite(q)):
            return self.low
        q_min, q_max = q.min(), q.max()
        if q_max - q_min <= OPTIMAL_ATOL:
            return 1.0  # every action is equally good
        if row.get("optimal_actions") is not None:
            optimal = _is_in(a, row["optimal_actions"])
        else:
            optimal = q[a] >= q_max - OPTIMAL_ATOL
        norm = (q[a] - q_min) / (q_max - q_min)
        return min(1.0, (1.0 - self.bonus) * norm + self.bonus * float(optimal))


# Per-step reward bounds by env id prefix (the env reward clips its sums to these; see the module docstring).
ENV_STEP_BOUNDS: dict[str, tuple[float, float]] = {
    "FrozenLake": (0.0, 1.0),
    "CartPole": (0.0, 1.0),
    "HalfCheetah": (-20.0, 20.0),
    "PointMaze": (0.0, 1.0),  # sparse: 1 within 0.45 of the goal; dense: exp(-distance)
}
DEFAULT_STEP_BOUNDS = (-100.0, 100.0)


def step_bounds(env_id: str | None) -> tuple[float, float]:
    for prefix, bounds in ENV_STEP_BOUNDS.items():
        if env_id and env_id.startswith(prefix):
            return bounds
    return DEFAULT_STEP_BOUNDS


class EnvReward(Reward):
    """The real environment's reward for the decoded action from the recorded state (optionally k steps)."""

    name = "env"
    columns = (("observation", "state"),)

    def __init__(
        self,
        codec: Codec,
        horizon: int = 1,
        policy: str | Callable[[Any], Any] = "repeat",
        gamma: float = 1.0,
        samples: int = 1,
        seed: int = 0,
        bounds: tuple[float, float] | None = None,
    ):
        super().__init__(codec)

        if not codec.env_id:
            raise InvalidInputError("the env reward needs a codec that records its env id (codec.env_id)")
        if horizon < 1 or samples < 1:
            raise InvalidInputError(f"env reward: horizon and samples must be >= 1, got {horizon}, {samples}")
        if isinstance(policy, str) and policy not in LOOKAHEAD_POLICIES:
            policy = expert_lookahead(policy, codec.env_id)
        if not 0.0 < gamma <= 1.0:
            raise InvalidInputError(f"env reward gamma must be in (0, 1], got {gamma}")
        lo, hi = bounds if bounds is not None else step_bounds(codec.env_id)
        if not lo < hi:
            raise InvalidInputError(f"env reward bounds need low < high, got {bounds}")
        self.step_low, self.step_high = float(lo), float(hi)
        self.low, self.high = min(lo, horizon * lo), max(hi, horizon * hi)
        self.horizon, self.policy, self.gamma, self.samples, self.seed = horizon, policy, gamma, samples, seed
        self._env = None
        self._calls = 0
        self._shared: dict[tuple, float] = {}  # (state, action) -> value within the current batch

    @property
    def env(self):
        if self._env is None:
            self._env = self.codec.make_env()
        return self._env

    def preflight(self, rows) -> None:
        """The env must be one whose state can be restored from a row (refused by name), then the generic check."""
        try:
            state_kind(self.env)
        except InvalidInputError as exc:
            raise InvalidInputError(f"--reward env scores each answer by stepping {self.codec.env_id} from the row's "
                                    f"recorded state, and {exc.message}",
                                    hint="use --reward format,bc (the recorded action), or learn from the data with "
                                         "rlft train offline and rlft train sft --critic RUN") from exc
        super().preflight(rows)

    def __call__(self, *args, **kwargs) -> list[float]:
        self._calls += 1
        self._shared = {}
        return super().__call__(*args, **kwargs)

    def seed_for(self, state_key: str, sample: int) -> int:
        """The reset seed of one rollout: distinct per call, state and sample, reproducible from ``seed``. Every
        action from one state shares it (common random numbers: rewards differ by the action, not by luck)."""
        return (self.seed + 1_000_003 * self._calls + 1_009 * zlib.crc32(state_key.encode()) + sample) % 2**31

    def score(self, action, row, index) -> float:
        state = row["observation"] if "observation" in row else row["state"]
        if getattr(self.codec, "structure", None):  # a Dict observation is stored as its flat row of values
            state = unflatten(self.codec.observation_space, np.asarray(state, dtype=np.float64))
        key = (repr(state), repr(action))  # (state, action) pairs repeat in a group: one rollout each
        if key in self._shared:
            return self._shared[key]
        total = 0.0
        for sample in range(self.samples):
            result = step_from_state(
                self.env, state, action, horizon=self.horizon, policy=self.policy, gamma=self.gamma,
                seed=self.seed_for(key[0], sample),
            )
            total += result.reward
        self._shared[key] = total / self.samples
        return self._shared[key]

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None


def check_finite_q_values(rows, source: str) -> None:
    """The q-advantage reward scores a row with non-finite Q-values at its lowest value: refuse such data up front
    instead of training on a reward that is silently always 0 there."""
    q = rows["q_values"]
    bad = [i for i, values in enumerate(q) if not np.all(np.isfinite(np.asarray(values, dtype=np.float64)))]
    if bad:
        raise InvalidInputError(f"{source}: {len(bad)} training row(s) have non-finite q_values (first: row {bad[0]}, "
                                f"{list(q[bad[0]])}); the q-advantage reward would be 0 there",
                                hint="re-export the data with rlft data export-q")


def expert_lookahead(path: str, env_id: str) -> Callable[[Any], Any]:
    """``policy(observation) -> action`` of an SB3 checkpoint (deterministic), refused unless it acts in ``env_id``."""
    from pathlib import Path

    if not Path(path).is_file():
        raise InvalidInputError(f"env reward lookahead policy {path!r} is neither one of {LOOKAHEAD_POLICIES} nor "
                                "an SB3 checkpoint file", hint="e.g. --env-policy runs/expert/ppo.zip")
    model, metadata = load_expert(path)
    trained_on = metadata.get("env_id")
    if trained_on and trained_on != env_id:
        raise InvalidInputError(f"the lookahead expert {path} was trained on {trained_on}, the data is {env_id}")

    def act(observation):
        return model.predict(observation, deterministic=True)[0]

    return act


class CriticQReward(Reward):
    """Q(s, a) of an offline critic for the decoded action at the row's observation (module table)."""

    name = "critic"
    columns = (("observation",), ("action",))
    scores_actions_offline = True
    RANGE_ROWS = 2048  # rows whose recorded actions set the bounds

    def __init__(self, codec: Codec, critic: str | None = None):
        super().__init__(codec)
        if not critic:
            raise InvalidInputError("--reward critic needs --critic RUN (an rlft train offline run on this data)")
        from rlft.models.offline import load_checked_critic

        self.source = critic
        self.critic = load_checked_critic(critic, codec)
        self.low, self.high = -1e6, 1e6  # until preflight has seen the data's rows

    def score(self, action, row, index) -> float:
        obs = np.asarray(row["observation"], np.float32)[None]
        return float(self.critic.q(obs, np.asarray(action, np.float32).reshape(1, -1))[0])

    def preflight(self, rows) -> None:
        """The bounds: the Q range of the recorded actions on the first rows, widened by half its span each side
        (an answer the critic rates far outside what the data reached is clipped, not trusted)."""
        n = min(len(rows), self.RANGE_ROWS)
        if n:
            sample = rows.select(range(n)) if hasattr(rows, "select") else rows[:n]
            obs = np.asarray([r["observation"] for r in sample], np.float32)
            acts = np.asarray([r["action"] for r in sample], np.float32).reshape(n, -1)
            q = self.critic.q(obs, acts)
            if not np.isfinite(q).all():
                raise InvalidInputError(f"the critic {self.source} gives non-finite Q on the data's own actions")
            span = max(float(q.max() - q.min()), 1e-6)
            self.low, self.high = float(q.min() - span / 2), float(q.max() + span / 2)
        super().preflight(rows)


REWARDS: dict[str, type[Reward]] = {
    cls.name: cls for cls in (FormatReward, BCReward, QAdvantageReward, EnvReward, CriticQReward)
}


def parse_reward_names(text: str | Sequence[str]) -> list[str]:
    """``"format,q-advantage"`` (or a list) -> checked names, in order, without repeats."""
    return parse_names(text, list(REWARDS))


def build_rewards(
    names: str | Sequence[str],
    codec: Codec,
    columns: Sequence[str],
    options: dict[str, dict[str, Any]] | None = None,
) -> list[Reward]:
    """The rewards named in ``names`` for a dataset with ``columns``; ``options`` holds per-reward kwargs.

    Raises :class:`InvalidInputError` naming every reward whose columns the dataset lacks.
    """
    names = parse_reward_names(names)
    options = options or {}
    unknown_opts = sorted(set(options) - set(names))
    if unknown_opts:
        raise InvalidInputError(f"reward options given for rewards not in use: {unknown_opts}")
    problems = [
        f"reward {n!r} needs column {', '.join(REWARDS[n].missing_columns(columns))}"
        for n in names
        if REWARDS[n].missing_columns(columns)
    ]
    if problems:
        raise InvalidInputError(
            "; ".join(problems) + " which the dataset lacks",
            hint=f"dataset columns: {', '.join(columns)}",
        )
    rewards = []
    for n in names:
        try:
            rewards.append(REWARDS[n](codec, **options.get(n, {})))
        except TypeError as exc:
            raise InvalidInputError(f"bad options for reward {n!r}: {exc}") from exc
    return rewards
