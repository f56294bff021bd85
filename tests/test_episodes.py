"""Episodic GRPO (``--rollout episode``): conversations as prompts, episodes played by a tiny model, the rewards
TRL optimises, and the errors of bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from factories import lake_episode_config, make_cartpole_text_model, make_continuous_minari_dataset, write_map
from rlft.codecs.template import PromptTemplate
from rlft.core.errors import InvalidInputError
from rlft.train.grpo.config import GRPOStageConfig


def _invoke(*args):
    from typer.testing import CliRunner

    from rlft.cli.main import app

    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    """FrozenLake exact-Q data on a 2x2 slippery lake (a random policy reaches the goal within 4 turns often
    enough for GRPO groups to differ), chat prompts, and a tiny model with room for the turns."""
    root = tmp_path_factory.mktemp("episodes-lake")
    data, model = root / "frozenlake-q", root / "tiny"
    lake_map = write_map(root, ["SF", "FG"])
    result = _invoke("data", "export-q", "frozenlake", "--map", lake_map, "--out", data, "--episodes", "10",
                     "--wording", "compact")
    assert result.exit_code == 0, result.output
    result = _invoke("model", "init", "--dataset", data, "--out", model, "--max-positions", "512")
    assert result.exit_code == 0, result.output
    return data, model


@pytest.fixture(scope="module")
def pole(tmp_path_factory):
    """CartPole random-play data (raw codec, plain prompts) and a tiny model whose tokenizer reads it."""
    return make_cartpole_text_model(tmp_path_factory.mktemp("episodes-pole"))


def _rollout(data, model_dir, max_turns=4, temperature=1.0, constrained=True):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlft.codecs import load_codec
    from rlft.train.grpo.episodes import EpisodeRollout

    codec = load_codec(data)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    return EpisodeRollout(codec, tokenizer, max_turns, temperature, constrained=constrained), model


@pytest.fixture(scope="module")
def cheetah(tmp_path_factory):
    """HalfCheetah-shaped data (raw codec, 1 decimal, plain prompts) and a tiny model: continuous actions."""
    from rlft.datasets.serialize import serialize
    from rlft.datasets.serialize_options import SerializeConfig
    from rlft.models.tiny import ModelInitConfig, init_model

    root = tmp_path_factory.mktemp("episodes-cheetah")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MINARI_DATASETS_PATH", str(root / "minari"))
        make_continuous_minari_dataset("mujoco/fake-v0", episodes=3, steps=20)
        serialize(SerializeConfig(source="mujoco/fake-v0", out=root / "data", precision=1, prompt_style="plain"))
    init_model(ModelInitConfig(dataset=str(root / "data"), out=root / "tiny", max_positions=1024))
    return root / "data", root / "tiny"


# ------------------------------------------------------------------------------------------------------------
# the template's conversations
# ------------------------------------------------------------------------------------------------------------
def test_conversation_keeps_the_last_turns_chat_and_plain():
    past = [(f"<o>{i}</o>", f"<a>{i}</a>") for i in range(5)]
    chat = PromptTemplate(style="chat", system="S", instruction="{observation}", turns=3)
    messages = chat.build_conversation(past, "<o>9</o>")
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert [m["content"] for m in messages[1:]] == ["<o>3</o>", "<a>3</a>", "<o>4</o>", "<a>4</a>", "<o>9</o>"]
    plain = PromptTemplate(style="plain", instruction="{observation}\n", turns=2)
    assert plain.build_conversation(past, "<o>9</o>") == "<o>4</o><a>4</a>\n<o>9</o>\n"
    # turns 0 or 1 (and no past): the single-turn prompt, so old codecs read back unchanged
    assert PromptTemplate(style="chat", system="S").build_conversation(past, "x") == \
        PromptTemplate(style="chat", system="S").build_prompt("x")
    with pytest.raises(ValueError, match="turns"):
        PromptTemplate(turns=-1)


def test_llm_policy_builds_the_conversation_from_its_own_answers(lake):
    from rlft.codecs import load_codec
    from rlft.policy.generation import GenerationBackend
    from rlft.policy.llm_policy import LLMPolicy

    codec = load_codec(lake[0])
    codec.template.turns = 3
    valid = codec.template.answer_text(codec.encode_action(2))

    class Scripted(GenerationBackend):
        """A valid answer the first time, then something unparsable."""

        def _generate(self, prompts):
            self.requests += len(prompts)
            return [valid if self.requests == 1 else "no idea" for _ in prompts]

    policy = LLMPolicy(codec, Scripted(cache=False), 0, codec.make_env().action_space)
    policy.begin_episode(0, 0, 0, 0)
    assert policy.act([0], [0]).tolist() == [2]
    assert policy.act([1], [0]).tolist() == [0]  # the fallback
    prompt = policy.prompt(2, 0)
    obs = [codec.encode_observation(o) for o in (0, 1, 2)]
    users = [codec.template.user_text(o) for o in obs]
    assert prompt == codec.template.build_conversation([(users[0], valid), (users[1], "no idea")], obs[2])
    assert policy.invalid == 1


# ------------------------------------------------------------------------------------------------------------
# playing episodes
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("which", ["lake", "pole", "cheetah"])
def test_episodes_are_the_conversations_evaluation_sees_and_replay_exactly(which, request):
    data, model_dir = request.getfixturevalue(which)
    rollout, model = _rollout(data, model_dir, max_turns=3 if which == "cheetah" else 4)
    episodes = rollout.play(model, [11, 11, 12, 13])
    backend = rollout.sampler.backend(model)
    for episode in episodes:
        assert 1 <= episode.turns <= 4 and len(episode.answers) == episode.turns
        assert len(episode.completion_ids) == len(episode.env_mask) == len(episode.logprobs) == len(episode.turn_ids)
        assert all(lp <= 0.0 for lp in episode.logprobs)
        # --credit state reads which turn wrote each token: exactly the model's tokens, turns in order
        turns = [t for t in episode.turn_ids if t >= 0]
        assert [t >= 0 for t in episode.turn_ids] == [bool(m) for m in episode.env_mask]
        assert turns == sorted(turns) and set(turns) == set(range(episode.turns))
        assert episode.truncated == (not episode.done or episode.truncated)
        # the tokens before the last answer are exactly evaluation's prompt for the last turn
        last = rollout.template.build_conversation(
            list(zip(episode.users[:-1], episode.answers[:-1], strict=True)),
            episode.observations[-1])
        ids = backend.prompt_ids(last)
        assert episode.sequence()[: len(ids)] == ids
        cut = len(ids) - len(episode.prompt_ids)
        assert all(episode.env_mask[cut:])  # after it, only the model's last answer
        # before it, the tokens marked as the model's are its earlier answers (the rest is the environment's)
        eos = set(backend.eos)
        mine = [t for t, m in zip(episode.completion_ids[:cut], episode.env_mask[:cut], strict=True)
                if m and t not in eos]
        written = rollout.tokenizer.decode(mine, skip_special_tokens=True)
        assert "".join(written.split()) == "".join("".join(episode.answers[:-1]).split())
        # replaying the actions in a fresh environment with the same seed gives the same return
        env = rollout.codec.make_env()
        env.reset(seed=episode.seed)
        total = 0.0
        for action in episode.actions:
            _, reward, terminated, truncated, _ = env.step(action)
            total += reward
        assert total == pytest.approx(episode.ret)
        assert (terminated or truncated) == episode.done
        # the loss sees the model's tokens that were a choice: the grammar forced the rest (the answer's tags)
        loss = episode.loss_mask()
        assert all(m <= e for m, e in zip(loss, episode.env_mask, strict=True))
        chosen = [t for t, m in zip(episode.completion_ids, loss, strict=True) if m]
        forced = [t for t, m, c in zip(episode.completion_ids, episode.env_mask, loss, strict=True) if m and not c]
        assert chosen and forced and len(chosen) < len(forced) + len(chosen)
        assert "answer" not in rollout.tokenizer.decode(chosen, skip_special_tokens=True)


def test_unparsable_answers_play_the_fallback_and_score_lowest(lake, monkeypatch):
    from rlft.policy.generation import TransformersBackend

    data, model_dir = lake
    rollout, model = _rollout(data, model_dir, max_turns=3, constrained=False)

    def garbage(self, prompts):
        ids = self.tokenizer("nonsense", add_special_tokens=False)["input_ids"]
        return [list(ids)] * len(prompts), ["nonsense"] * len(prompts), [[-1.0] * len(ids)] * len(prompts)

    monkeypatch.setattr(TransformersBackend, "sample_ids", garbage)
    episodes = rollout.play(model, [1, 2])
    out = rollout.output(episodes)
    assert [e.invalid for e in episodes] == [e.turns for e in episodes]
    assert all(a == rollout.fallback for e in episodes for a in e.actions)
    assert out["episode_valid"] == [0.0, 0.0]


# ------------------------------------------------------------------------------------------------------------
# training through TRL
# ------------------------------------------------------------------------------------------------------------
def test_episodic_grpo_trains_the_adapter_and_rewards_are_the_replayed_returns(lake, tmp_path, monkeypatch):
    import torch
    from transformers import TrainerCallback

    from rlft.train.grpo import episodes as episodes_module
    from rlft.train.grpo.run import run_grpo

    played = []
    original = episodes_module.EpisodeRollout.output

    def recording(self, episodes):
        out = original(self, episodes)
        played.append((list(episodes), out))
        return out

    monkeypatch.setattr(episodes_module.EpisodeRollout, "output", recording)

    class Watch(TrainerCallback):
        def on_train_begin(self, args, state, control, model=None, **kwargs):
            self.before = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}

        def on_train_end(self, args, state, control, model=None, **kwargs):
            self.after = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}

    data, model_dir = lake
    watch = Watch()
    out = tmp_path / "run"
    config = GRPOStageConfig.of(dataset=str(data), model=str(model_dir), out=out, rollout="episode",
                             rewards=["return", "format"], max_turns=4, episode_starts=8, num_generations=4,
                             per_device_train_batch_size=16, learning_rate=5e-3, max_steps=3, logging_steps=1,
                             lora=True, seed=2)
    info = run_grpo(config, callbacks=[watch])
    changed = [n for n in watch.before if not torch.equal(watch.before[n], watch.after[n])]
    assert watch.before and changed, "no LoRA parameter changed"
    assert played, "the rollout was never called"
    from rlft.codecs import load_codec

    codec = load_codec(out)
    assert codec.template.turns == 4  # evaluation of the run builds the same conversations
    for episodes, output in played:
        for episode, reward in zip(episodes, output["episode_return"], strict=True):
            env = codec.make_env()
            env.reset(seed=episode.seed)
            assert sum(env.step(a)[1] for a in episode.actions) == pytest.approx(reward)
    metrics = info["metrics"]
    for key in ("episode/return_last", "episode/success_rate_last", "episode/turns_last",
                "episode/invalid_rate_last", "rewards/return/mean_last", "rewards/format/mean_last"):
        assert key in metrics, key
    assert 1.0 <= metrics["episode/turns_last"] <= 4.0
    assert metrics["episodes_played"] == 3 * 16 and 0.0 < metrics["rollout_share"] < 1.0
    saved = json.loads((out / "rlft_run.json").read_text())
    assert saved["rollout"] == "episode" and saved["max_turns"] == 4
    assert [r["name"] for r in saved["rewards"]] == ["return", "format"]
    # the results record keeps the learning curve from the trainer's own log: one point per logged step
    from rlft.results.record import read_run_record

    record = read_run_record(out)
    assert [step for step, _ in record["curve"]] == [1.0, 2.0, 3.0]
    assert all(0.0 <= rate <= 1.0 for _, rate in record["curve"])
    assert record["curve_axes"] == ["optimizer step", "training episodes' success rate"]


# ------------------------------------------------------------------------------------------------------------
# bad input: refused before training
# ------------------------------------------------------------------------------------------------------------
def test_bad_episode_settings_fail_before_training(lake, tmp_path):
    from rlft.train.grpo.run import run_grpo

    data, model_dir = lake

    def config(**kw):
        base = dict(dataset=str(data), model=str(model_dir), out=tmp_path / "bad", rollout="episode",
                    rewards=["return"], max_turns=2, episode_starts=2, num_generations=2,
                    per_device_train_batch_size=4, max_steps=1)
        return GRPOStageConfig.of(**{**base, **kw})

    with pytest.raises(InvalidInputError, match="--rollout must be one of"):
        run_grpo(config(rollout="episodes"))
    with pytest.raises(InvalidInputError, match="unknown reward 'q-advantage'"):
        run_grpo(config(rewards=["return", "q-advantage"]))
    with pytest.raises(InvalidInputError, match="needs the 'return' reward"):
        run_grpo(config(rewards=["format"]))
    with pytest.raises(InvalidInputError, match="positions"):
        run_grpo(config(max_turns=40))
    with pytest.raises(InvalidInputError, match="--episode-starts"):
        run_grpo(config(episode_starts=0))
    assert not (tmp_path / "bad").exists()


@pytest.mark.slow
def test_an_episodic_run_from_a_one_step_model_refuses_unless_asked(lake, tmp_path):
    """An SFT run trained on one-step prompts, continued with episodes played as conversations: refused with the
    reason before anything is written; --allow-format-change runs it; --credit answers keeps the format."""
    from rlft.train.grpo.run import run_grpo
    from rlft.train.sft import run_sft
    from rlft.train.sft_config import SFTStageConfig

    data, model_dir = lake
    start = tmp_path / "sft"
    run_sft(SFTStageConfig.of(dataset=str(data), model=str(model_dir), out=start, lora=False, max_steps=2,
                           eval_split="none", save_steps=1000))
    out = tmp_path / "grpo"
    with pytest.raises(InvalidInputError, match="trained on one-step prompts .* conversation of up to 4 turns"):
        run_grpo(lake_episode_config(data, start, out, max_steps=1))
    assert not out.exists()
    info = run_grpo(lake_episode_config(data, start, out, max_steps=1, allow_format_change=True))
    assert info["status"] == "complete" and info["config"]["allow_format_change"] is True


def test_the_context_check_bounds_every_turn_an_episode_plays(pole):
    """check_context's estimate (longest observation and answer of a random rollout, plus the generation budget)
    is at least what every played turn needs; one built on the reset state let a CartPole run overflow."""
    from rlft.train.grpo.episode_setup import check_context

    rollout, model = _rollout(*pole, max_turns=6)
    bound = check_context(rollout, rollout.tokenizer, model)
    backend = rollout.sampler.backend(model)
    needed = [
        len(backend.prompt_ids(rollout.template.build_conversation(
            list(zip(ep.users[:t], ep.answers[:t], strict=True)), ep.observations[t]))) + backend.max_new_tokens
        for ep in rollout.play(model, [0, 1, 2, 3]) for t in range(len(ep.observations))
    ]
    assert len(needed) > 8 and max(needed) <= bound


def test_a_codec_without_an_environment_is_refused(lake, tmp_path):
    from rlft.codecs import load_codec
    from rlft.train.grpo.episode_setup import check_episode_env

    codec = load_codec(lake[0])
    codec.env_id = None
    with pytest.raises(InvalidInputError, match="env id"):
        check_episode_env(codec)
    codec.env_id = "NoSuchEnv-v9"
    with pytest.raises(InvalidInputError, match="cannot make environment"):
        check_episode_env(codec)


def _cartpole_raw_codec():
    """CartPole-v1 and a raw codec for it: what the episode-start tests reset and encode."""
    import gymnasium as gym

    from rlft.codecs import make_codec

    env = gym.make("CartPole-v1")
    return env, make_codec("raw", env.observation_space, env.action_space, env_id="CartPole-v1", precision=2,
                           observations=np.zeros((2, 4)), actions=np.zeros(2, dtype=int))


def test_episode_starts_are_seeded_resets():
    from rlft.train.grpo.episode_setup import episode_starts

    env, codec = _cartpole_raw_codec()
    starts = episode_starts(codec, 3, seed=5)
    assert starts["reset_seed"] == [1_000_500_015, 1_000_500_016, 1_000_500_017]
    obs, _ = env.reset(seed=1_000_500_016)
    assert starts[1]["prompt"] == codec.build_prompt(obs)


def test_episode_starts_never_meet_evaluation_seeds():
    """On random maps a reset seed is a map: training starts must not be the seeds evaluation plays (S + i for the
    recipes' S = 0, the run's seed or {seed}000), or the policy would be scored on the maps it trained on."""
    from rlft.train.grpo.episode_setup import episode_starts

    _, codec = _cartpole_raw_codec()
    for seed in (0, 1, 13):
        starts = set(episode_starts(codec, 64, seed=seed)["reset_seed"])
        for base in (0, seed, seed * 1000):
            assert not starts & set(range(base, base + 1000)), (seed, base)
