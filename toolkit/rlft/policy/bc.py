"""The behaviour-cloning MLP as a policy (the network: :mod:`rlft.models.bc`; trained by ``rlft train bc``)."""

from __future__ import annotations

import os

from rlft.models.bc import load_bc
from rlft.policy.policies import Policy


class BCPolicy(Policy):
    """A saved behaviour-cloning MLP; one batched forward pass per step."""

    kind = "bc"

    def __init__(self, path: str | os.PathLike):
        super().__init__()
        self.bc = load_bc(path)
        self.path = str(path)
        self.observation_space = self.bc.observation_space
        self.action_space = self.bc.action_space
        self.info = self.bc.info

    def act(self, obs, slots):
        self.decisions += len(slots)
        return self.bc.act(obs)

    def describe(self):
        return {"kind": self.kind, "path": self.path, "dataset": self.info.get("dataset"),
                "env_id": self.info.get("env_id")}
