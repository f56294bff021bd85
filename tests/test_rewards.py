"""Control rewards on hand-made completions: valid, invalid, tied and out-of-range answers give the documented
values, always finite and inside the reward's bounds."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlft.codecs import FrozenLakeGridCodec, make_codec
from rlft.core.errors import InvalidInputError
from rlft.envs.frozenlake import load_map
from rlft.train.grpo.rewards import (
    REWARDS,
    BCReward,
    EnvReward,
    FormatReward,
    QAdvantageReward,
    build_rewards,
    parse_reward_names,
)

GARBAGE = ["", "LEFT", "<answer></answer>", "<answer>JUMP</answer>", "<answer>nan</answer>", "\x00" * 5,
           "<answer>" * 50, "<action>1e308 1e308</action>", "<action>inf -inf</action>", "<action>9" * 40]


def _chat(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


@pytest.fixture(scope="module")
def lake_codec():
    return FrozenLakeGridCodec.for_map(load_map("4x4"), slippery=True, style="chat")


@pytest.fixture(scope="module")
def box_codec():
    space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    return make_codec("raw", gym.spaces.Box(-5, 5, (3,), np.float32), space, precision=2, env_id=None)


class Metrics:
    def __init__(self):
        self.values: dict[str, list[float]] = {}

    def __call__(self, name, value):
        self.values.setdefault(name, []).append(value)


def test_format_reward_on_valid_and_invalid_completions(lake_codec):
    reward = FormatReward(lake_codec)
    completions = [_chat("<answer>LEFT</answer>"), _chat("<think>hole below</think><answer>up</answer>"),
                   _chat("<answer>JUMP</answer>"), _chat("no answer"), "<answer>RIGHT</answer>", []]
    log = Metrics()
    assert reward(prompts=[None] * 6, completions=completions, log_metric=log) == [1.0, 1.0, 0.0, 0.0, 1.0, 0.0]
    assert log.values["parse_rate"] == [pytest.approx(0.5)]
    assert reward.__name__ == "format" and (reward.low, reward.high) == (0.0, 1.0)


def test_q_advantage_values_ties_and_all_equal(lake_codec):
    reward = QAdvantageReward(lake_codec, bonus=0.1)
    q = [0.5, 0.1, 0.5, 0.3]  # LEFT and RIGHT tied optimal
    actions = ["LEFT", "RIGHT", "DOWN", "UP", "JUMP"]
    completions = [_chat(f"<answer>{a}</answer>") for a in actions]
    log = Metrics()
    values = reward(completions=completions, q_values=[q] * 5, optimal_actions=[[0, 2]] * 5, log_metric=log)
    assert values == pytest.approx([1.0, 1.0, 0.0, 0.9 * 0.5, 0.0])
    assert log.values["optimal_action_rate"] == [pytest.approx(2 / 5)]
    # without optimal_actions the tie is found from the Q-values (within 1e-9)
    assert reward(completions=completions[:2], q_values=[q] * 2) == [1.0, 1.0]
    # all actions equal: every valid action is optimal; an invalid one still gets the lowest value
    flat = [[0.2] * 4] * 2
    assert reward(completions=[_chat("<answer>UP</answer>"), _chat("?")], q_values=flat) == [1.0, 0.0]
    # a near-optimal action listed as optimal gets the bonus on top of its normalized advantage
    near = [0.5, 0.1, 0.49, 0.3]
    assert reward(completions=[_chat("<answer>RIGHT</answer>")], q_values=[near], optimal_actions=[[0, 2]]) == [
        pytest.approx(min(1.0, 0.9 * (0.39 / 0.4) + 0.1))
    ]


def test_bc_discrete_counts_tied_optimal_actions(lake_codec):
    reward = BCReward(lake_codec)
    completions = [_chat("<answer>LEFT</answer>"), _chat("<answer>RIGHT</answer>"), _chat("<answer>UP</answer>"),
                   _chat("<answer>5</answer>")]
    assert reward(completions=completions, action=[0] * 4) == [1.0, 0.0, 0.0, 0.0]
    assert reward(completions=completions, action=[0] * 4, optimal_actions=[[0, 2]] * 4) == [1.0, 1.0, 0.0, 0.0]


def test_bc_continuous_scaled_distance_and_out_of_range(box_codec):
    reward = BCReward(box_codec)
    target = [[0.0, 0.0]] * 5
    completions = ["<action>0.00 0.00</action>", "<action>0.50 -1.00</action>", "<action>5.00 0.00</action>",
                   "<action>abc 0</action>", "<action>0.1</action>"]
    values = reward(completions=completions, action=target)
    # range width 2 per dim: |0.5|/2 = 0.25 and |-1|/2 = 0.5 -> 1 - 0.375; 5.0 is clipped to the bound 1.0
    assert values == pytest.approx([1.0, 0.625, 0.75, 0.0, 0.0])


def test_the_gap_between_sampled_and_played_actions_is_logged(box_codec):
    """Two groups of sampled answers: the spread around each group's mean (the action bin-mean decoding plays) and,
    for a reward that scores actions offline, the played action's reward minus the samples' mean reward."""
    reward, metrics = BCReward(box_codec), Metrics()
    prompts = ["s1", "s1", "s2", "s2"]
    completions = ["<action>0.50 0.00</action>", "<action>-0.50 0.00</action>",  # mean (0, 0): the target
                   "<action>0.00 0.00</action>", "<action>0.00 0.00</action>"]   # no spread
    reward(prompts=prompts, completions=completions, action=[[0.0, 0.0]] * 4, log_metric=metrics)
    # group 1: |0.5| / 2 on dim 0, 0 on dim 1 -> 0.125; group 2: 0 -> mean 0.0625
    assert metrics.values["sampled_vs_played"] == [pytest.approx(0.0625)]
    # group 1: the mean action scores 1.0, the samples 0.875 each -> +0.125; group 2: 0 -> mean 0.0625
    assert metrics.values["bc/played_minus_sampled"] == [pytest.approx(0.0625)]
    discrete = Metrics()
    FormatReward(FrozenLakeGridCodec.for_map(load_map("4x4"), slippery=True, style="chat"))(
        prompts=["a", "a"], completions=[_chat("<answer>LEFT</answer>")] * 2, log_metric=discrete)
    assert "sampled_vs_played" not in discrete.values  # discrete actions: the played answer is one of the samples


def test_bc_continuous_with_infinite_bounds_uses_exp():
    obs = gym.spaces.Box(-np.inf, np.inf, (1,), np.float64)
    codec = make_codec("raw", obs, gym.spaces.Box(-np.inf, np.inf, (1,), np.float64), precision=1)
    values = BCReward(codec)(completions=["<action>2.0</action>"], action=[[0.0]])
    assert values == pytest.approx([np.exp(-2.0)])


def test_tokenized_out_of_range_token_gets_the_lowest_value():
    rng = np.random.default_rng(0)
    act = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    codec = make_codec("tokenized", gym.spaces.Box(-5, 5, (3,), np.float32), act,
                       observations=rng.uniform(-5, 5, (50, 3)), actions=rng.uniform(-1, 1, (50, 2)), tokens=10)
    reward = BCReward(codec)
    assert reward(completions=["<action>3 12</action>", "<action>-1 0</action>"], action=[[0, 0]] * 2) == [0.0, 0.0]
    assert FormatReward(codec)(completions=["<action>9 0</action>", "<action>9 10</action>"]) == [1.0, 0.0]


@pytest.mark.parametrize("name", sorted(set(REWARDS) - {"critic"}))  # critic: tests/test_awr.py (a trained critic)
def test_every_reward_is_bounded_on_garbage(name, lake_codec, box_codec):
    codec = lake_codec if name in ("q-advantage", "env") else box_codec
    reward = build_rewards([name], codec, ["prompt", "action", "q_values", "state", "optimal_actions"])[0]
    n = len(GARBAGE)
    columns = {"action": [[0.0, 0.0]] * n if codec is box_codec else [0] * n, "q_values": [[0.1, 0.2, 0.3, 0.4]] * n,
               "state": [0] * n, "optimal_actions": [[3]] * n}
    values = reward(completions=GARBAGE, **columns)
    assert len(values) == n
    assert all(np.isfinite(v) and reward.low <= v <= reward.high for v in values)
    assert values.count(reward.low) >= n - 1  # only "<action>9..." style inputs could be valid; none are


def test_env_reward_frozenlake_equals_a_fresh_env_step(lake_codec):
    reward = EnvReward(lake_codec)  # slippery 4x4: from 14, RIGHT reaches the goal with p = 1/3
    right, bad = _chat("<answer>RIGHT</answer>"), _chat("<answer>??</answer>")
    values = []
    for _ in range(30):  # one batch per call: each call draws its own rollout
        batch = reward(completions=[right, right, bad], state=[14] * 3)
        assert batch[0] == batch[1]  # one (state, action) pair of a batch shares its rollout
        assert batch[2] == reward.low == 0.0
        fresh = gym.make("FrozenLake-v1", desc=lake_codec.env_kwargs["desc"], is_slippery=True)
        fresh.reset(seed=reward.seed_for(repr(14), 0))
        fresh.unwrapped.s = 14
        assert batch[0] == fresh.step(2)[1]
        values.append(batch[0])
    assert 0 < sum(values) < 30  # stochastic: some reach the goal, some do not


def test_env_reward_cartpole_and_halfcheetah_match_real_steps():
    from rlft.envs.spaces import space_to_dict

    for env_id, atol in (("CartPole-v1", 0.0), ("HalfCheetah-v5", 1e-3)):
        env = gym.make(env_id)
        codec = make_codec("raw", space_to_dict(env.observation_space), space_to_dict(env.action_space),
                           precision=6, env_id=env_id)
        reward = EnvReward(codec)
        obs, _ = env.reset(seed=5)
        env.action_space.seed(5)
        observations, completions, expected = [], [], []
        for _ in range(10):
            action = env.action_space.sample()
            text = codec.encode_action(action)
            exact = codec.decode_action(codec.template.answer_text(text))  # what the reward will step
            nxt, r, terminated, truncated, _ = env.step(exact)
            observations.append(obs.tolist())
            completions.append(codec.template.answer_text(text))
            expected.append(r)
            obs = nxt
        values = reward(completions=completions, observation=observations)
        lo, hi = reward.low, reward.high
        assert values == pytest.approx([min(hi, max(lo, r)) for r in expected], abs=atol)


def test_env_reward_lookahead_and_bounds(lake_codec):
    reward = EnvReward(lake_codec, horizon=3, policy="random", samples=4)
    assert (reward.low, reward.high) == (0.0, 3.0)
    values = reward(completions=[_chat("<answer>DOWN</answer>")], state=[0])
    assert 0.0 <= values[0] <= 3.0
    # a deterministic corridor S F F F G: from the start, RIGHT repeated reaches the goal on the 4th step
    from rlft.envs.frozenlake import LakeMap

    corridor = FrozenLakeGridCodec.for_map(LakeMap("corridor", ("SFFFG",)), slippery=False, style="chat")
    right, left = _chat("<answer>RIGHT</answer>"), _chat("<answer>LEFT</answer>")
    assert EnvReward(corridor, horizon=4, policy="repeat")(completions=[right, left], state=[0, 0]) == [1.0, 0.0]
    assert EnvReward(corridor, horizon=3, policy="repeat")(completions=[right], state=[0]) == [0.0]
    assert EnvReward(corridor, horizon=1)(completions=[right], state=[3]) == [1.0]
    with pytest.raises(InvalidInputError, match="neither"):
        EnvReward(lake_codec, policy="greedy")
    box = make_codec("raw", gym.spaces.Box(-1, 1, (1,)), gym.spaces.Box(-1, 1, (1,)), precision=1)
    with pytest.raises(InvalidInputError, match="env id"):
        EnvReward(box)


def test_missing_columns_and_unknown_names_are_explained(lake_codec):
    with pytest.raises(InvalidInputError, match="reward 'q-advantage' needs column q_values"):
        build_rewards("format,q-advantage", lake_codec, ["prompt", "completion"])
    with pytest.raises(InvalidInputError, match="reward 'env' needs column observation or state"):
        build_rewards(["env"], lake_codec, ["prompt", "action"])
    with pytest.raises(InvalidInputError, match="unknown reward 'accuracy'"):
        parse_reward_names("format,accuracy")
    with pytest.raises(InvalidInputError, match="twice"):
        parse_reward_names("format,format")
    assert parse_reward_names(" Format , q_advantage ") == ["format", "q-advantage"]
    with pytest.raises(InvalidInputError, match="discrete"):
        build_rewards(["q-advantage"], make_codec("raw", gym.spaces.Box(-1, 1, (1,)), gym.spaces.Box(-1, 1, (1,))),
                      ["q_values"])


def test_env_reward_with_an_expert_lookahead_scores_the_experts_return(tmp_path_factory):
    from eval_factories import small_ppo
    from rlft.envs.spaces import space_to_dict
    from rlft.sources.experts import load_expert

    expert_path = small_ppo(tmp_path_factory)
    env = gym.make("CartPole-v1")
    codec = make_codec("raw", space_to_dict(env.observation_space), space_to_dict(env.action_space),
                       precision=6, env_id="CartPole-v1")
    reward = EnvReward(codec, horizon=30, policy=str(expert_path))
    obs, _ = env.reset(seed=3)
    expert, _ = load_expert(expert_path)
    completions = [codec.template.answer_text(codec.encode_action(a)) for a in (0, 1)]
    values = reward(completions=completions, observation=[obs.tolist()] * 2)
    for action, value in zip((0, 1), values, strict=True):  # the same rollout by hand: the action, then the expert
        replay = gym.make("CartPole-v1")
        replay.reset(seed=0)
        replay.unwrapped.state = np.asarray(obs, dtype=np.float64)
        total, current = 0.0, action
        for _ in range(30):
            nxt, r, terminated, truncated, _ = replay.step(current)
            total += r
            if terminated or truncated:
                break
            current = int(expert.predict(nxt, deterministic=True)[0])
        assert value == pytest.approx(total)
    with pytest.raises(InvalidInputError, match="trained on CartPole-v1"):
        EnvReward(make_codec("raw", space_to_dict(env.observation_space), space_to_dict(env.action_space),
                             precision=3, env_id="CartPole-v0"), policy=str(expert_path))


def test_a_reward_that_cannot_score_any_answer_is_an_error_not_a_floor():
    """--reward env on Pendulum (its state cannot be restored from an observation): every valid answer would have
    scored the floor, silently; it is an error naming the cause, while an unparsable answer still gets the floor."""
    codec = make_codec("raw", gym.spaces.Box(-8, 8, (3,), np.float32), gym.spaces.Box(-2, 2, (1,), np.float32),
                       precision=2, env_id="Pendulum-v1")
    reward = EnvReward(codec)
    rows = {"observation": [[1.0, 0.0, 0.0]] * 2}
    assert reward(completions=["garbage", "<answer>?</answer>"], **rows) == [reward.low, reward.low]
    with pytest.raises(InvalidInputError, match="could not score any of 2 valid answers .*cannot restore"):
        reward(completions=[codec.build_completion(np.array([0.5])), codec.build_completion(np.array([-0.5]))],
               **rows)
    with pytest.raises(InvalidInputError, match="stepping Pendulum-v1 from the row.s recorded state, and cannot "):
        reward.preflight([{"observation": [1.0, 0.0, 0.0], "completion": codec.build_completion(np.array([0.5]))}])


def test_preflight_refuses_rows_a_restorable_env_cannot_score():
    """HalfCheetah can be restored, but not into an observation of infinities: said before step 1."""
    pytest.importorskip("mujoco")
    obs_space = gym.spaces.Box(-np.inf, np.inf, (17,), np.float64)
    codec = make_codec("raw", obs_space, gym.spaces.Box(-1, 1, (6,), np.float32), precision=2,
                       env_id="HalfCheetah-v5")
    reward = EnvReward(codec)
    good = {"observation": [0.0] * 17, "action": [0.1] * 6}
    reward.preflight([good])  # a real state scores
    with pytest.raises(InvalidInputError, match="reward 'env' cannot score this data"):
        reward.preflight([{"observation": [float("inf")] * 17, "action": [0.1] * 6}])


@pytest.mark.slow
def test_grpo_with_env_reward_on_a_non_restorable_env_fails_before_step_one(tmp_path_factory, tmp_path, cli):
    from eval_factories import minari_dataset_folder, tiny_model

    data = minari_dataset_folder(tmp_path_factory, "Pendulum-v1", "binned", episodes=2, max_steps=10, bins=8)
    model = tiny_model(tmp_path_factory, data, "pendulum-env-reward")
    out = tmp_path / "run"
    result = cli("train", "grpo", "--dataset", data, "--model", model, "--out", out, "--reward", "env",
                 "--max-steps", "2", "--num-generations", "2", "--batch-size", "2")
    assert result.exit_code == 2
    assert "cannot restore a recorded state into Pendulum-v1" in " ".join(result.output.split())
    assert not out.exists()
