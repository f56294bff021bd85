"""Critic-ranked decoding (``rlft eval --critic RUN``): a binned LLM proposes, a learned critic chooses.

At every step the LLM gives its usual action (the mean over each dimension's bins) and ``candidates - 1`` more,
each dimension's bin drawn from the model's own distribution over its bins (:meth:`BinBackend.samples`: the
distributions of the call that gave the mean, so no extra forward pass). The Q of an ``rlft train offline`` run
(the minimum of its twin networks) scores them and the best is played. This is the policy-improvement step of
EMaQ and BCQ with the LLM as the behaviour model: the candidates stay where the model puts probability, which is
where the data, and so the critic's training, was; a critic asked about actions far from its data (Gaussian noise
around the mean, say) overrates them. The played policy is the LLM *and* the critic: the report says so
(``policy_info.critic_rank``), with how often a drawn action beat the mean one and the Q it gained.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlft.core.errors import InvalidInputError
from rlft.models.offline import Critic
from rlft.policy.bins import BinBackend
from rlft.policy.policies import Policy


class CriticRankPolicy(Policy):
    """``base`` (an LLM policy decoded over bins) with each action chosen by ``critic`` among its own draws."""

    kind = "llm"

    def __init__(self, base: Policy, critic: Critic, critic_source: str, candidates: int = 16, seed: int = 0,
                 min_prob: float = 0.0):
        super().__init__()
        backend = getattr(base, "backend", None)
        if not isinstance(backend, BinBackend):
            raise InvalidInputError("--critic ranks actions drawn from a binned LLM's distributions over bins: this "
                                    "policy is not decoded over bins",
                                    hint="evaluate an llm: policy of a binned dataset (serialize --format binned, "
                                         "model from rlft model init) with --bin-decoding auto or mean")
        if candidates < 2:
            raise InvalidInputError(f"--critic-candidates must be at least 2 (the mean action and one draw), got "
                                    f"{candidates}")
        backend.stop_caching()  # each call's distributions are read: a prompt answered from memory has none
        self.base, self.backend, self.critic, self.source = base, backend, critic, critic_source
        self.candidates = candidates
        self.min_prob = min_prob
        self.rng = np.random.default_rng(seed)
        self.low = np.asarray(base.space.low, dtype=np.float64)
        self.high = np.asarray(base.space.high, dtype=np.float64)
        self.changed = 0  # decisions where a drawn action beat the mean action
        self.q_gain = 0.0  # summed Q(best) - Q(mean action), in the data's reward units

    def begin_episode(self, slot, episode, seed, obs):
        self.base.begin_episode(slot, episode, seed, obs)

    def act(self, obs, slots):
        mean_actions = np.asarray(self.base.act(obs, slots), dtype=np.float64).reshape(len(slots), -1)
        self.decisions += len(slots)
        self.invalid = self.base.invalid  # an answer that did not parse plays the fallback, as without the critic
        drawn = self.backend.samples(self.candidates - 1, self.rng, self.min_prob)
        proposals = np.clip(np.concatenate([mean_actions[:, None, :], drawn], axis=1), self.low, self.high)
        n, k, dims = proposals.shape
        observations = np.repeat(np.asarray(obs, dtype=np.float32).reshape(n, -1), k, axis=0)
        q = self.critic.q(observations, proposals.reshape(n * k, dims).astype(np.float32)).reshape(n, k)
        best = q.argmax(axis=1)
        self.changed += int((best != 0).sum())
        self.q_gain += float((q[np.arange(n), best] - q[:, 0]).sum())
        chosen = proposals[np.arange(n), best]
        return chosen.astype(self.base.space.dtype).reshape((n, *self.base.space.shape))

    def record(self, slots, actions, rewards):
        self.base.record(slots, actions, rewards)

    def describe(self) -> dict[str, Any]:
        return {**self.base.describe(), "critic_rank": {
            "critic": self.source, "algo": self.critic.info.get("algo"), "candidates": self.candidates,
            "min_prob": self.min_prob,
            "drawn_chosen_rate": self.changed / max(self.decisions, 1),
            "mean_q_gain": self.q_gain / max(self.decisions, 1)}}

    def stats(self) -> dict[str, Any]:
        return self.base.stats()

    def close(self) -> None:
        self.base.close()
