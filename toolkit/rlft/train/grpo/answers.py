"""Every-answer GRPO (``--group actions``): each recorded state's group holds every valid answer of a small discrete
action space, equally often (:class:`~rlft.train.grpo.sampling.ActionSetRollout`): all actions compared at every
step, no sampling noise. ``--advantage target`` moves each answer's probability toward the group's greedy policy
(:mod:`rlft.train.grpo.action_targets`)."""

from __future__ import annotations

from typing import Any

from rlft.policy.action_scores import ActionChoices
from rlft.train.grpo.action_targets import action_set_trainer_class
from rlft.train.grpo.sampling import ActionSetRollout
from rlft.train.grpo.step import StepGRPO
from rlft.train.inputs import StageInputs


class EveryAnswerGRPO(StepGRPO):
    name = "every-answer"

    def rollout(self, inputs: StageInputs, model, tokenizer):
        return ActionSetRollout(ActionChoices(inputs.codec, tokenizer, model), self.config.num_generations)

    def trainer_class(self, rollout):
        from trl import GRPOTrainer

        return action_set_trainer_class(GRPOTrainer, rollout.choices, self.config.advantage,
                                        self.config.target_temperature)

    def record(self) -> dict[str, Any]:
        return {"advantage": self.config.advantage, "target_temperature": self.config.target_temperature}
