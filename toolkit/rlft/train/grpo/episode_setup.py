"""What an episodic GRPO run builds and checks before it plays: the episode starts (reset seeds evaluation never
meets), that the codec's environment can be made with the codec's spaces, and that the longest turn fits the
model's positions."""

from __future__ import annotations

import numpy as np

from rlft.codecs.base import Codec
from rlft.core.errors import InvalidInputError
from rlft.envs.vector_envs import check_spaces
from rlft.policy.generation import generating
from rlft.train.grpo.episodes import EpisodeRollout

# Training episodes start from seeds evaluation never meets: an evaluation seeds episode i with S + i for a small S
# (0, or a recipe's "{seed}000"), and on random maps a reset seed is a map, so a training start that equals an
# evaluation seed would score the policy on a map it trained on (row 9f's seed 0 did, with starts 0..63).
TRAIN_RESET_BASE = 1_000_000_000


def episode_starts(codec: Codec, count: int, seed: int):
    """A ``datasets.Dataset`` of ``count`` episode starts: the first observation's prompt and its reset seed
    (``TRAIN_RESET_BASE + seed * 100_003 + i``: disjoint from evaluation's seeds, distinct across run seeds)."""
    from datasets import Dataset

    if count < 1:
        raise InvalidInputError(f"--episode-starts must be at least 1, got {count}")
    env = codec.make_env()
    try:
        rows = []
        for i in range(count):
            reset_seed = TRAIN_RESET_BASE + int(seed) * 100_003 + i
            obs, _ = env.reset(seed=reset_seed)
            rows.append({"prompt": codec.template.build_conversation([], codec.encode_observation(obs)),
                         "reset_seed": reset_seed})
    finally:
        env.close()
    return Dataset.from_list(rows)


def check_episode_env(codec: Codec) -> None:
    """The codec must name an environment rlft can make, with the spaces the codec was built for."""
    if not codec.env_id:
        raise InvalidInputError("--rollout episode needs a codec that records its env id (codec.env_id)",
                                hint="serialize the dataset from an environment rlft can step")
    try:
        env = codec.make_env()
    except InvalidInputError:
        raise
    except Exception as exc:  # gymnasium raises several types for an id it cannot make
        raise InvalidInputError(f"--rollout episode: cannot make environment {codec.env_id!r}: {exc}") from exc
    try:
        check_spaces("the dataset's codec", codec.observation_space, codec.action_space, codec.env_id,
                     env.observation_space, env.action_space)
    finally:
        env.close()


PROBE_STEPS = 512  # seeded random steps whose observations and actions probe the longest turn


def longest_turn_texts(codec, tokenizer, steps: int = PROBE_STEPS) -> tuple[str, str]:
    """(observation text, action text) with the most tokens over a seeded random rollout: token counts vary with
    signs and digits, and the reset state is among the shortest (a check built on it let a 50-turn CartPole
    prompt through that overflowed the model at turn 50)."""
    env = codec.make_env()
    env.action_space.seed(0)
    obs, _ = env.reset(seed=0)
    observations, actions = [codec.encode_observation(obs)], []
    for _ in range(steps):
        action = env.action_space.sample()
        actions.append(codec.encode_action(action))
        obs, _, terminated, truncated, _ = env.step(action)
        observations.append(codec.encode_observation(obs))
        if terminated or truncated:
            obs, _ = env.reset()
    env.close()

    def longest(texts: list[str]) -> str:  # one batched tokenizer call per list
        ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
        return texts[int(np.argmax([len(i) for i in ids]))]

    return longest(observations), longest(actions)


def check_context(rollout: EpisodeRollout, tokenizer, model) -> int:
    """Tokens of the longest turn (``max_turns`` turns of the longest observation and answer a random rollout
    shows, plus the generation budget); refuses, before training, a model whose positions cannot hold it."""
    obs_text, action_text = longest_turn_texts(rollout.codec, tokenizer)
    answer = rollout.template.answer_text(action_text)
    past = [(rollout.template.user_text(obs_text), answer)] * (rollout.max_turns - 1)
    prompt = rollout.template.build_conversation(past, obs_text)
    with generating(model, tokenizer):
        backend = rollout.sampler.backend(model)  # the backend episodes are played with: same prompt ids and budget
    n = len(backend.prompt_ids(prompt)) + backend.max_new_tokens
    limit = getattr(model.config, "max_position_embeddings", None)
    if limit and n > limit:
        raise InvalidInputError(
            f"an episode of --max-turns {rollout.max_turns} needs up to {n} tokens a turn (prompt and answer); "
            f"the model has {limit} positions",
            hint="lower --max-turns, or make the model with rlft model init --max-positions N")
    return n
