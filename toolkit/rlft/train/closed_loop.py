"""The closed-loop check: a few episodes of the dataset's environment played by the model being trained.

Held-out accuracy and action error grade one decision at a time; a policy lives or dies by its mistakes
compounding over an episode (Pendulum was 94% "accurate" at random level; HalfCheetah's rare failed episodes cost
more than its mean error). :class:`ReturnCheck` plays ``episodes`` episodes through :mod:`rlft.policy` (the codec's
prompts, the decision check's decoding, the rollout loop ``rlft eval`` uses) every time the decision check runs,
and the stage logs ``check_return`` beside the accuracy; with a target it stops training once the mean return
reaches it. Its episodes are seeded apart from ``rlft eval``'s (``CHECK_SEED_OFFSET``), so stopping on them does
not select on the episodes that are reported.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlft.codecs.base import Codec
from rlft.core.errors import InvalidInputError
from rlft.envs.registry import normalized_score
from rlft.policy.llm_policy import LLMPolicy
from rlft.policy.policies import default_action
from rlft.policy.rollout import rollout

CHECK_SEED_OFFSET = 1_000_000  # check episode i of seed s: CHECK_SEED_OFFSET + 1000 * s + i (eval: 1000 * s + i)
MAX_CHECK_ENVS = 10  # check episodes played at once (one batched generate call per step)


@dataclass
class ReturnCheck:
    """What the closed-loop check plays and when it counts as reached."""

    codec: Codec
    episodes: int
    seed: int = 0
    max_episode_steps: int | None = None
    target: float | None = None

    def __post_init__(self):
        if self.episodes < 1:
            raise InvalidInputError(f"--check-episodes must be at least 1, got {self.episodes}")
        if self.max_episode_steps is not None and self.max_episode_steps < 1:
            raise InvalidInputError(f"--check-max-episode-steps must be at least 1, got {self.max_episode_steps}")
        if not self.codec.env_id:
            raise InvalidInputError("--check-episodes needs the environment, and this dataset's codec records none",
                                    hint="datasets written by rlft data serialize / export-q record it")
        if self.codec.template.return_to_go:
            raise InvalidInputError("--check-episodes does not play return-to-go prompts (they need a target "
                                    "return)", hint="check such a run with rlft eval --target-return R")

    @property
    def first_seed(self) -> int:
        return CHECK_SEED_OFFSET + 1000 * self.seed

    def play(self, model, backend) -> dict[str, Any]:
        """Play the check episodes with ``backend`` (a generation backend over ``model``, in eval mode) and
        return the logged figures: mean, min and normalized return, mean length, share of invalid answers."""

        steps = {"max_episode_steps": self.max_episode_steps} if self.max_episode_steps else {}
        probe = self.codec.make_env(**steps)
        space = probe.action_space
        probe.close()
        fallback = default_action(space)
        policy = LLMPolicy(self.codec, backend, fallback, space)
        env_fns = [lambda: self.codec.make_env(**steps)] * min(self.episodes, MAX_CHECK_ENVS)
        start = time.perf_counter()
        result = rollout(policy, env_fns, self.episodes, self.first_seed, fallback)
        seconds = time.perf_counter() - start
        returns = np.array([e.episode_return for e in result.episodes], dtype=float)
        self.last_returns = returns  # each episode's, in seed order: the next check plays the same seeds (paired)
        figures = {"check_return": float(returns.mean()), "check_return_min": float(returns.min()),
                   "check_return_stderr": float(returns.std(ddof=1) / np.sqrt(len(returns))) if len(returns) > 1
                   else 0.0,
                   "check_length": float(np.mean([e.length for e in result.episodes])),
                   "check_invalid_rate": policy.invalid / max(1, policy.decisions),
                   # the rollout speed RL pays for: the LLM policy's env steps/s over min(episodes, 10) envs at once
                   "check_env_steps_per_second": sum(e.length for e in result.episodes) / max(seconds, 1e-9),
                   "check_envs": len(env_fns)}
        score = normalized_score(self.codec.env_id, figures["check_return"])
        if score is not None and self.max_episode_steps is None:  # references are for whole episodes
            figures["check_normalized_score"] = score
        return figures

    @staticmethod
    def fell(start: dict[str, Any], now: dict[str, Any]) -> float | None:
        """The noise band ``now`` fell below, when its mean return is below the start's by more than twice the
        standard error of their difference (the same seeds are played each time, so the band is conservative);
        None when it did not fall."""
        band = 2.0 * float(np.hypot(start.get("check_return_stderr", 0.0), now.get("check_return_stderr", 0.0)))
        return band if now["check_return"] < start["check_return"] - band else None

    @staticmethod
    def beats(kept: np.ndarray, now: np.ndarray) -> bool:
        """``now`` beats ``kept`` (returns of the same seeds) by more than twice the standard error of their paired
        difference: measured on Pendulum (row 11e, seed 2), keeping any higher mean kept a check 12 better on its 10
        episodes that was 13 worse on the 50 reported ones; a lucky episode is not an improvement."""
        diff = np.asarray(now, dtype=float) - np.asarray(kept, dtype=float)
        if len(diff) < 2:
            return bool(diff.sum() > 0)
        return bool(diff.mean() > 2.0 * diff.std(ddof=1) / np.sqrt(len(diff)))

    def reached(self, figures: dict[str, Any]) -> bool:
        return self.target is not None and figures["check_return"] >= self.target

    def describe(self) -> dict[str, Any]:
        return {"episodes": self.episodes, "first_seed": self.first_seed, "max_episode_steps": self.max_episode_steps,
                "target": self.target}
