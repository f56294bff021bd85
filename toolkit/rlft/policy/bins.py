"""Per-dimension bin decoding: read the model's distribution over each action dimension's bins, not free text.

A ``binned`` codec writes each action dimension as one token among that dimension's bin tokens. So the answer is
a fixed sequence: the answer prefix, then for each dimension one choice among its bins. :class:`BinBackend` runs
the model through exactly that sequence with its KV cache (one prefill and one step per dimension, no sampling
machinery, no grammar table) and, per dimension, takes

* ``argmax``: the most likely bin (what greedy constrained decoding gives, decoded to the bin's data mean), or
* ``mean``: the mean of the model's distribution over the dimension's bins (each bin's data mean weighted by its
  probability). A model trained with cross-entropy on bins predicts a distribution; its mean is the estimate of
  the expected action (what an MSE-trained MLP predicts), while the argmax throws the spread away and lands on a
  bin value, a quantization error of up to half a bin on every step; or
* ``local-mean``: the mean over the most likely bin and its ``LOCAL_WINDOW`` neighbours on each side. Where the
  distribution has two modes (Pendulum's swing-up: full torque one way or the other) the mean lands between them,
  on an action neither mode would take; the local mean keeps the argmax's choice of mode and the mean's precision
  within it; or
* ``trimmed-mean``: the mean over the bins holding at least ``TRIM_FLOOR`` of the probability. A model trained on
  noisy labels (``rlft data improve``'s, where nine tenths of a label's change is the candidate set's luck) spreads
  a thin tail over every bin, and near a saturated bound that tail lies on one side only: the full mean is pulled
  toward the middle of the range even on the rows it was trained on (row 5g: 0.983 of the labels' own magnitude
  where the labels are at 0.996, 0.962 against 0.986 for longer label steps). Dropping bins below 1% keeps the
  spread that carries information and most of the tail's pull off, and lowers the held-out error too.

The next dimension is conditioned on the argmax bin (the token the model would write). The action comes back as
codec text (positions between bins with decimals for ``mean``, :meth:`BinnedCodec.position_text`), so the policy
decodes it with the codec like any other answer, and a report's examples show what was played.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlft.codecs.base import Codec
from rlft.core.errors import InvalidInputError
from rlft.policy.generation import Prompt, TransformersBackend

BIN_DECODINGS = ("auto", "off", "argmax", "mean", "local-mean", "trimmed-mean")
LOCAL_WINDOW = 2  # local-mean: bins on each side of the most likely one that are averaged
TRIM_FLOOR = 0.01  # trimmed-mean: bins below this probability are left out (the argmax bin never is: >= 1/64 > 1%)


def bin_token_ids(codec: Codec, tokenizer) -> list[np.ndarray] | None:
    """Per action dimension, the token id of each bin (with the separator before it after the first dimension);
    None when the codec is not binned, its actions are discrete (written as they are, no bins), or the tokenizer
    writes some bin as more than one token."""
    if getattr(codec, "kind", None) != "binned" or codec.action_space["type"] != "box":
        return None
    ids = []
    for j, means in enumerate(codec.bin_values("action")):
        sep = codec.separator if j else ""
        encoded = tokenizer([f"{sep}{k}" for k in range(len(means))], add_special_tokens=False)["input_ids"]
        if any(len(e) != 1 for e in encoded):
            return None
        ids.append(np.array([e[0] for e in encoded], dtype=np.int64))
    return ids


def resolve_bin_decoding(requested: str, codec: Codec, tokenizer) -> str:
    """The bin decoding to use: ``auto`` is ``mean`` for a binned codec whose bins are one token each in this
    tokenizer (``rlft model init`` makes such tokenizers), else ``off`` (text generation); an explicit mode the
    codec/tokenizer cannot do is an error."""
    if requested not in BIN_DECODINGS:
        raise InvalidInputError(f"--bin-decoding must be one of {', '.join(BIN_DECODINGS)}, got {requested!r}")
    if requested == "off":
        return "off"
    able = tokenizer is not None and bin_token_ids(codec, tokenizer) is not None
    if requested == "auto":
        return "mean" if able else "off"
    if not able:
        raise InvalidInputError(
            f"--bin-decoding {requested} needs a binned codec whose bin indices are one token each",
            hint="serialize with --format binned and make the model with rlft model init, or pass --bin-decoding off")
    return requested


class BinBackend(TransformersBackend):
    """Answers prompts of a ``binned`` codec by reading each dimension's distribution over its bins (module doc)."""

    name = "bins"

    def __init__(self, model, tokenizer, codec: Codec, mode: str = "mean", cache: bool = True):
        if mode not in BIN_DECODINGS[2:]:
            raise InvalidInputError(f"bin decoding mode must be one of {', '.join(BIN_DECODINGS[2:])}, got {mode!r}")
        ids = bin_token_ids(codec, tokenizer)
        if ids is None:
            raise InvalidInputError("bin decoding needs a binned codec whose bin indices are one token each")
        super().__init__(model, tokenizer, max_new_tokens=len(ids) + 1, cache=cache)
        self.codec = codec
        self.mode = mode
        template = codec.template
        self.prefix = template.answer_prefix[len(template.prompt_suffix):]  # a prefilled tag is in the prompt
        self.suffix = template.answer_suffix
        self.prefix_ids = tokenizer(self.prefix, add_special_tokens=False)["input_ids"] if self.prefix else []
        torch = self.torch
        self.bin_ids = [torch.as_tensor(i, device=self.device) for i in ids]
        self.bin_means = [torch.as_tensor(m, dtype=torch.float64) for m in codec.bin_values("action")]
        self.last_probs: list[np.ndarray] = []  # per dimension, the last call's (prompts, bins) probabilities

    def _generate(self, prompts: list[Prompt]) -> list[str]:
        torch = self.torch
        batch = self.encode(prompts).to(self.device)
        ids, mask = batch["input_ids"], batch["attention_mask"]
        if self.prefix_ids:
            prefix = torch.as_tensor(self.prefix_ids, device=self.device).expand(len(prompts), -1)
            ids, mask = torch.cat([ids, prefix], 1), torch.cat([mask, torch.ones_like(prefix)], 1)
        limit = getattr(self.model.config, "max_position_embeddings", None)
        if limit and ids.shape[1] + len(self.bin_ids) > limit:
            raise InvalidInputError(f"a prompt of {ids.shape[1]} tokens plus {len(self.bin_ids)} answer tokens "
                                    f"exceeds the model's {limit} positions")
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        chosen, values, self.last_probs = [], [], []
        with torch.inference_mode():
            out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True)
            for j, (bins, means) in enumerate(zip(self.bin_ids, self.bin_means, strict=True)):
                probs = out.logits[:, -1, bins].double().softmax(-1).cpu()
                best = probs.argmax(-1)
                self.last_probs.append(probs.numpy())
                chosen.append(best.numpy())
                values.append(self._value(probs, best, means))
                if j + 1 < len(self.bin_ids):
                    mask = torch.cat([mask, mask.new_ones(len(prompts), 1)], 1)
                    positions = positions[:, -1:] + 1
                    out = self.model(input_ids=bins[best.to(self.device)][:, None], attention_mask=mask,
                                     position_ids=positions, past_key_values=out.past_key_values, use_cache=True)
        self.calls += 1
        self.requests += len(prompts)
        self.new_tokens += len(prompts) * len(self.bin_ids)
        if self.mode == "argmax":  # bin indices, exactly what constrained greedy generation writes
            sep = self.codec.separator
            return [f"{self.prefix}{sep.join(str(int(c[i])) for c in chosen)}{self.suffix}"
                    for i in range(len(prompts))]
        rows = np.stack(values, axis=1)
        return [f"{self.prefix}{self.codec.position_text(row)}{self.suffix}" for row in rows]

    def _value(self, probs, best, means) -> np.ndarray:
        """Each row's action value of one dimension from its bin probabilities (module docstring)."""
        if self.mode == "argmax":
            return means[best].numpy()
        if self.mode == "local-mean":
            near = (self.torch.arange(probs.shape[1])[None, :] - best[:, None]).abs() <= LOCAL_WINDOW
            probs = probs * near
            probs = probs / probs.sum(-1, keepdim=True)
        elif self.mode == "trimmed-mean":
            keep = (probs >= TRIM_FLOOR) | (self.torch.arange(probs.shape[1])[None, :] == best[:, None])
            probs = probs * keep
            probs = probs / probs.sum(-1, keepdim=True)
        return (probs * means).sum(-1).numpy()

    def samples(self, n: int, rng: np.random.Generator, min_prob: float = 0.0) -> np.ndarray:
        """``n`` actions per prompt of the last call, each dimension's bin drawn from the model's distribution over
        its bins (given the most likely bins of the dimensions before it, as decoded) and played as the bin's data
        mean: shape (prompts, n, dimensions). No forward pass: the distributions of the call are reused. With
        ``min_prob``, bins under that share of the most likely bin's probability are never drawn."""
        if not self.last_probs:
            raise InvalidInputError("BinBackend.samples needs a generate call first")
        columns = []
        for probs, means in zip(self.last_probs, self.bin_means, strict=True):
            probs = np.asarray(probs, dtype=np.float64)
            if min_prob > 0:
                probs = np.where(probs >= min_prob * probs.max(axis=1, keepdims=True), probs, 0.0)
            cdf = np.cumsum(probs, axis=1)
            cdf /= cdf[:, -1:]
            picks = (rng.random((len(probs), n, 1)) > cdf[:, None, :]).sum(-1).clip(max=probs.shape[1] - 1)
            columns.append(means.numpy()[picks])
        return np.stack(columns, axis=-1)

    def describe(self) -> dict[str, Any]:
        return {"backend": "transformers", "decoding": f"bins ({self.mode})", "temperature": 0.0}
