"""Episodic GRPO (``rlft train grpo --rollout episode``): the LLM plays whole episodes in the real environment
while it trains, and the reward is what happened over the episode (its return, optionally a format term).

Why TRL's ``rollout_func`` and not ``environment_factory``: ``environment_factory`` exposes an environment as
*tools* that the model calls in its chat template's tool-call syntax. rlft's policies answer in the codec's
grammar (``<action>2</action>``), which is what the datasets, the SFT models, the parser and evaluation share; a
tool-call format would be a second format for the same action (one codec, one truth), and the tiny models have no
tool-calling template. ``rollout_func`` lets rlft play the turns while TRL does all of the optimisation (group
advantages, clipping, KL, LoRA, accelerate): no home-made GRPO loop.

One episode is one GRPO sample. Each prompt row is an episode start (a reset seed); TRL repeats it
``num_generations`` times, so a group is G episodes played from the same seed by the current model. Turn ``t``'s
prompt is ``template.build_conversation`` (the earlier turns, the model's own answers verbatim, then the current
observation) tokenized by the same backend evaluation uses; :class:`rlft.policy.llm_policy.LLMPolicy` builds the
same prompts when the saved codec has ``turns`` set, so the model is evaluated on what it was trained on. All live
episodes of a batch generate together: one ``generate`` call per turn.

How the environment's turns stay out of the loss: the sample is ``prompt_ids`` (turn 0's prompt) and
``completion_ids`` (everything after it: each answer the model sampled, and between answers the tokens that the
chat template and the next observation add) with ``env_mask`` = 1 on sampled tokens and 0 on the environment's.
TRL multiplies its completion mask by ``env_mask``, so only the model's tokens get gradient, KL and entropy. With
constrained sampling the tokens of the format the grammar forces (``<answer>``, ``</answer>``, end-of-turn) are left
out of the loss too (:func:`rlft.train.grpo.sampling.chosen_tokens`): they are no choice, and a loss on them lets
GRPO lower a wrong answer by making its closing tag unlikely instead of the action itself.

Unparsable answers never raise: the fallback action is played, the miss counted, and the ``format`` reward
(the share of valid answers) pays for it; an episode of only unparsable answers gets the lowest format reward.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlft.codecs.base import ActionParseError, Codec
from rlft.core.errors import InvalidInputError
from rlft.envs.frozenlake import is_frozenlake
from rlft.policy.generation import generating
from rlft.policy.policies import default_action
from rlft.train.grpo.credit import ExperienceModel
from rlft.train.grpo.sampling import GrammarSampler, chosen_tokens


@dataclass
class Episode:
    """One played episode: what the rollout returns to TRL, and what a test replays."""

    seed: int
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    chosen: list[int] = field(default_factory=list)  # per completion token: 0 where the grammar forced it
    turn_ids: list[int] = field(default_factory=list)  # per completion token: the turn that wrote it, -1: the env's
    actions: list[Any] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)  # each turn's observation text (through the codec)
    users: list[str] = field(default_factory=list)  # each turn's user text (instruction around the observation)
    answers: list[str] = field(default_factory=list)  # each turn's answer text as the model wrote it
    rewards: list[float] = field(default_factory=list)
    invalid: int = 0
    done: bool = False
    truncated: bool = False
    final_observation: str | None = None  # the observation after the last action (through the codec)
    keys: list[str] = field(default_factory=list)  # each turn's state for the critic (--credit-key)
    final_key: str | None = None
    first_prompt: str = ""  # turn 0's prompt text: what the episode was asked (its task)
    text: str = ""  # the latest prompt's text, and the answers' character spans in it
    spans: list[tuple[int, int]] = field(default_factory=list)

    @property
    def ret(self) -> float:
        return float(sum(self.rewards))

    @property
    def turns(self) -> int:
        return len(self.actions)

    def add_model_tokens(self, ids: list[int], logprobs: list[float], chosen: list[int] | None = None) -> None:
        self.completion_ids += ids
        self.env_mask += [1] * len(ids)
        self.logprobs += logprobs
        self.chosen += chosen if chosen is not None else [1] * len(ids)
        self.turn_ids += [len(self.answers)] * len(ids)  # called before the turn's answer is appended

    def add_env_tokens(self, ids: list[int]) -> None:
        self.completion_ids += ids
        self.env_mask += [0] * len(ids)
        self.logprobs += [0.0] * len(ids)
        self.chosen += [0] * len(ids)
        self.turn_ids += [-1] * len(ids)

    def loss_mask(self) -> list[int]:
        """Per completion token, whether the loss sees it: the model's tokens that were a choice."""
        return [m & c for m, c in zip(self.env_mask, self.chosen, strict=True)]

    def sequence(self) -> list[int]:
        return self.prompt_ids + self.completion_ids


class EpisodeRollout:
    """TRL ``rollout_func``: plays one episode per prompt row with the trainer's current model."""

    def __init__(self, codec: Codec, tokenizer, max_turns: int, temperature: float, top_p: float = 1.0,
                 constrained: bool = True, max_new_tokens: int | None = None, credit: str = "episode",
                 credit_gamma: float = 0.95, step_weight: float = 1.0, credit_window: int = 1,
                 episode_weight: float = 1.0, conversation: bool = True, credit_key: str = "observation"):

        self.credit, self.credit_gamma, self.step_weight = credit, credit_gamma, step_weight
        self.episode_weight = episode_weight
        self.credit_key = credit_key
        self.credit_pool: deque = deque(maxlen=credit_window)  # --credit action: the last steps' turns
        self.experience = ExperienceModel(credit_gamma)  # --credit model: every transition played so far
        self.last_episodes: list[Episode] = []  # the latest batch, in the order TRL holds its samples
        self.codec = codec
        self.template = codec.template
        # conversation: each episode is one GRPO sample, its turns one growing conversation (the codec's template
        # is set to keep every turn, and saved so). Without, turns are prompted as the codec says (--credit answers
        # trains states, not episodes) and episodes keep no token sequence.
        self.conversation = conversation
        if conversation:
            self.template.turns = max_turns
        self.tokenizer = tokenizer
        self.max_turns = max_turns
        self.constrained = constrained
        self.sampler = GrammarSampler(codec, tokenizer, temperature, top_p, constrained, max_new_tokens)
        self._envs: list = []
        env = codec.make_env()
        self.fallback = default_action(env.action_space)
        env.close()
        self.frozenlake = is_frozenlake(codec.env_id)
        self.retokenized = 0
        self.seconds = 0.0  # playing episodes, all calls (the rest of a step is TRL's optimisation)
        self.episodes = 0

    # -- the TRL hook -----------------------------------------------------------------------------------
    def __call__(self, prompts: list, trainer) -> dict[str, list]:
        rows = getattr(trainer, "rlft_rows", None)
        if rows is None or len(rows) != len(prompts):
            raise RuntimeError("episode rollouts need the EpisodeGRPOTrainer (it passes the rows' reset seeds)")
        episodes, _seconds = self.play_rows(trainer, rows)
        self.last_episodes = episodes
        return self.output(episodes)

    def play_rows(self, trainer, rows: list[dict]) -> tuple[list[Episode], float]:
        """(one episode per row, from its ``reset_seed``, with the trainer's current model; seconds it took),
        counted and logged."""
        model = trainer.accelerator.unwrap_model(trainer.model)
        start = time.perf_counter()
        episodes = self.play(model, [int(r["reset_seed"]) for r in rows])
        seconds = time.perf_counter() - start
        self.seconds += seconds
        self.episodes += len(episodes)
        self.log(trainer, episodes, seconds)
        return episodes, seconds

    def key(self, obs, text: str) -> str:
        """The critic's name of a state: its observation text, or the codec's coarser key (``--credit-key local``)."""
        if self.credit_key == "observation":
            return text
        key = self.codec.credit_key(obs)
        if key is None:
            raise InvalidInputError(f"--credit-key local: the {self.codec.kind} codec defines no coarser key",
                                    hint="use --credit-key observation")
        return key

    def task(self, episode: Episode) -> str:
        """The critic's task of ``episode``: its first prompt, or one task for all (local keys pool over tasks)."""
        return episode.first_prompt if self.credit_key == "observation" else ""

    def remember(self, episodes: list[Episode]) -> dict[tuple[str, str, str], float]:
        """Add ``episodes``' transitions to the empirical model; its ``Q`` of every answer tried so far."""
        for e in episodes:
            self.experience.add(self.task(e), e.keys, e.actions, e.rewards, e.final_key, e.done and not e.truncated)
        return self.experience.values()

    def output(self, episodes: list[Episode]) -> dict[str, list]:
        return {
            "prompt_ids": [e.prompt_ids for e in episodes],
            "completion_ids": [e.completion_ids for e in episodes],
            "logprobs": [e.logprobs for e in episodes],
            "env_mask": [e.loss_mask() for e in episodes],
            "episode_return": [e.ret for e in episodes],
            "episode_valid": [1.0 - e.invalid / max(1, e.turns) for e in episodes],
        }

    def log(self, trainer, episodes: list[Episode], seconds: float) -> None:
        mode = "train" if trainer.model.training else "eval"
        # TRL averages and logs every list in _metrics at each logging step (its own rollout metrics live there)
        metrics = trainer._metrics[mode]
        metrics["episode/return"].append(float(np.mean([e.ret for e in episodes])))
        metrics["episode/turns"].append(float(np.mean([e.turns for e in episodes])))
        metrics["episode/invalid_rate"].append(
            sum(e.invalid for e in episodes) / max(1, sum(e.turns for e in episodes)))
        metrics["episode/truncated_rate"].append(float(np.mean([e.truncated for e in episodes])))
        metrics["episode/rollout_seconds"].append(seconds)
        metrics["episode/episodes_per_second"].append(len(episodes) / max(seconds, 1e-9))
        if self.frozenlake:
            metrics["episode/success_rate"].append(float(np.mean([e.ret > 0 for e in episodes])))

    # -- playing ------------------------------------------------------------------------------------------
    def env(self, slot: int):
        while len(self._envs) <= slot:
            self._envs.append(self.codec.make_env())
        return self._envs[slot]

    def play(self, model, seeds: list[int]) -> list[Episode]:
        """Play one episode per seed, all live episodes generating together (one ``generate`` call per turn)."""
        with generating(model, self.tokenizer):
            backend = self.sampler.backend(model)
            episodes = [Episode(seed=s) for s in seeds]
            observations = [self.env(i).reset(seed=s)[0] for i, s in enumerate(seeds)]
            past: list[list[tuple[str, str]]] = [[] for _ in seeds]
            for _turn in range(self.max_turns):
                live = [i for i, e in enumerate(episodes) if not e.done]
                if not live:
                    break
                prompts, users = [], []
                for i in live:
                    obs_text = self.codec.encode_observation(observations[i])
                    episodes[i].observations.append(obs_text)
                    episodes[i].keys.append(self.key(observations[i], obs_text))
                    prompts.append(self._turn_prompt(backend, episodes[i], past[i], obs_text))
                    users.append(self.template.user_text(obs_text))
                ids, texts, logprobs = backend.sample_ids(prompts)
                for i, user, new, text, lps in zip(live, users, ids, texts, logprobs, strict=True):
                    episode = episodes[i]
                    action = self._answer(episode, user, new, text, lps)
                    past[i].append((user, text))
                    observations[i], reward, terminated, truncated, _ = self.env(i).step(action)
                    episode.actions.append(action)
                    episode.rewards.append(float(reward))
                    episode.done = bool(terminated or truncated)
                    episode.truncated = bool(truncated)
            for i, episode in enumerate(episodes):
                if not episode.done:
                    episode.truncated = True  # stopped by --max-turns
                if episode.actions:
                    episode.final_observation = self.codec.encode_observation(observations[i])
                    episode.final_key = self.key(observations[i], episode.final_observation)
            return episodes

    def _answer(self, episode: Episode, user: str, ids: list[int], text: str, logprobs: list[float]):
        """Record one sampled answer in ``episode``; the action it plays (the fallback, counted, if unparsable)."""
        if self.conversation:  # the episode is a training sample: its tokens and their roles
            chosen = chosen_tokens(self.tokenizer, self.codec, ids) if self.constrained else None
            episode.add_model_tokens(ids, logprobs, chosen)
        episode.users.append(user)
        episode.answers.append(text)
        try:
            return self.codec.decode_action(text)
        except ActionParseError:
            episode.invalid += 1
            return self.fallback

    def _turn_prompt(self, backend, episode: Episode, past: list[tuple[str, str]], obs_text: str):
        """This turn's prompt, as evaluation builds it; a conversation grows the episode's tokens to it."""
        prompt = self.template.build_conversation(past, obs_text)
        if self.conversation:
            self._extend(backend, episode, prompt)
        elif not episode.first_prompt:
            episode.first_prompt = backend.prompt_text(prompt)
        return prompt

    def _extend(self, backend, episode: Episode, prompt) -> None:
        """Grow the episode's tokens to this turn's prompt, which is exactly what evaluation would tokenize.

        Common case: the new prompt's tokens start with the episode's tokens (earlier prompt + the sampled
        answer), and the rest are the environment's tokens. Plain prompts have no EOS after an answer: the
        sampled EOS is dropped. Otherwise the model wrote its answer in a non-canonical tokenization (e.g. a
        closing tag letter by letter): the episode takes the canonical tokens of the rendered conversation,
        the answers' characters marked as the model's (their sampled log-probabilities are then unknown: 0)."""
        text = backend.prompt_text(prompt)
        full = backend.prompt_ids(prompt)
        if not episode.prompt_ids:
            episode.prompt_ids = list(full)
            episode.text = episode.first_prompt = text
            return
        answer = episode.answers[-1]
        start = len(episode.text)
        if text[:start] != episode.text or text.find(answer.strip(), start) < 0:
            raise InvalidInputError(
                "the prompt template does not extend an episode's conversation turn by turn (the next turn's "
                "prompt does not start with the previous one and the model's answer)",
                hint="use --prompt-style plain, or a model whose chat template keeps earlier turns verbatim")
        begin = text.find(answer.strip(), start)
        episode.spans.append((begin, begin + len(answer.strip())))
        episode.text = text
        held = episode.sequence()
        if full[: len(held)] == held:
            episode.add_env_tokens(full[len(held):])
            return
        eos = set(backend.eos)
        if episode.completion_ids and episode.completion_ids[-1] in eos and full[: len(held) - 1] == held[:-1]:
            for seq in (episode.completion_ids, episode.env_mask, episode.logprobs, episode.turn_ids, episode.chosen):
                seq.pop()
            episode.add_env_tokens(full[len(held) - 1:])
            return
        self.retokenized += 1
        chat = not isinstance(prompt, str)
        offsets = self.tokenizer(text, add_special_tokens=not chat, return_offsets_mapping=True)["offset_mapping"]
        n0 = len(episode.prompt_ids)
        if full[:n0] != episode.prompt_ids or len(offsets) != len(full):
            raise InvalidInputError("the tokenizer splits an episode's first prompt differently once the "
                                    "conversation goes on", hint="use --prompt-style plain or another model")
        old_ids, old_lps = episode.completion_ids, episode.logprobs
        ids, mask, logprobs, turns, chosen = full[n0:], [], [], [], []
        n = min(len(old_ids), len(ids))  # the sampled tokens that the canonical ones keep
        same = next((k for k in range(n) if old_ids[k] != ids[k]), n)
        values = [self._value_span(text, lo, hi) for lo, hi in episode.spans]
        for k, (token, (a, b)) in enumerate(zip(ids, offsets[n0:], strict=True)):
            turn = next((t for t, (lo, hi) in enumerate(episode.spans)
                         if (lo <= a and b <= hi and b > a) or (token in eos and a == hi)), -1)
            mask.append(int(turn >= 0))
            turns.append(turn)
            logprobs.append(old_lps[k] if k < same and mask[-1] else 0.0)
            chosen.append(int(turn >= 0 and (not self.constrained or (a < values[turn][1] and b > values[turn][0]))))
        episode.completion_ids, episode.env_mask, episode.logprobs = list(ids), mask, logprobs
        episode.chosen, episode.turn_ids = chosen, turns

    def _value_span(self, text: str, lo: int, hi: int) -> tuple[int, int]:
        """The characters of the answer at ``text[lo:hi]`` that write the action's value (its format around)."""
        template = self.codec.template
        prefix, suffix = template.answer_prefix[len(template.prompt_suffix):], template.answer_suffix
        answer = text[lo:hi]
        start = lo + len(prefix) if answer.startswith(prefix) else lo
        return start, (hi - len(suffix) if suffix and answer.endswith(suffix) else hi)

    def close(self) -> None:
        for env in self._envs:
            env.close()
        self._envs = []
