"""Advantage-weighted SFT (``rlft train sft --critic RUN``): AWR, IQL's policy extraction, applied to an LLM.

Each training row (s, a) is drawn with probability proportional to ``exp(beta * A(s, a))``, capped at
``max_weight`` (IQL's 100), where A = Q - V comes from the critic of an ``rlft train offline --algo iql`` run on the
same data, in the reward units that critic was trained on (so ``beta`` means what IQL's temperature means). The
SFT loss itself is TRL's, unchanged: sampling rows by their weight gives the weighted objective in expectation, and
the trainer, its collator and its metrics stay TRL's own. Rows whose action the critic rates above its state's value
are seen more often; imitation becomes policy improvement on the data's own actions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlft.core.errors import InvalidInputError
from rlft.models.offline import Critic

WEIGHT_COLUMN = "awr_weight"


@dataclass
class AdvantageWeights:
    """The rows' weights and what describes them (logged in the run's metrics)."""

    weights: np.ndarray
    advantages: np.ndarray  # in the critic's training units

    def summary(self, temperature: float, max_weight: float) -> dict:
        w = self.weights / self.weights.sum()
        return {
            "awr_temperature": temperature, "awr_max_weight": max_weight,
            "awr_advantage_mean": float(self.advantages.mean()), "awr_advantage_std": float(self.advantages.std()),
            "awr_capped_fraction": float((self.weights >= max_weight).mean()),
            # Kish's effective sample size as a fraction of the rows: how much of the data the weights still use
            "awr_effective_rows_fraction": float(1.0 / (w ** 2).sum() / len(w)),
        }


def advantage_weights(critic: Critic, observations: np.ndarray, actions: np.ndarray, temperature: float,
                      max_weight: float, batch: int = 8192) -> AdvantageWeights:
    """exp(temperature * A), capped, for each (observation, action) row; A in the critic's training units."""
    if critic.v_net is None:
        raise InvalidInputError(f"advantage weights need a critic with a V network; this one is "
                                f"{critic.info.get('algo')}'s", hint="train one with rlft train offline --algo iql")
    advantages = np.concatenate([critic.advantage(observations[i:i + batch], actions[i:i + batch])
                                 for i in range(0, len(observations), batch)]) * critic.reward_scale
    weights = np.minimum(np.exp(np.minimum(temperature * advantages, np.log(max_weight))), max_weight)
    return AdvantageWeights(weights, advantages)


def weighted_sampling_trainer(base, seed: int):
    """A subclass of the trainer class ``base`` that draws training rows with replacement in proportion to their
    ``awr_weight`` column (kept by TRL's preprocessing, dropped before batches are collated)."""

    class WeightedSamplingTrainer(base):
        def _get_train_sampler(self, train_dataset=None):
            import torch

            weights = torch.as_tensor(np.asarray(self.train_dataset[WEIGHT_COLUMN], np.float64))
            generator = torch.Generator().manual_seed(seed)
            return torch.utils.data.WeightedRandomSampler(weights, num_samples=len(weights), replacement=True,
                                                          generator=generator)

    WeightedSamplingTrainer.__name__ = f"WeightedSampling{base.__name__}"
    return WeightedSamplingTrainer
