"""Soft targets for the bins of a ``binned`` codec: each recorded bin is trained against a Gaussian over its
neighbouring bins (``rlft train sft --bin-smoothing SIGMA``).

Cross-entropy on one-hot bins treats bin 14 as exactly as wrong as bin 50 when the answer is bin 15: the model
learns the order of the bins only from data. Spreading each target over its neighbours (HL-Gauss, Farebrother et al.
2024, "Stop Regressing": a Gaussian of about 0.75 bin widths) tells it, and gives the distribution that bin-mean
decoding averages a shape around the recorded value. Bins are in quantile space, so the smoothing is too. Targets of
tokens that are not bins (tags, end of turn) stay one-hot.
"""

from __future__ import annotations

import numpy as np

from rlft.codecs.base import Codec
from rlft.core.errors import InvalidInputError
from rlft.policy.bins import bin_token_ids


def gaussian_rows(n: int, sigma: float) -> np.ndarray:
    """(n, n): row k is a Gaussian over bin indices centred on k with standard deviation ``sigma`` bins, summing
    to 1 over the n bins."""
    k = np.arange(n)
    weights = np.exp(-0.5 * ((k[None, :] - k[:, None]) / sigma) ** 2)
    return weights / weights.sum(axis=1, keepdims=True)


class BinTargets:
    """The loss of a batch with each bin label spread over its family's neighbouring bins (module docstring)."""

    def __init__(self, codec: Codec, tokenizer, sigma: float):
        import torch

        if not 0.0 < sigma <= 16.0:
            raise InvalidInputError(f"--bin-smoothing must be in (0, 16] bins, got {sigma}")
        per_dim = bin_token_ids(codec, tokenizer)
        if per_dim is None:
            raise InvalidInputError("--bin-smoothing needs a binned codec whose bin indices are one token each",
                                    hint="serialize with --format binned and make the model with rlft model init")
        # the first dimension's bins are bare tokens ("15"), the others' share the separated ones (" 15"): two
        # families at most, each the token list of its dimension with the most bins
        families = [per_dim[0]] + ([max(per_dim[1:], key=len)] if len(per_dim) > 1 else [])
        vocab = len(tokenizer)
        self.family = torch.full((vocab,), -1, dtype=torch.long)
        self.index = torch.zeros(vocab, dtype=torch.long)
        self.ids = [torch.as_tensor(f, dtype=torch.long) for f in families]
        self.rows = [torch.as_tensor(gaussian_rows(len(f), sigma), dtype=torch.float32) for f in families]
        for i, fam in enumerate(self.ids):
            self.family[fam] = i
            self.index[fam] = torch.arange(len(fam))
        self.sigma = float(sigma)

    def loss(self, logits, labels, num_items_in_batch=None):
        """Cross-entropy of next-token ``logits`` against ``labels`` (unshifted, -100 ignored), bins soft."""
        import torch

        logits, labels = logits[:, :-1].float(), labels[:, 1:]
        keep = labels != -100
        logp = logits[keep].log_softmax(-1)  # (P, V): the positions that are trained
        target = labels[keep]
        family = self.family.to(target.device)[target]
        per_token = -logp.gather(1, target[:, None]).squeeze(1)
        for f, (ids, rows) in enumerate(zip(self.ids, self.rows, strict=True)):
            at = family == f
            if at.any():
                weights = rows.to(logp.device)[self.index.to(target.device)[target[at]]]
                per_token = per_token.masked_scatter(at, -(weights * logp[at][:, ids.to(logp.device)]).sum(-1))
        count = keep.sum() if num_items_in_batch is None else num_items_in_batch
        return per_token.sum() / torch.as_tensor(count, device=per_token.device).clamp(min=1)


def bin_smoothing_trainer(base, targets: BinTargets):
    """A subclass of the TRL trainer class ``base`` whose loss is :meth:`BinTargets.loss` (TRL's token metrics,
    computed from its fused head, are not logged in this mode)."""

    class BinSmoothingTrainer(base):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            labels = inputs["labels"]
            outputs = model(**{k: v for k, v in inputs.items() if k != "labels"}, use_cache=False)
            loss = targets.loss(outputs.logits, labels, num_items_in_batch)
            return (loss, outputs) if return_outputs else loss

    return BinSmoothingTrainer
