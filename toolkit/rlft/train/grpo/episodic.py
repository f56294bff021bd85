"""Episodic GRPO (``--rollout episode``): the model plays whole episodes in the env from the dataset's start states
(:class:`~rlft.train.grpo.episodes.EpisodeRollout`); an episode is a completion, scored by its return (and the
share of valid answers), with the step credit ``--credit`` names."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rlft.train.grpo.episode_rewards import episode_rewards
from rlft.train.grpo.episode_setup import check_context, check_episode_env, episode_starts
from rlft.train.grpo.episode_trainer import episode_trainer_class
from rlft.train.grpo.episodes import EpisodeRollout
from rlft.train.grpo.settings import check_start_format
from rlft.train.grpo.variant import GRPOVariant
from rlft.train.inputs import StageInputs


class EpisodicGRPO(GRPOVariant):
    name = "episodic"
    conversation = True  # each turn prompted with the episode so far

    def rewards(self, names: list[str]) -> tuple[list, StageInputs]:
        check_episode_env(self.inputs.codec)
        rewards = self.episode_rewards(names)
        starts = episode_starts(self.inputs.codec, self.config.episode_starts, self.config.seed)
        return rewards, replace(self.inputs, train=starts, conversational=isinstance(starts[0]["prompt"], list))

    def episode_rewards(self, names: list[str]) -> list:
        return episode_rewards(names, self.inputs.codec, self.config.max_turns)

    def rollout(self, inputs: StageInputs, model, tokenizer):
        config = self.config
        check_start_format(config, inputs, conversation=self.conversation)
        rollout = EpisodeRollout(inputs.codec, tokenizer, config.max_turns, config.temperature, config.top_p,
                                 self.constrained, credit=config.credit, credit_gamma=config.credit_gamma,
                                 step_weight=config.step_weight, credit_window=config.credit_window,
                                 episode_weight=config.episode_weight, credit_key=config.credit_key,
                                 # sets the codec's template.turns (saved) unless --credit answers (states)
                                 conversation=self.conversation)
        check_context(rollout, tokenizer, model)
        return rollout

    def trainer_class(self, rollout):
        return episode_trainer_class()

    def record(self) -> dict[str, Any]:
        config = self.config
        return {"max_turns": config.max_turns, "episode_starts": config.episode_starts, "credit": config.credit,
                **({"credit_gamma": config.credit_gamma} if config.credit != "episode" else {}),
                **({"step_weight": config.step_weight, "episode_weight": config.episode_weight}
                   if config.credit not in ("episode", "answers") else {}),
                **({"credit_window": config.credit_window} if config.credit == "action" else {})}

    def metrics(self, rollout, runtime: float) -> dict[str, Any]:
        return {"episodes_played": rollout.episodes,
                "episodes_per_second": rollout.episodes / runtime if runtime else None,
                "rollout_share": rollout.seconds / runtime if runtime else None,  # generation+env vs optimisation
                "episode_retokenized_turns": rollout.retokenized}  # answers re-tokenized canonically
