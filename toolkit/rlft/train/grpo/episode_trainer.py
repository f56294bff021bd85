"""The GRPO trainer of episodic rollouts: it hands the rollout the batch's rows (their reset seeds) and, for the
per-step credits (``--credit state|action|model``), turns TRL's episode advantages into per-token ones."""

from __future__ import annotations

from rlft.train.grpo.credit import action_advantages, episode_turns, model_advantages, step_advantages, token_advantages
from rlft.train.grpo.episodes import EpisodeRollout


def episode_trainer_class():
    """``GRPOTrainer`` that keeps the batch's rows where the rollout can read their reset seeds (TRL hands a
    ``rollout_func`` only the prompts, and FrozenLake's episodes all start from the same prompt)."""
    from trl import GRPOTrainer

    class EpisodeGRPOTrainer(GRPOTrainer):
        def _generate_and_score_completions(self, inputs):
            self.rlft_rows = inputs
            output = super()._generate_and_score_completions(inputs)
            rollout = self.rollout_func
            if getattr(rollout, "credit", "episode") != "episode":
                output["advantages"] = state_credit_advantages(self, rollout, output)
            return output

    return EpisodeGRPOTrainer


def state_credit_advantages(trainer, rollout: EpisodeRollout, output: dict):
    """TRL's episode advantages ``(B,)``, times ``--episode-weight``, -> per-token ``(B, T)`` with each turn's step
    advantage added (GiGPO's for ``--credit state``, the pooled ``Q - V`` estimate for ``--credit action``, the
    empirical model's for ``--credit model``; :mod:`rlft.train.grpo.credit`); logs how many observations carried a
    signal."""
    import torch

    episodes = rollout.last_episodes
    episode_adv = output["advantages"]
    if len(episodes) != episode_adv.shape[0]:
        raise RuntimeError(f"--credit {rollout.credit}: {len(episodes)} episodes played for {episode_adv.shape[0]} "
                           "samples")
    tasks, observations = [e.first_prompt for e in episodes], [e.observations for e in episodes]
    if rollout.credit in ("action", "model"):
        turns = episode_turns(tasks, observations, [e.actions for e in episodes], [e.rewards for e in episodes],
                              rollout.credit_gamma)
    if rollout.credit == "action":
        rollout.credit_pool.append([t for episode in turns for t in episode])
        steps, stats = action_advantages(turns, [t for batch in rollout.credit_pool for t in batch])
    elif rollout.credit == "model":
        steps, stats = model_advantages(turns, rollout.remember(episodes))
    else:
        steps, stats = step_advantages(tasks, observations, [e.rewards for e in episodes], rollout.credit_gamma)
    width = output["completion_ids"].shape[1]
    table = token_advantages(rollout.episode_weight * episode_adv.detach().cpu().numpy(),
                             [e.turn_ids for e in episodes], steps,
                             rollout.step_weight, width)
    metrics = trainer._metrics["train" if trainer.model.training else "eval"]
    for key, value in stats.items():
        metrics[f"credit/{key}"].append(value)
    return torch.as_tensor(table, device=episode_adv.device, dtype=episode_adv.dtype)
