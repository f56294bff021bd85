"""GRPO over every valid answer (``--group actions``): advantages on the decisive tokens, and target advantages.

Every answer of a state shares its format tokens (``<answer>`` ... ``</answer>``, end-of-turn); only the tokens
between tell the answers apart, and under constrained decoding only those are a choice. A loss on whole answers
found a shortcut: it lowered a wrong answer's likelihood by making its closing tag unlikely after it, so the
answers' likelihoods said "right" while greedy decoding still wrote the wrong action (FrozenLake 4x4: the exact
answer distribution gave the optimal actions 0.999, decisions were right in 6 of 11 states). So each advantage is
written on the decisive tokens only (:func:`decisive_token_advantages`), and the policy read back is the decisive
tokens' (``ActionChoices.log_likelihoods(decisive=True)``).

``--advantage target``:

With every answer of a state in its group, TRL's group-normalized advantage ``(r - mean) / std`` moves each answer's
log-likelihood by a fixed amount every step: the logit gradient of ``sum_a A(a) log pi(a)`` is ``A`` itself when the
advantages sum to zero, whatever the policy already does. States that are already right keep pushing their answer as
hard as states that are wrong, and in a small model whose states share weights the many right ones drown the few
wrong ones: FrozenLake 8x8 (row 3c) sat for hundreds of steps with most states collapsed onto the commonest answer.

``target`` is the policy-improvement step instead: the group's rewards define a target distribution over the answers
(greedy: the best answers share it, ties real; or a softmax of the standardized rewards at a temperature), and each
answer's advantage is ``target(a) - pi(a)``, with ``pi`` the model's exact distribution over the valid answers
(:mod:`rlft.policy.action_scores`). The logit gradient of ``sum_a (t_a - pi_a) log pi_a`` is ``t - pi``: the
cross-entropy step toward the target, large where the policy is wrong, zero once it is right. It needs nothing but
the rewards the group already has; pure numpy here, wired into TRL's trainer by :func:`action_set_trainer_class`.
"""

from __future__ import annotations

import numpy as np

from rlft.core.errors import InvalidInputError
from rlft.policy.action_scores import action_distribution

TIE_TOLERANCE = 1e-6  # rewards this close (relative to the group's spread, at least absolute) are tied


def check_advantage(advantage: str, group: str, processes: int = 1) -> None:
    """Refuse an advantage setting that does not go with the group or the processes (the value alone is checked
    by its declared choices)."""
    if advantage == "target" and group != "actions":
        raise InvalidInputError("--advantage target needs every valid answer in each group (--group actions): the "
                                "target compares all answers of a state", hint="add --group actions")
    if advantage == "target" and processes != 1:
        raise InvalidInputError(f"--advantage target runs in one process, not {processes}",
                                hint="drop --advantage target (the group advantage runs in many), or one process")


def target_distribution(rewards: np.ndarray, temperature: float = 0.0) -> np.ndarray:
    """(states, answers) target policy from each state's answer rewards: uniform over the best answers (ties within
    ``TIE_TOLERANCE`` of the spread), or with ``temperature > 0`` a softmax of the standardized rewards."""
    rewards = np.asarray(rewards, dtype=float)
    spread = rewards.max(axis=1, keepdims=True) - rewards.min(axis=1, keepdims=True)
    if temperature > 0:
        std = rewards.std(axis=1, keepdims=True)
        z = (rewards - rewards.mean(axis=1, keepdims=True)) / np.where(std > 0, std, 1.0)
        return action_distribution(z / temperature)
    best = rewards >= rewards.max(axis=1, keepdims=True) - TIE_TOLERANCE * np.maximum(spread, 1.0)
    return best / best.sum(axis=1, keepdims=True)


def target_advantages(rewards: np.ndarray, probs: np.ndarray, num_generations: int,
                      temperature: float = 0.0) -> tuple[np.ndarray, dict[str, float]]:
    """Per completion, ``target(a) - pi(a)`` for the answer it holds.

    ``rewards`` is one reward per completion, ``num_generations`` completions a state in a row, completion ``j`` of
    a group holding answer ``j % n`` (:class:`rlft.train.grpo.sampling.ActionSetRollout`'s order); ``probs`` is
    (states, n), the policy over the answers of each state. An answer written several times in a group shares its
    advantage among its copies, so every state moves by one cross-entropy step. Also returns what the log shows:
    how often the policy's likeliest answer is a target answer, and the mean size of the advantages."""
    probs = np.asarray(probs, dtype=float)
    states, n = probs.shape
    copies = num_generations // n
    if copies * n != num_generations or len(rewards) != states * num_generations:
        raise ValueError(f"{len(rewards)} completions do not make {states} groups of {num_generations} over {n} "
                         "answers")
    grouped = np.asarray(rewards, dtype=float).reshape(states, num_generations)
    per_answer = grouped[:, :n]  # the copies of an answer score alike (the rewards are deterministic per answer)
    target = target_distribution(per_answer, temperature)
    advantage = (target - probs) / copies
    out = np.tile(advantage, (1, copies)).reshape(-1)
    right = target[np.arange(states), probs.argmax(axis=1)] > 0
    return out, {"target/policy_right": float(right.mean()), "target/advantage_abs": float(np.abs(advantage).mean())}


def decisive_token_advantages(advantages: np.ndarray, spans: list[tuple[int, int]], width: int) -> np.ndarray:
    """``(B, width)`` per-token advantages: completion ``i``'s advantage on its decisive tokens ``spans[i]``, 0 on
    the tokens every answer shares (the format around the action, end-of-turn). A loss on whole answers can lower a
    wrong answer by making its closing tag unlikely after it, which constrained decoding (where the grammar forces
    the closing tag) never sees: the policy then looks right and still plays the wrong action."""
    out = np.zeros((len(advantages), width), dtype=np.float32)
    for i, (start, end) in enumerate(spans):
        out[i, start:min(end, width)] = advantages[i]
    return out


def answer_index(choices, prompt, completion: list[int]) -> int:
    """Which of the state's answers a completion (right-padded token ids) holds."""
    for k, answer in enumerate(choices.completion_ids(prompt)):
        if completion[: len(answer)] == answer:
            return k
    raise ValueError("a completion of a --group actions batch is none of its state's answers")


def action_set_trainer_class(base, choices, advantage: str = "group", temperature: float = 0.0):
    """``base`` (TRL's GRPOTrainer) for ``--group actions``: each completion's advantage (TRL's own, or with
    ``advantage="target"`` :func:`target_advantages` from TRL's rewards and the model's exact answer distribution)
    written on its decisive tokens only (:func:`decisive_token_advantages`)."""
    import torch

    class ActionSetGRPOTrainer(base):
        def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
            self.rlft_rewards_per_func = super()._calculate_rewards(inputs, prompts, completions,
                                                                    completion_ids_list)
            return self.rlft_rewards_per_func

        def _generate_and_score_completions(self, inputs):
            output = super()._generate_and_score_completions(inputs)
            old = output["advantages"]
            prompts = [row["prompt"] for row in inputs]
            advantages = old.detach().cpu().numpy()
            if advantage == "target":
                advantages = self._target_advantages(prompts)
            ids = output["completion_ids"].tolist()
            spans = [choices.decisive_spans(p)[answer_index(choices, p, row)]
                     for p, row in zip(prompts, ids, strict=True)]
            table = decisive_token_advantages(advantages, spans, output["completion_ids"].shape[1])
            output["advantages"] = torch.as_tensor(table, device=old.device, dtype=old.dtype)
            return output

        def _target_advantages(self, prompts: list) -> np.ndarray:
            if self.accelerator.num_processes != 1:  # refused before training (check_advantage); a guard
                raise InvalidInputError("--advantage target runs in one process")
            weights = self.reward_weights.to(self.rlft_rewards_per_func.device)
            rewards = torch.nan_to_num(self.rlft_rewards_per_func * weights.unsqueeze(0), nan=0.0).sum(dim=1)
            model = self.accelerator.unwrap_model(self.model)
            states = prompts[:: self.num_generations]
            probs = action_distribution(choices.log_likelihoods(model, states, decisive=True))
            out, stats = target_advantages(rewards.cpu().numpy(), probs, self.num_generations, temperature)
            for key, value in stats.items():
                self._metrics["train" if self.model.training else "eval"][key].append(value)
            return out

    return ActionSetGRPOTrainer
