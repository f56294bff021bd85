"""LLM policies in real environments: batched = sequential, constrained = always valid, prompts = training's."""

from __future__ import annotations

import numpy as np
import pytest

from eval_factories import frozenlake_dataset, minari_dataset_folder, sft_run, tiny_model
from rlft.core.errors import InvalidInputError
from rlft.evaluate.config import EvalConfig
from rlft.evaluate.runner import run_evaluation
from rlft.evaluate.setup import build_setup


def _run(**kwargs):
    return run_evaluation(EvalConfig(quiet=True, **kwargs))


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    data = frozenlake_dataset(tmp_path_factory)
    return data, tiny_model(tmp_path_factory, data, "lake", layers=1, hidden=32, heads=2)


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory):
    data = minari_dataset_folder(tmp_path_factory, "CartPole-v1", episodes=30, precision=2)
    model = tiny_model(tmp_path_factory, data, "cartpole")
    return data, model, sft_run(tmp_path_factory, data, model, "cartpole", steps=40, lora=True, learning_rate=1e-2)


@pytest.fixture(scope="module")
def pendulum(tmp_path_factory):
    data = minari_dataset_folder(tmp_path_factory, "Pendulum-v1", episodes=4, max_steps=20, precision=2, history=2,
                                 return_to_go=True)
    return data, tiny_model(tmp_path_factory, data, "pendulum", layers=1, hidden=32, heads=2)


def test_untrained_model_k1_equals_k8_and_constrained_is_always_valid(lake):
    data, model = lake
    # no greedy cache: this test counts generate calls to show the batching
    common = dict(policy=f"llm:{model}", codec=str(data), episodes=6, seed=3, max_episode_steps=6, cache=False)
    free1 = _run(num_envs=1, max_new_tokens=6, **common)
    free8 = _run(num_envs=8, max_new_tokens=6, **common)
    assert free8["num_envs"] == 6  # capped to the episodes
    assert free1["returns"] == free8["returns"] and free1["lengths"] == free8["lengths"]
    # garbage output is counted and replaced by the fallback action, never an exception
    assert free1["invalid_actions"] == free1["decisions"] == sum(free1["lengths"]) > 0
    assert free1["invalid_action_rate"] == 1.0 and free1["invalid_examples"]
    assert free1["generate_calls"] == free1["env_steps"] and free8["generate_calls"] < free1["generate_calls"]
    c1 = _run(num_envs=1, constrained=True, **common)
    c8 = _run(num_envs=8, constrained=True, **common)
    assert c1["invalid_actions"] == c8["invalid_actions"] == 0 and c1["invalid_action_rate"] == 0.0
    assert c1["returns"] == c8["returns"] and c1["lengths"] == c8["lengths"]
    assert c1["constrained"] and c1["constrained_precompute"]["states"] > 5
    # the dataset's Q-values grade every step: agreement is the share of decisions in the optimal set, which the
    # report's policy map (actions taken per state, optimal actions per state) lets us count independently
    taken, optimal = c1["policy_map"]["taken"], c1["policy_map"]["optimal"]
    hits = sum(n for state, counts in taken.items() for a, n in counts.items() if int(a) in optimal.get(state, []))
    total = sum(n for counts in taken.values() for n in counts.values())
    graded = sum(n for state, counts in taken.items() if state in optimal for n in counts.values())
    assert total == c1["decisions"] and c1["expert_agreement"] == pytest.approx(hits / graded)
    fallback = _run(num_envs=2, max_new_tokens=4, fallback_action="RIGHT", **common)
    assert fallback["invalid_action_rate"] == 1.0 and fallback["policy_info"]["fallback_action"] == 2


def test_greedy_cache_generates_each_distinct_prompt_once_and_changes_nothing(lake):
    data, model = lake
    common = dict(policy=f"llm:{model}", codec=str(data), episodes=12, seed=0, num_envs=4, constrained=True,
                  max_episode_steps=30)
    cached = _run(**common)
    fresh = _run(cache=False, **common)
    for key in ("returns", "lengths", "expert_agreement", "invalid_actions", "seeds"):
        assert cached[key] == fresh[key], key
    generated = cached["decisions"] - cached["cache_hits"]
    assert 1 <= generated <= 11 < cached["decisions"]  # at most one generation per FrozenLake decision state
    assert fresh["cache_hits"] == 0 and fresh["generate_calls"] > cached["generate_calls"]
    sampled = _run(temperature=1.0, **common)  # sampling: every decision is generated
    assert sampled["cache_hits"] == 0


def test_sft_run_folder_batched_equals_sequential(cartpole):
    data, _, run = cartpole
    # no --codec: the RUN folder's rlft_codec.json is the codec; LoRA adapter merged on its base
    one = _run(policy=f"llm:{run}", episodes=6, num_envs=1, seed=11)
    eight = _run(policy=f"llm:{run}", episodes=6, num_envs=8, seed=11)
    assert one["env_id"] == "CartPole-v1" and "rlft_codec.json" in one["codec_source"]
    assert one["returns"] == eight["returns"] and one["seeds"] == list(range(11, 17))
    assert one["invalid_action_rate"] == 0.0  # trained on the format for a few steps
    assert eight["generate_calls"] < one["generate_calls"] == one["env_steps"]
    assert one["normalized_score"] is not None
    from pathlib import Path

    from rlft.evaluate.setup import _run_dataset

    assert _run_dataset(str(run)) == str(Path(data).resolve())  # its Q-values / best return are found through it


def test_a_codec_for_another_env_than_the_runs_is_refused_unless_allowed(cartpole, lake):
    _, _, run = cartpole
    lake_data, _ = lake
    with pytest.raises(InvalidInputError, match=r"frozenlake-grid codec for FrozenLake-v1, but .* was trained with a "
                                                r"\w+ codec for CartPole-v1"):
        _run(policy=f"llm:{run}", codec=str(lake_data), episodes=1)
    # allowed: the codec check is passed, and the next one says why this model cannot read FrozenLake prompts
    with pytest.raises(InvalidInputError, match="exceeds the model's 256 positions"):
        _run(policy=f"llm:{run}", codec=str(lake_data), episodes=1, allow_codec_mismatch=True)


def test_raw_continuous_codec_constrained_with_history_and_return_to_go(pendulum):
    data, model = pendulum
    common = dict(policy=f"llm:{model}", codec=str(data), episodes=3, seed=0, max_episode_steps=5, constrained=True,
                  target_return=-100.0)
    one = _run(num_envs=1, **common)
    three = _run(num_envs=3, **common)
    assert one["invalid_action_rate"] == 0.0 and one["returns"] == three["returns"]
    assert one["policy_info"]["history"] == 2 and one["policy_info"]["return_to_go"]
    assert one["constrained_precompute"]["grammar"].startswith("<action>")


def test_constrained_outputs_parse_for_every_slot(pendulum):
    from rlft.policy.grammar import answer_grammar

    data, model = pendulum
    setup = build_setup(EvalConfig(policy=f"llm:{model}", codec=str(data), constrained=True, target_return=0.0))
    policy = setup.policy
    grammar = answer_grammar(setup.codec)
    rng = np.random.default_rng(0)
    for slot in range(4):
        policy.begin_episode(slot, slot, slot, None)
    prompts = [policy.prompt(rng.uniform(-1, 1, 3).astype(np.float32), s) for s in range(4)]
    texts = policy.backend.generate(prompts)
    assert all(grammar.matches(t) for t in texts), texts
    actions = [setup.codec.decode_action(t) for t in texts]
    assert all(a.shape == (1,) and -2 <= a[0] <= 2 for a in actions)


def test_eval_prompts_are_the_training_prompts(pendulum):
    """Replaying a dataset episode through the policy rebuilds its prompt column exactly (history + rtg)."""
    from rlft.datasets.loading import column_array, read_split

    data, model = pendulum
    table = read_split(data, ["prompt", "observation", "action", "reward", "return_to_go", "episode_id", "step"])
    episode = column_array(table, "episode_id")
    rows = np.flatnonzero(episode == episode[0])
    obs, act = column_array(table, "observation")[rows], column_array(table, "action")[rows]
    rewards, rtg = column_array(table, "reward")[rows], column_array(table, "return_to_go")[rows]
    setup = build_setup(EvalConfig(policy=f"llm:{model}", codec=str(data), target_return=float(rtg[0])))
    policy = setup.policy
    policy.begin_episode(0, 0, 0, obs[0])
    prompts = table.column("prompt").to_pylist()
    for t, row in enumerate(rows):
        assert policy.prompt(obs[t], 0) == prompts[row]
        action = setup.codec.decode_action(setup.codec.build_completion(act[t]))  # the action as the env gets it
        policy.record([0], np.asarray([action]), np.asarray([rewards[t]]))


def test_few_shot_examples_through_the_codec(lake, cartpole):
    data, model = lake
    setup = build_setup(EvalConfig(policy=f"llm:{model}", codec=str(data), n_examples=2))
    prompt = setup.policy.prompt(0, 0)
    roles = [m["role"] for m in prompt]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
    assert prompt[2]["content"].startswith("<answer>") and prompt[-1] == setup.codec.build_prompt(0)[-1]
    cp_data, cp_model, _ = cartpole
    setup = build_setup(EvalConfig(policy=f"llm:{cp_model}", codec=str(cp_data), n_examples=3))
    setup.policy.begin_episode(0, 0, 0, None)
    text = setup.policy.prompt(np.zeros(4, np.float32), 0)
    assert text.count("<observation>") == 4 and text.count("<action>") == 3
    assert text.endswith(setup.codec.build_prompt(np.zeros(4, np.float32)))
    with pytest.raises(InvalidInputError, match="--n-examples needs --codec"):
        build_setup(EvalConfig(policy=f"llm:{cartpole[2]}", n_examples=1))
    with pytest.raises(InvalidInputError, match=r"exceeds the model's \d+ positions"):  # 9 chat examples: too long
        _run(policy=f"llm:{model}", codec=str(data), n_examples=9, episodes=1)


def test_missing_models_and_codecs_fail_clearly(lake, tmp_path, monkeypatch):
    data, model = lake
    with pytest.raises(InvalidInputError, match="does not exist"):
        build_setup(EvalConfig(policy=f"llm:{tmp_path / 'nope'}", codec=str(data)))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(InvalidInputError, match="HF_HUB_OFFLINE"):
        build_setup(EvalConfig(policy="llm:someone/not-a-cached-model", codec=str(data)))
    with pytest.raises(InvalidInputError, match="no codec"):
        build_setup(EvalConfig(policy=f"llm:{model}"))
    with pytest.raises(InvalidInputError, match="does not match CartPole-v1"):
        build_setup(EvalConfig(policy=f"llm:{model}", codec=str(data), env_id="CartPole-v1"))
