"""What one kind of GRPO run owns, as a class: how a state's group of answers is made (its rollout), what scores
the answers (its rewards), which trainer optimises them, and what the run records and measures of it.
:class:`rlft.train.grpo.run.GRPOStage` (the training lifecycle of :mod:`rlft.train.lifecycle`) does the rest the
same way for every kind: settings, model, TRL's config, the RUN folder. The kinds:
:class:`~rlft.train.grpo.step.StepGRPO` (one sampled answer per recorded state),
:class:`~rlft.train.grpo.answers.EveryAnswerGRPO` (every valid answer of a state in its group),
:class:`~rlft.train.grpo.episodic.EpisodicGRPO` (whole episodes in the env) and
:class:`~rlft.train.grpo.episode_answers.EpisodeAnswersGRPO` (every answer of each visited state, scored by a
critic learned from the episodes)."""

from __future__ import annotations

from typing import Any, ClassVar

from rlft.train.grpo.config import GRPOStageConfig
from rlft.train.inputs import StageInputs


class GRPOVariant:
    """One kind of GRPO run over ``inputs`` (the dataset, its codec) with ``config``'s settings."""

    name: ClassVar[str]

    def __init__(self, config: GRPOStageConfig, inputs: StageInputs, constrained: bool):
        self.config = config
        self.inputs = inputs
        self.constrained = constrained

    def rewards(self, names: list[str]) -> tuple[list, StageInputs]:
        """(the reward functions of ``names``, the inputs to train on), checked before anything is trained."""
        raise NotImplementedError

    def rollout(self, inputs: StageInputs, model, tokenizer):
        """TRL's ``rollout_func`` (None: TRL samples by itself)."""
        return None

    def trainer_class(self, rollout):
        from trl import GRPOTrainer

        return GRPOTrainer

    def record(self) -> dict[str, Any]:
        """What ``rlft_run.json`` says of this kind beyond the rewards."""
        return {}

    def metrics(self, rollout, runtime: float) -> dict[str, Any]:
        """What the run measured of its rollouts (``runtime``: the training seconds)."""
        return {"sampling_seconds": rollout.seconds} if rollout is not None else {}
