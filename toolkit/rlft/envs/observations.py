"""Batches of observations whatever their space: arrays, or dicts and tuples of arrays (Dict and Tuple spaces,
as gymnasium's vector environments return them: one batched array per leaf)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


def _is_text_batch(batch) -> bool:
    """A batch of Text observations: gymnasium's vector envs batch them as a tuple of strings."""
    return isinstance(batch, tuple) and bool(batch) and isinstance(batch[0], str)


def stack(items: Sequence):
    """Single observations -> one batch (leaf arrays stacked on a new first axis)."""
    first = items[0]
    if isinstance(first, str):
        return tuple(items)
    if isinstance(first, Mapping):
        return {k: stack([item[k] for item in items]) for k in first}
    if isinstance(first, tuple):
        return tuple(stack([item[i] for item in items]) for i in range(len(first)))
    return np.stack([np.asarray(item) for item in items])


def take(batch, index):
    """Rows ``index`` (an int: one observation; a list: a smaller batch) of a batch."""
    if _is_text_batch(batch):
        return batch[index] if isinstance(index, int | np.integer) else tuple(batch[i] for i in index)
    if isinstance(batch, Mapping):
        return {k: take(v, index) for k, v in batch.items()}
    if isinstance(batch, tuple):
        return tuple(take(v, index) for v in batch)
    return np.asarray(batch)[index]


def unbatch(batch, n: int) -> list:
    """A batch of ``n`` -> a list of ``n`` single observations."""
    if _is_text_batch(batch):
        return list(batch)
    if isinstance(batch, Mapping | tuple):
        return [take(batch, i) for i in range(n)]
    return list(batch)
