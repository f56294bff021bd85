"""Episodic GRPO with complete answer groups (``--credit answers``): the critic's values per answer, how visited
states are drawn, and a real TRL run whose groups hold every answer of states the model's own episodes visited."""

from __future__ import annotations

import json

import numpy as np
import pytest

from factories import greedy_success, lake_episode_config, make_lake_q_model
from rlft.codecs import load_codec
from rlft.core.errors import InvalidInputError
from rlft.train.grpo.config import GRPOStageConfig
from rlft.train.grpo.credit import ExperienceModel
from rlft.train.grpo.episode_answers import EpisodeAnswerRollout, answer_values
from rlft.train.grpo.episodes import Episode


def test_answer_values_are_the_critics_q_and_an_untried_answer_is_scored_as_the_best_tried():
    model = ExperienceModel(gamma=0.5)
    model.add("lake", ["s0", "s1"], [2, 1], [0.0, 1.0], "goal", terminated=True)  # s0 -2-> s1 -1-> goal (1)
    model.add("lake", ["s0"], [0], [0.0], "hole", terminated=True)  # s0 -0-> hole (0)
    q = model.values()
    assert answer_values(q, "lake", "s0", [0, 1, 2, 3]) == pytest.approx([0.0, 0.5, 0.5, 0.5])
    assert answer_values(q, "lake", "s1", [0, 1]) == pytest.approx([1.0, 1.0])
    assert answer_values(q, "other", "s0", [0, 1]) == [0.0, 0.0]  # another task: nothing tried


def _episode(observations: list[str]) -> Episode:
    e = Episode(seed=0)
    e.first_prompt = "task"
    e.observations = list(observations)
    e.answers = ["a"] * len(observations)
    return e


def test_states_are_drawn_uniformly_among_distinct_observations_and_again_when_fewer():
    rollout = EpisodeAnswerRollout.__new__(EpisodeAnswerRollout)
    rollout.rng = np.random.default_rng(0)
    episodes = [_episode(["s0", "s1", "s0"]), _episode(["s0", "s2"])]
    picked = rollout.pick(episodes, 3)  # three distinct observations, three groups: each exactly once
    assert sorted(episodes[i].observations[t] for i, t in picked) == ["s0", "s1", "s2"]
    picked = rollout.pick(episodes, 7)  # more groups than observations: every observation at least twice
    seen = [episodes[i].observations[t] for i, t in picked]
    assert len(seen) == 7 and min(seen.count(s) for s in ("s0", "s1", "s2")) >= 2
    with pytest.raises(RuntimeError, match="answered no observation"):
        rollout.pick([_episode([])], 1)


def test_answer_groups_train_through_trl_on_visited_states(tmp_path, monkeypatch):
    from rlft.train.grpo.run import run_grpo

    batches = []
    original = EpisodeAnswerRollout.states

    def recording(self, trainer, rows):
        out = original(self, trainer, rows)
        batches.append((out, self.__call__([r["prompt"] for r in out], trainer)))
        return out

    monkeypatch.setattr(EpisodeAnswerRollout, "states", recording)
    data, model = make_lake_q_model(tmp_path)
    out = tmp_path / "run"
    info = run_grpo(lake_episode_config(data, model, out, credit="answers", credit_gamma=0.9))
    assert len(batches) == 2  # one per optimizer step
    for rows, sampled in batches:
        assert len(rows) == 8
        for g in range(2):  # each group: one visited state, its four answers, the critic's value of each
            group = rows[4 * g: 4 * g + 4]
            assert len({json.dumps(r["prompt"]) for r in group}) == 1
            assert all(len(r["q_values"]) == 4 and r["q_values"] == group[0]["q_values"] for r in group)
            assert len({tuple(c) for c in sampled["completion_ids"][4 * g: 4 * g + 4]}) == 4
    metrics = info["metrics"]
    assert "rewards/critic-q/mean_last" in metrics and "credit/start_value_last" in metrics
    assert metrics["episodes_played"] == 16
    saved = json.loads((out / "rlft_run.json").read_text())
    assert saved["credit"] == "answers" and saved["group"] == "actions" and saved["credit_gamma"] == 0.9
    assert load_codec(out).template.turns == 0  # evaluated on single observations, as its states were trained
    # each state is one observation (a user turn, after the system message), no earlier answers
    assert all([m["role"] for m in r["prompt"]] in (["user"], ["system", "user"]) for rows, _ in batches for r in rows)


def test_answer_groups_refuse_settings_that_cannot_work(tmp_path):
    from rlft.train.grpo.run import run_grpo

    data, model = make_lake_q_model(tmp_path)
    base = dict(dataset=str(data), model=str(model), out=tmp_path / "bad", rollout="episode", credit="answers",
                max_turns=4, episode_starts=4, num_generations=4, per_device_train_batch_size=8, max_steps=1,
                lora=False)
    with pytest.raises(InvalidInputError, match="needs --group actions"):
        run_grpo(GRPOStageConfig.of(**base, group="sampled", rewards=["return"]))
    with pytest.raises(InvalidInputError, match="--reward return, not return,format"):
        run_grpo(GRPOStageConfig.of(**base, rewards=["return", "format"]))
    with pytest.raises(InvalidInputError, match="multiple of 4"):
        run_grpo(GRPOStageConfig.of(**{**base, "num_generations": 2}, rewards=["return"]))
    with pytest.raises(InvalidInputError, match="--group actions is for step rollouts"):
        run_grpo(GRPOStageConfig.of(**{**base, "credit": "model"}, group="actions", rewards=["return"]))
    assert not (tmp_path / "bad").exists()


def test_answer_groups_teach_a_tabular_policy_the_slippery_lake():
    """The loop with a softmax table in the LLM's place: 48 episodes a step from a uniform policy feed the critic, 12
    visited positions a step get every answer scored by it, and each moves by the target advantage
    (``target - pi``). The greedy policy must reach at least 0.6 success (optimal about 0.74) within 60 steps."""
    import gymnasium as gym

    from rlft.train.grpo.action_targets import target_advantages

    rng = np.random.default_rng(0)
    env = gym.make("FrozenLake-v1", map_name="4x4", is_slippery=True)
    logits = np.zeros((16, 4))
    model = ExperienceModel(gamma=0.99)
    rollout = EpisodeAnswerRollout.__new__(EpisodeAnswerRollout)
    rollout.rng = rng
    for _step in range(60):
        policy = np.exp(logits - logits.max(1, keepdims=True))
        policy /= policy.sum(1, keepdims=True)
        episodes = []
        for _ in range(48):
            state, _ = env.reset(seed=int(rng.integers(1 << 30)))
            e, terminated = _episode([]), False
            while not terminated and len(e.actions) < 100:
                action = int(rng.choice(4, p=policy[state]))
                e.observations.append(str(state)), e.answers.append(str(action)), e.actions.append(action)
                state, reward, terminated, _, _ = env.step(action)
                e.rewards.append(float(reward))
            model.add("lake", e.observations, e.actions, e.rewards, str(state), terminated)
            episodes.append(e)
        q = model.values()
        states = [int(episodes[i].observations[t]) for i, t in rollout.pick(episodes, 12)]
        rewards = np.array([answer_values(q, "lake", str(s), [0, 1, 2, 3]) for s in states]).reshape(-1)
        advantages, _ = target_advantages(rewards, policy[states], 4)
        for s, adv in zip(states, advantages.reshape(-1, 4), strict=True):
            logits[s] += 1.0 * adv
    assert greedy_success(env, logits.argmax(1)) >= 0.6


def test_per_state_credit_on_observations_that_never_repeat_is_warned_before_training(tmp_path, capsys):
    from factories import make_cartpole_text_model
    from rlft.train.grpo.settings import warn_unrepeated_states

    cartpole, _ = make_cartpole_text_model(tmp_path)
    (tmp_path / "lake").mkdir()
    lake, _ = make_lake_q_model(tmp_path / "lake")
    capsys.readouterr()
    warn_unrepeated_states(GRPOStageConfig.of(rollout="episode", credit="answers"), load_codec(cartpole))
    assert "rarely repeat exactly" in capsys.readouterr().out
    for codec, credit in ((load_codec(lake), "answers"), (load_codec(cartpole), "episode")):
        warn_unrepeated_states(GRPOStageConfig.of(rollout="episode", credit=credit), codec)
        assert "rarely repeat" not in capsys.readouterr().out


def test_random_maps_are_warned_with_the_local_key_as_the_fix_and_the_local_key_is_not_warned(capsys):
    from rlft.codecs.grid import FrozenLakeGridCodec
    from rlft.train.grpo.settings import warn_unrepeated_states

    codec = FrozenLakeGridCodec.for_random_maps(4, 0.8, True, "chat", "compact")
    capsys.readouterr()
    warn_unrepeated_states(GRPOStageConfig.of(rollout="episode", credit="answers"), codec)
    said = " ".join(capsys.readouterr().out.split())  # the console wraps long lines
    assert "rarely repeat" in said and "--credit-key local" in said
    warn_unrepeated_states(GRPOStageConfig.of(rollout="episode", credit="answers", credit_key="local"), codec)
    assert "rarely repeat" not in capsys.readouterr().out


def test_local_credit_keys_pool_the_critic_over_maps(tmp_path, monkeypatch):
    """--credit-key local: the critic's states are the codec's key (FrozenLake: position and 3x3 neighbourhood),
    one task for all episodes; the groups are still the visited observations, scored by the pooled values."""
    from rlft.codecs.grid import FrozenLakeGridCodec
    from rlft.envs.frozenlake import encode_lake
    from rlft.train.grpo.episodes import EpisodeRollout
    from rlft.train.grpo.run import run_grpo

    codec = FrozenLakeGridCodec.for_random_maps(4, 0.8, True, "chat", "compact")
    # two maps that differ far from the agent: the same key at the start, different observation texts
    a = ("SFFF", "FFFF", "FFFH", "FFFG")
    b = ("SFFF", "FFFF", "FHFF", "FFFG")
    assert codec.credit_key(encode_lake(a, 0)) == codec.credit_key(encode_lake(b, 0)) == "0,0:####FF#FF"
    assert codec.encode_observation(encode_lake(a, 0)) != codec.encode_observation(encode_lake(b, 0))
    assert codec.credit_key(encode_lake(b, 4)) == "1,0:#FF#FF#FH"

    remembered = []
    original = EpisodeRollout.remember

    def recording(self, episodes):
        q = original(self, episodes)
        remembered.append((episodes, q))
        return q

    monkeypatch.setattr(EpisodeRollout, "remember", recording)
    data, model = make_lake_q_model(tmp_path)
    info = run_grpo(lake_episode_config(data, model, tmp_path / "run", credit="answers", credit_key="local"))
    episodes, q = remembered[-1]
    assert {task for task, _obs, _act in q} == {""}  # one task: the keys pool over episodes
    assert all(len(e.keys) == len(e.observations) and all(":" in k for k in e.keys) for e in episodes)
    assert info["metrics"]["episodes_played"] == 16


def test_local_credit_keys_need_answers_and_a_codec_that_defines_them(tmp_path):
    from rlft.train.grpo.run import run_grpo

    data, model = make_lake_q_model(tmp_path)
    with pytest.raises(InvalidInputError, match="--credit-key local needs --credit answers"):
        run_grpo(lake_episode_config(data, model, tmp_path / "a", credit="model", credit_key="local"))
    with pytest.raises(InvalidInputError, match="--credit-key must be one of"):
        run_grpo(lake_episode_config(data, model, tmp_path / "b", credit="answers", credit_key="map"))
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
