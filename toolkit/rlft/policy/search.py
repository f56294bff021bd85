"""Test-time search around any policy (``rlft eval --search N``): how far one step of policy improvement reaches.

At every decision the wrapped policy's action and ``N - 1`` Gaussian perturbations of it are each played from the
current state, restored in copies of the environment, and followed by an SB3 expert for ``horizon - 1`` more steps
(:func:`rlft.envs.state.perturbation_values`: the expert's k-step Q); the best is played. It is a diagnosis, not a
policy one would deploy: ``N x horizon`` simulator steps a decision. Issue #26 asked whether an imitator can pass
the expert it copies; the same search around that expert says how much room one step of improvement leaves.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlft.envs.state import perturbation_values, state_kind
from rlft.policy.policies import Policy


class SearchPolicy(Policy):
    """``base``'s action improved by a k-step lookahead over ``candidates`` perturbations (module doc)."""

    kind = "search"

    def __init__(self, base: Policy, expert_model, make_env, action_space, candidates: int = 8, horizon: int = 20,
                 noise: float = 0.1, gamma: float = 0.99, seed: int = 0):
        super().__init__()
        self.base, self.model = base, expert_model
        self.candidates, self.horizon, self.noise, self.gamma = candidates, horizon, noise, gamma
        self.low = np.asarray(action_space.low, dtype=np.float32)
        self.high = np.asarray(action_space.high, dtype=np.float32)
        self.envs = [make_env() for _ in range(candidates)]
        state_kind(self.envs[0])  # an env whose state cannot be restored is refused here, in one line
        self.rng = np.random.default_rng(seed)
        self.changed = 0  # decisions where a perturbation beat the base action

    def begin_episode(self, slot, episode, seed, obs):
        self.base.begin_episode(slot, episode, seed, obs)

    def _act(self, batch):
        return self.model.predict(batch, deterministic=True)[0]

    def act(self, obs, slots):
        actions = np.asarray(self.base.act(obs, slots), dtype=np.float32)
        self.decisions += len(slots)
        self.invalid = getattr(self.base, "invalid", 0)  # the base's own count (an LLM answer that did not parse)
        out = np.empty_like(actions)
        for i, (observation, action) in enumerate(zip(obs, actions, strict=True)):
            proposals, values = perturbation_values(self.envs, observation, action, self.rng, self.noise, self.low,
                                                    self.high, self._act, self.horizon, self.gamma)
            best = int(np.argmax(values))
            self.changed += best != 0
            out[i] = np.clip(proposals[best], self.low, self.high)
        return out

    def record(self, slots, actions, rewards):
        self.base.record(slots, actions, rewards)

    def describe(self) -> dict[str, Any]:
        return {**self.base.describe(), "search": {
            "candidates": self.candidates, "horizon": self.horizon, "noise": self.noise, "gamma": self.gamma,
            "changed_rate": self.changed / max(self.decisions, 1)}}  # decisions where a perturbation won

    def stats(self) -> dict[str, Any]:
        return self.base.stats()

    def close(self) -> None:
        for env in self.envs:
            env.close()
        self.base.close()
