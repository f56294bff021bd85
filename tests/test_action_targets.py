"""GRPO's target advantages over every answer (--advantage target): a cross-entropy step toward the greedy policy of
the group's rewards, shared by tied answers, zero once a state is right."""

from __future__ import annotations

import numpy as np
import pytest

from rlft.core.errors import InvalidInputError
from rlft.train.grpo.action_targets import check_advantage, target_advantages, target_distribution


def test_the_greedy_target_shares_tied_best_answers():
    rewards = np.array([[0.1, 0.5, 0.5, 0.2], [1.0, 0.0, 0.0, 0.0]])
    assert target_distribution(rewards).tolist() == [[0.0, 0.5, 0.5, 0.0], [1.0, 0.0, 0.0, 0.0]]
    soft = target_distribution(rewards, temperature=1.0)
    assert soft.sum(axis=1) == pytest.approx([1.0, 1.0]) and soft[0, 1] == soft[0, 2] > soft[0, 3] > soft[0, 0]


def test_advantages_are_target_minus_policy_shared_by_the_copies_of_an_answer():
    # one state, 4 answers written twice each (answer j % 4 at position j), the policy sure of a wrong answer
    rewards = np.array([0.0, 1.0, 0.0, 0.0] * 2)
    probs = np.array([[0.7, 0.1, 0.1, 0.1]])
    advantages, stats = target_advantages(rewards, probs, num_generations=8)
    assert advantages.tolist() == pytest.approx([-0.35, 0.45, -0.05, -0.05] * 2)
    assert stats["target/policy_right"] == 0.0
    # once the policy is the target, nothing moves: the step that keeps pushing right states is gone
    advantages, stats = target_advantages(rewards, np.array([[0.0, 1.0, 0.0, 0.0]]), num_generations=8)
    assert not advantages.any() and stats["target/policy_right"] == 1.0


def test_the_logit_step_is_the_cross_entropy_step():
    """sum_a A(a) grad log pi(a) with A = t - pi is t - pi in the logits: the supervised step toward the target."""
    rng = np.random.default_rng(0)
    logits = rng.normal(size=4)
    probs = np.exp(logits) / np.exp(logits).sum()
    rewards = rng.normal(size=4)
    advantages, _ = target_advantages(rewards, probs[None, :], num_generations=4)
    grad = sum(advantages[a] * (np.eye(4)[a] - probs) for a in range(4))  # d log pi(a) / d logits = e_a - pi
    assert grad == pytest.approx(target_distribution(rewards[None, :])[0] - probs)


def test_bad_advantage_settings_are_refused():
    from rlft.train.grpo.config import GRPOStageConfig

    with pytest.raises(InvalidInputError, match="--advantage must be one of group, target, got 'best'"):
        GRPOStageConfig.of(advantage="best")  # declared choices, checked however the config is made
    with pytest.raises(InvalidInputError, match="--target-temperature must be >= 0.0"):
        GRPOStageConfig.of(advantage="target", target_temperature=-1.0)
    with pytest.raises(InvalidInputError, match="--target-temperature must be a finite number"):
        GRPOStageConfig.of(target_temperature=float("nan"))
    with pytest.raises(InvalidInputError, match="needs every valid answer in each group"):
        check_advantage("target", "sampled")
    with pytest.raises(ValueError, match="do not make"):
        target_advantages(np.zeros(6), np.full((1, 4), 0.25), num_generations=6)


def test_only_the_decisive_tokens_carry_an_advantage():
    from rlft.train.grpo.action_targets import decisive_token_advantages

    table = decisive_token_advantages(np.array([0.5, -0.25]), [(1, 2), (1, 3)], width=5)
    assert table.tolist() == [[0.0, 0.5, 0.0, 0.0, 0.0], [0.0, -0.25, -0.25, 0.0, 0.0]]
