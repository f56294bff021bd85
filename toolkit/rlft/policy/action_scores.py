"""The exact distribution of a language model over a small discrete action set (GLAM / TWOSOME style).

Sampling answers tells little about a state whose best action the model rarely writes; the likelihood of every
valid answer tells everything. :class:`ActionChoices` holds each valid action's canonical answer as token ids (the
codec's completion, tokenized as SFT trains on it, then end-of-turn) and scores prompts against all of them in
one teacher-forced pass: ``log p(answer_a | prompt)`` for every action ``a``. Used by

* GRPO's action-set groups (``rlft train grpo --group actions``): each group holds every valid answer once, so
  the rewards compare all actions of a state at every step (:mod:`rlft.train.grpo.sampling`);
* the training signals that explain a stall: per-state entropy of the policy and the probability it gives the
  optimal actions (:mod:`rlft.train.criterion`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlft.codecs.base import Codec
from rlft.core.errors import InvalidInputError
from rlft.policy.constrained import eos_ids

MAX_CHOICES = 64  # beyond this an action set is not "small": enumerating answers costs more than sampling


def discrete_actions(codec: Codec) -> list[int]:
    """The valid actions of the codec's Discrete action space, in order; an error for other spaces."""
    space = codec.action_space
    if space.get("type") != "discrete":
        kind = space.get("type")
        raise InvalidInputError(f"enumerating actions needs a discrete action space, this codec's is {kind}",
                                hint="use sampled groups (--group sampled) for continuous or multi-part actions")
    start = int(space.get("start", 0))
    return list(range(start, start + int(space["n"])))


class ActionChoices:
    """Token ids of every valid answer for one tokenizer, and the model's log-likelihood of each."""

    def __init__(self, codec: Codec, tokenizer, model=None):
        self.codec = codec
        self.tokenizer = tokenizer
        self.actions = discrete_actions(codec)
        if len(self.actions) > MAX_CHOICES:
            raise InvalidInputError(f"{len(self.actions)} actions are too many to enumerate (at most {MAX_CHOICES})",
                                    hint="use sampled groups (--group sampled)")
        template = codec.template
        self.texts = [template.completion_format.replace("{action}", codec.encode_action(a)) for a in self.actions]
        self.eos = eos_ids(tokenizer, model)[0]
        self._cache: dict[str, list[list[int]]] = {}

    def __len__(self) -> int:
        return len(self.actions)

    def prompt_text(self, prompt) -> str:
        """The text the model reads for ``prompt`` (the chat template with its generation prompt for messages)."""
        if isinstance(prompt, str):
            return prompt
        return self.tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)

    def prompt_ids(self, prompt) -> list[int]:
        return self.tokenizer(self.prompt_text(prompt), add_special_tokens=isinstance(prompt, str))["input_ids"]

    def completion_ids(self, prompt) -> list[list[int]]:
        """Per action, the answer's token ids after ``prompt``, ending with end-of-turn.

        Tokenized as TRL's SFT does (prompt + completion together, the prompt's tokens removed), so the ids are the
        ones the model was trained to write; where the prompt's last token would merge with the answer, the
        answer is tokenized alone."""
        text = self.prompt_text(prompt)
        if text in self._cache:
            return self._cache[text]
        special = isinstance(prompt, str)
        head = self.tokenizer(text, add_special_tokens=special)["input_ids"]
        fulls = self.tokenizer([text + t for t in self.texts], add_special_tokens=special)["input_ids"]
        ids = []
        for answer, full in zip(self.texts, fulls, strict=True):
            tail = full[len(head):] if full[: len(head)] == head else \
                self.tokenizer(answer, add_special_tokens=False)["input_ids"]
            ids.append([*tail, self.eos])
        if len(self._cache) > 100_000:
            self._cache.clear()
        self._cache[text] = ids
        return ids

    def decisive_spans(self, prompt) -> list[tuple[int, int]]:
        """Per action, the ``[start, end)`` token positions of its answer that tell it from the others: after the
        tokens every answer begins with and before those every answer ends with (``<answer>`` and ``</answer>``
        around the action's name, then end-of-turn). Under constrained decoding only these are a choice; the rest
        is forced by the grammar."""
        answers = self.completion_ids(prompt)
        shortest = min(len(a) for a in answers)
        prefix = 0
        while prefix < shortest and len({a[prefix] for a in answers}) == 1:
            prefix += 1
        suffix = 0
        while suffix < shortest - prefix and len({a[-1 - suffix] for a in answers}) == 1:
            suffix += 1
        return [(prefix, len(a) - suffix) for a in answers]

    def log_likelihoods(self, model, prompts: list[Any], batch_size: int = 64, decisive: bool = False) -> np.ndarray:
        """(prompts, actions) log-probability of each valid answer under ``model`` (no gradient); with ``decisive``,
        of its decisive tokens only (:meth:`decisive_spans`): the policy constrained greedy decoding follows, which
        a loss on whole answers can leave behind (it lowers a wrong answer by making its closing tag unlikely)."""
        import torch

        pairs = [(self.prompt_ids(p), c) for p in prompts for c in self.completion_ids(p)]
        spans = ([span for p in prompts for span in self.decisive_spans(p)] if decisive
                 else [(0, len(c)) for _, c in pairs])
        device = next(model.parameters()).device
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.eos
        scores = np.empty(len(pairs))
        was_training = model.training
        model.eval()
        try:
            with torch.inference_mode():
                for start in range(0, len(pairs), batch_size):
                    chunk = pairs[start : start + batch_size]
                    width = max(len(p) + len(c) for p, c in chunk)
                    ids = torch.full((len(chunk), width), pad, dtype=torch.long)
                    mask = torch.zeros((len(chunk), width), dtype=torch.long)
                    for i, (p, c) in enumerate(chunk):  # right padding: positions stay those of generation
                        ids[i, : len(p) + len(c)] = torch.tensor(p + c)
                        mask[i, : len(p) + len(c)] = 1
                    logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits.float()
                    logps = logits.log_softmax(-1)
                    for i, (p, c) in enumerate(chunk):
                        first, end = spans[start + i]
                        positions = torch.arange(len(p) - 1 + first, len(p) - 1 + end, device=device)
                        targets = torch.tensor(c[first:end], device=device)
                        scores[start + i] = float(logps[i, positions, targets].sum())
        finally:
            if was_training:
                model.train()
        return scores.reshape(len(prompts), len(self.actions))


def action_distribution(log_likelihoods: np.ndarray) -> np.ndarray:
    """The policy over the valid actions: the answers' likelihoods renormalised (softmax of the log-likelihoods)."""
    shifted = log_likelihoods - log_likelihoods.max(axis=1, keepdims=True)
    probs = np.exp(shifted)
    return probs / probs.sum(axis=1, keepdims=True)


def policy_signals(probs: np.ndarray, correct: list[set[int]], actions: list[int]) -> dict[str, float]:
    """What explains a stall, per state of the policy ``probs`` (states, actions): its entropy (in nats; uniform over
    four actions is 1.386), and the probability it gives the correct actions (mean and worst state)."""
    index = {a: i for i, a in enumerate(actions)}
    entropy = -(probs * np.log(np.clip(probs, 1e-12, None))).sum(axis=1)
    good = np.array([sum(probs[s, index[a]] for a in want if a in index) for s, want in enumerate(correct)])
    return {"policy_entropy": float(entropy.mean()), "policy_correct_prob": float(good.mean()),
            "policy_correct_prob_min": float(good.min())}
