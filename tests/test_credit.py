"""Per-state credit of episodic GRPO (``--credit state``, GiGPO-style): the step advantages' arithmetic on
hand-made episodes, the per-token table TRL's loss reads, and a real TRL run that uses it."""

from __future__ import annotations

import numpy as np
import pytest

from factories import greedy_success, lake_episode_config, make_lake_q_model
from rlft.core.errors import InvalidInputError
from rlft.train.grpo.config import GRPOStageConfig
from rlft.train.grpo.credit import (
    ExperienceModel,
    action_advantages,
    episode_turns,
    model_advantages,
    returns_to_go,
    step_advantages,
    token_advantages,
)


def test_returns_to_go_discount_later_rewards():
    assert returns_to_go([0.0, 0.0, 1.0], 0.5).tolist() == [0.25, 0.5, 1.0]
    assert returns_to_go([1.0, 1.0], 1.0).tolist() == [2.0, 1.0]
    assert returns_to_go([], 0.9).tolist() == []


def test_turns_that_answered_the_same_state_are_compared_within_a_task():
    # two episodes of task A both visit state "s0" then "s1"; the first reaches the goal, the second does not.
    # Task B's episode also visits "s0" but is another task: never compared with A's.
    tasks = ["A", "A", "B"]
    observations = [["s0", "s1"], ["s0", "s1"], ["s0"]]
    rewards = [[0.0, 1.0], [0.0, 0.0], [0.0]]
    steps, stats = step_advantages(tasks, observations, rewards, gamma=0.5)
    # s0 in A: returns-to-go 0.5 and 0.0 -> standardized +1 / -1; s1: 1.0 and 0.0 -> +1 / -1
    assert steps[0].tolist() == pytest.approx([1.0, 1.0])
    assert steps[1].tolist() == pytest.approx([-1.0, -1.0])
    assert steps[2].tolist() == [0.0]  # a group of one turn carries no comparison
    assert stats["state_groups"] == 3 and stats["state_groups_informative"] == 2
    assert stats["turns_with_step_credit"] == pytest.approx(4 / 5)


def test_equal_returns_give_no_step_credit():
    steps, stats = step_advantages(["A", "A"], [["s0", "s1"], ["s0", "s2"]], [[0.0, 0.0], [0.0, 0.0]], 0.95)
    assert all(not s.any() for s in steps)
    assert stats["state_groups_informative"] == 0


def test_action_credit_is_the_pooled_q_minus_v_of_each_turns_state_and_action():
    # task A, state "s0": three turns, actions 1, 1, 2 with returns-to-go 1, 0, 0 -> V = 1/3, std = sqrt(2)/3,
    # Q(s0, 1) = 1/2, Q(s0, 2) = 0. The failed episode's turn that took action 1 is pushed up too.
    turns = episode_turns(["A", "A", "A"], [["s0", "s1"], ["s0"], ["s0"]], [[1, 3], [1], [2]],
                          [[0.0, 1.0], [0.0], [0.0]], gamma=1.0)
    assert turns[0] == [("A", "s0", "1", 1.0), ("A", "s1", "3", 1.0)]
    pool = [t for episode in turns for t in episode]
    steps, stats = action_advantages(turns, pool)
    std = np.sqrt(2) / 3
    assert steps[0][0] == pytest.approx((0.5 - 1 / 3) / std)
    assert steps[1][0] == pytest.approx((0.5 - 1 / 3) / std)  # same state and action: same credit
    assert steps[2][0] == pytest.approx((0.0 - 1 / 3) / std)
    assert steps[0][1] == 0.0  # s1 was answered once: no comparison
    assert stats["state_groups"] == 2 and stats["state_groups_informative"] == 1


def test_action_credit_pools_earlier_steps_so_a_rare_success_keeps_teaching():
    # this step nobody reached the goal: alone it carries no signal; pooled with a step where action 1 paid,
    # this step's turns at s0 are told action 1 is the better one
    now = episode_turns(["A", "A"], [["s0"], ["s0"]], [[1], [2]], [[0.0], [0.0]], gamma=0.9)
    alone, _ = action_advantages(now, [t for e in now for t in e])
    assert not any(a.any() for a in alone)
    earlier = episode_turns(["A", "A"], [["s0"], ["s0"]], [[1], [2]], [[1.0], [0.0]], gamma=0.9)
    pooled, stats = action_advantages(now, [t for e in earlier + now for t in e])
    assert pooled[0][0] > 0 > pooled[1][0]
    assert stats["turns_per_state_group"] == 4


def test_model_credit_propagates_one_success_back_to_the_start():
    # s0 --a--> s1 --b--> goal (reward 1, terminal); s0 --c--> hole (terminal); s1 --d--> s0 (loops back)
    model = ExperienceModel(gamma=0.9)
    model.add("T", ["s0", "s1"], ["a", "b"], [0.0, 1.0], "goal", terminated=True)
    model.add("T", ["s0"], ["c"], [0.0], "hole", terminated=True)
    model.add("T", ["s0", "s1", "s0"], ["a", "d", "c"], [0.0, 0.0, 0.0], "hole", terminated=True)
    q = model.values()
    assert q[("T", "s1", "'b'")] == pytest.approx(1.0)
    assert q[("T", "s0", "'a'")] == pytest.approx(0.9)  # both a-transitions lead to s1, worth 1
    assert q[("T", "s1", "'d'")] == pytest.approx(0.81)  # back to s0, worth 0.9
    assert q[("T", "s0", "'c'")] == 0.0
    # the failed episode's turns, centred on the answers this batch gave at each observation: at s0 it gave a
    # (Q 0.9) and c (Q 0): a up, c down, summing to zero; at s1 it gave d only: nothing to compare with here
    turns = episode_turns(["T"], [["s0", "s1", "s0"]], [["a", "d", "c"]], [[0.0, 0.0, 0.0]], gamma=0.9)
    steps, stats = model_advantages(turns, q)
    # (3 turns over 2 observations: s0's two turns weigh 3 / (2 x 2) each)
    assert steps[0].tolist() == pytest.approx([0.5 * 0.75, 0.0, -0.5 * 0.75])
    assert stats["start_value"] == pytest.approx(0.9)


def test_model_credit_leaves_out_a_cut_episodes_last_turn_without_its_next_observation():
    model = ExperienceModel(gamma=1.0)
    model.add("T", ["s0", "s1"], ["a", "a"], [0.0, 0.0], None, terminated=False)
    assert model.transitions == 1 and ("T", "s1", "'a'") not in model.values()
    model.add("T", ["s1"], ["a"], [1.0], "s2", terminated=False)  # cut short after it, the next one known
    assert model.values()[("T", "s0", "'a'")] == pytest.approx(1.0)


def test_token_table_adds_each_turns_step_credit_to_its_own_tokens():
    turn_ids = [[-1, 0, 0, -1, 1], [0, -1, 1]]
    steps = [np.array([0.5, -1.0]), np.array([2.0, 0.0])]
    table = token_advantages([1.0, -1.0], turn_ids, steps, weight=2.0, width=6)
    assert table.shape == (2, 6)
    assert table[0].tolist() == [1.0, 2.0, 2.0, 1.0, -1.0, 1.0]  # env tokens and padding keep the episode's
    assert table[1].tolist() == [3.0, -1.0, -1.0, -1.0, -1.0, -1.0]


def test_the_trainer_hook_turns_episode_advantages_into_per_token_ones():
    import torch

    from rlft.train.grpo.episode_trainer import state_credit_advantages
    from rlft.train.grpo.episodes import Episode

    class Rollout:
        credit, credit_gamma, step_weight, episode_weight = "state", 1.0, 1.0, 1.0
        last_episodes = [
            Episode(seed=0, completion_ids=[5, 6, 7], turn_ids=[0, -1, 1], observations=["a", "b"],
                    rewards=[0.0, 1.0], first_prompt="task"),
            Episode(seed=1, completion_ids=[5, 6, 7], turn_ids=[0, -1, 1], observations=["a", "c"],
                    rewards=[0.0, 0.0], first_prompt="task"),
        ]

    class Model:
        training = True

    class Trainer:
        model = Model()
        _metrics = {"train": __import__("collections").defaultdict(list)}

    output = {"advantages": torch.tensor([0.7, -0.7]), "completion_ids": torch.zeros(2, 4, dtype=torch.long)}
    table = state_credit_advantages(Trainer(), Rollout(), output)
    assert table.shape == (2, 4)
    # state "a": returns-to-go 1 and 0 -> +1 / -1 on turn 0's token; turn 1's states differ: no step credit
    assert table[0].tolist() == pytest.approx([1.7, 0.7, 0.7, 0.7])
    assert table[1].tolist() == pytest.approx([-1.7, -0.7, -0.7, -0.7])
    assert Trainer._metrics["train"]["credit/state_groups_informative"] == [1.0]
    Rollout.last_episodes = Rollout.last_episodes[:1]
    with pytest.raises(RuntimeError, match="1 episodes played for 2 samples"):
        state_credit_advantages(Trainer(), Rollout(), output)


def _lake(tmp_path):
    return make_lake_q_model(tmp_path)


def test_state_credit_trains_through_trl_and_is_recorded(tmp_path, monkeypatch):
    import json

    from rlft.train.grpo import episode_trainer
    from rlft.train.grpo.run import run_grpo

    tables = []
    original = episode_trainer.state_credit_advantages

    def recording(trainer, rollout, output):
        table = original(trainer, rollout, output)
        tables.append((table, [e.turn_ids for e in rollout.last_episodes]))
        return table

    monkeypatch.setattr(episode_trainer, "state_credit_advantages", recording)
    data, model = _lake(tmp_path)
    out = tmp_path / "run"
    info = run_grpo(lake_episode_config(data, model, out, credit="state", credit_gamma=0.9))
    assert len(tables) == 2  # one per optimizer step
    for table, turn_ids in tables:
        assert table.dim() == 2 and table.shape[0] == 8 and table.shape[1] >= max(len(t) for t in turn_ids)
    assert "credit/state_groups_last" in info["metrics"]
    saved = json.loads((out / "rlft_run.json").read_text())
    assert saved["credit"] == "state" and saved["credit_gamma"] == 0.9 and saved["step_weight"] == 1.0


def test_bad_credit_settings_fail_before_training(tmp_path):
    from rlft.train.grpo.run import run_grpo

    base = dict(dataset=str(tmp_path / "none"), model=str(tmp_path / "none"), out=tmp_path / "bad", max_steps=1)
    with pytest.raises(InvalidInputError, match="--credit must be one of"):
        run_grpo(GRPOStageConfig.of(**base, rollout="episode", credit="turn"))
    with pytest.raises(InvalidInputError, match="--credit state is for episode rollouts"):
        run_grpo(GRPOStageConfig.of(**base, credit="state"))
    with pytest.raises(InvalidInputError, match="--credit-gamma"):
        run_grpo(GRPOStageConfig.of(**base, rollout="episode", credit="state", credit_gamma=1.5))
    with pytest.raises(InvalidInputError, match="--credit action is for episode rollouts"):
        run_grpo(GRPOStageConfig.of(**base, credit="action"))
    with pytest.raises(InvalidInputError, match="--credit model is for episode rollouts"):
        run_grpo(GRPOStageConfig.of(**base, credit="model"))
    with pytest.raises(InvalidInputError, match="--episode-weight"):
        run_grpo(GRPOStageConfig.of(**base, rollout="episode", credit="model", episode_weight=-1.0))
    with pytest.raises(InvalidInputError, match="--credit-window"):
        run_grpo(GRPOStageConfig.of(**base, rollout="episode", credit="action", credit_window=0))
    with pytest.raises(InvalidInputError, match="--step-weight"):
        run_grpo(GRPOStageConfig.of(**base, rollout="episode", credit="state", step_weight=float("nan")))
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("credit", ["action", "model"])
def test_pooled_credits_train_through_trl(tmp_path, credit):
    import json

    from rlft.train.grpo.run import run_grpo

    data, model = _lake(tmp_path)
    out = tmp_path / "run"
    window = {"credit_window": 2} if credit == "action" else {}  # elsewhere it does nothing, and is refused
    info = run_grpo(lake_episode_config(data, model, out, credit=credit, max_steps=3, **window))
    assert "credit/state_groups_last" in info["metrics"]
    saved = json.loads((out / "rlft_run.json").read_text())
    assert saved["credit"] == credit and saved.get("credit_window") == (2 if credit == "action" else None)


def test_model_credit_teaches_a_tabular_policy_the_slippery_lake():
    """The credit alone, with a softmax table standing in for the LLM: 32 episodes a step from a uniform policy
    (about 1 in 60 reaches the goal), each turn's logits moved by its model-credit advantage. The greedy policy
    must reach at least 0.6 success (optimal about 0.74) within 40 steps; GiGPO's step credit in its place
    reaches 0.31."""
    import gymnasium as gym

    rng = np.random.default_rng(0)
    env = gym.make("FrozenLake-v1", map_name="4x4", is_slippery=True)
    logits = np.zeros((16, 4))
    model = ExperienceModel(gamma=0.99)
    for _step in range(40):
        policy = np.exp(logits - logits.max(1, keepdims=True))
        policy /= policy.sum(1, keepdims=True)
        observations, actions, rewards = [], [], []
        for _ in range(32):
            state, _ = env.reset(seed=int(rng.integers(1 << 30)))
            obs, acts, rews, terminated = [], [], [], False
            while not terminated and len(acts) < 100:
                action = int(rng.choice(4, p=policy[state]))
                obs.append(str(state))
                acts.append(action)
                state, reward, terminated, _, _ = env.step(action)
                rews.append(float(reward))
            model.add("lake", obs, acts, rews, str(state), terminated)
            observations.append(obs), actions.append(acts), rewards.append(rews)
        turns = episode_turns(["lake"] * 32, observations, actions, rewards, gamma=0.99)
        steps, _ = model_advantages(turns, model.values())
        grad = np.zeros_like(logits)
        for obs, acts, adv in zip(observations, actions, steps, strict=True):
            for o, a, value in zip(obs, acts, adv, strict=True):
                push = -policy[int(o)] * value
                push[a] += value
                grad[int(o)] += push
        logits += 20.0 * grad / sum(len(a) for a in actions)
    assert greedy_success(env, logits.argmax(1)) >= 0.6
