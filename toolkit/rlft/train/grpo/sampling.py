"""Sampling GRPO completions within the codec's answer grammar (``rlft train grpo --constrained``).

Why: a pretrained model that has never seen the codec's format (SmolLM2 out of the box) answers in prose, so
every sampled completion of a group gets the same (lowest) format reward and GRPO has no signal at all. With the
grammar applied while sampling (the token table that constrained evaluation uses), every completion is a valid
answer and the rewards compare actions from the first step. Evaluation then decodes with ``--constrained`` too.

Both rollouts use TRL's ``rollout_func``: :class:`StepRollout` samples one answer per prompt row (TRL repeats a row
``num_generations`` times, so a group is G constrained answers to the same state) and TRL scores them with the
same rewards as unconstrained sampling; the episode rollout (:mod:`rlft.train.grpo.episodes`) plays whole episodes.
The loss is TRL's: it recomputes the model's own log-probabilities of the sampled tokens (the constrained
sampling log-probabilities returned here are only read by vLLM's importance-sampling correction, which is off).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rlft.codecs.base import Codec
from rlft.core.errors import InvalidInputError
from rlft.policy.decoding import LocalDecoding
from rlft.policy.generation import generating


def chosen_tokens(tokenizer, codec: Codec, ids: list[int]) -> list[int]:
    """Per token of one sampled answer, 1 where it writes the action's value and 0 where it writes the format around
    it (the answer's literal prefix and suffix, end-of-turn): the format is no choice under constrained sampling
    (the grammar forces it, in whichever tokenization), and a loss on it lets GRPO lower a wrong answer by making
    its closing tag unlikely instead of the action."""
    template = codec.template
    prefix = template.answer_prefix[len(template.prompt_suffix):]  # a prefilled tag is in the prompt
    suffix = template.answer_suffix
    ends = [len(tokenizer.decode(ids[: k + 1], skip_special_tokens=True)) for k in range(len(ids))]
    text = tokenizer.decode(ids, skip_special_tokens=True)
    lead = len(text) - len(text.lstrip())
    start = lead + len(prefix) if text[lead:].startswith(prefix) else 0
    stripped = text.rstrip()
    stop = len(stripped) - len(suffix) if suffix and stripped.endswith(suffix) else len(stripped)
    out, begin = [], 0
    for end in ends:
        out.append(int(end > begin and begin < stop and end > start))
        begin = end
    return out


@dataclass
class GrammarSampler:
    """Builds the sampling backend for the trainer's current model; the grammar's token table, which depends on
    the codec and the tokenizer only, is built once and not at every step."""

    codec: Codec
    tokenizer: Any
    temperature: float
    top_p: float = 1.0
    constrained: bool = True
    max_new_tokens: int | None = None
    _decoding: LocalDecoding | None = field(default=None, init=False, repr=False)

    def backend(self, model):
        if self._decoding is None:  # text sampled, never bins: GRPO scores the sampled tokens' log-probabilities
            self._decoding = LocalDecoding.choose(self.codec, self.tokenizer, model, bin_decoding="off",
                                                  constrained=self.constrained, temperature=self.temperature,
                                                  top_p=self.top_p, max_new_tokens=self.max_new_tokens)
        return self._decoding.backend(model, cache=False)


class StepRollout:
    """TRL ``rollout_func`` for one-answer GRPO: one grammar-constrained sample per prompt row."""

    def __init__(self, sampler: GrammarSampler):
        self.sampler = sampler
        self.seconds = 0.0  # sampling, all calls (the rest of a step is TRL's scoring and optimisation)

    def __call__(self, prompts: list, trainer) -> dict[str, list]:
        model = trainer.accelerator.unwrap_model(trainer.model)
        tokenizer = self.sampler.tokenizer
        start = time.perf_counter()
        with generating(model, tokenizer):
            backend = self.sampler.backend(model)
            ids, _texts, logprobs = backend.sample_ids(prompts)
            prompt_ids = [backend.prompt_ids(p) for p in prompts]
        self.seconds += time.perf_counter() - start
        out = {"prompt_ids": prompt_ids, "completion_ids": ids, "logprobs": logprobs}
        if self.sampler.constrained:  # the format the grammar forces carries no choice: out of the loss
            out["env_mask"] = [chosen_tokens(tokenizer, self.sampler.codec, row) for row in ids]
        return out


class ActionSetRollout:
    """TRL ``rollout_func`` for small discrete action sets (``--group actions``): each group of ``num_generations``
    completions to one state holds every valid answer equally often, in order.

    Why: a sampled group of a near-uniform start often never contains a state's best action, or contains only
    equal rewards (TRL's ``frac_reward_zero_std``), and then that state teaches nothing that step. With every answer
    present, the advantages (reward minus the group mean, over the group's spread) exist for every state at every
    step, and the loss moves each answer's log-likelihood by its own advantage: the gradient is
    ``sum_a A(s, a) grad log pi(a | s)``, which raises the best answer of every state at a steady rate however
    unlikely it still is. It is deterministic: no sampling noise, no temperature to tune.
    """

    def __init__(self, choices, num_generations: int):
        n = len(choices)
        if num_generations % n:
            raise InvalidInputError(
                f"--group actions puts each of the {n} actions in every group: --num-generations must be a multiple "
                f"of {n}, got {num_generations}")
        self.choices = choices
        self.num_generations = num_generations
        self.seconds = 0.0

    def __call__(self, prompts: list, trainer) -> dict[str, list]:
        start = time.perf_counter()
        completion_ids, prompt_ids = [], []
        run, previous = 0, object()
        for prompt in prompts:  # TRL repeats each prompt num_generations times in a row
            run = run + 1 if prompt == previous else 0
            previous = prompt
            completion_ids.append(list(self.choices.completion_ids(prompt)[run % len(self.choices)]))
            prompt_ids.append(self.choices.prompt_ids(prompt))
        self.seconds += time.perf_counter() - start
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": None}
