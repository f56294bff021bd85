"""Step GRPO: one prompt per recorded state, ``num_generations`` sampled answers each, scored by the control rewards
(:mod:`rlft.train.grpo.rewards`) against the row's columns. Sampled within the codec's grammar when constrained
(:class:`~rlft.train.grpo.sampling.StepRollout`), else by TRL itself."""

from __future__ import annotations

from typing import Any

from rlft.core.errors import InvalidInputError
from rlft.train.grpo.config import GRPOStageConfig
from rlft.train.grpo.rewards import build_rewards
from rlft.train.grpo.sampling import GrammarSampler, StepRollout
from rlft.train.grpo.variant import GRPOVariant
from rlft.train.inputs import StageInputs


class StepGRPO(GRPOVariant):
    name = "step"

    def rewards(self, names: list[str]) -> tuple[list, StageInputs]:
        inputs = self.inputs
        rewards = build_rewards(names, inputs.codec, inputs.train.column_names, reward_options(self.config, names))
        for reward in rewards:
            reward.preflight(inputs.train)
        return rewards, inputs

    def rollout(self, inputs: StageInputs, model, tokenizer):
        if not self.constrained:
            return None
        return StepRollout(GrammarSampler(inputs.codec, tokenizer, self.config.temperature, self.config.top_p))


def reward_options(config: GRPOStageConfig, names: list[str]) -> dict[str, dict[str, Any]]:
    """Per-reward keyword arguments from the config (only for the rewards in use)."""
    options: dict[str, dict[str, Any]] = {}
    if "q-advantage" in names:
        options["q-advantage"] = {"bonus": config.q_bonus}
    if "critic" in names:
        options["critic"] = {"critic": config.critic}
    if "env" in names:
        env: dict[str, Any] = {"horizon": config.env_horizon, "policy": config.env_policy,
                               "gamma": config.env_gamma, "samples": config.env_samples, "seed": config.seed}
        if config.env_bounds is not None:
            if len(config.env_bounds) != 2:
                raise InvalidInputError(f"--env-bounds needs two numbers low,high, got {config.env_bounds}")
            env["bounds"] = tuple(config.env_bounds)
        options["env"] = env
    return options
