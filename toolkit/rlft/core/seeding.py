"""Seeding and thread settings, in one place (CleanRL style)."""

from __future__ import annotations

import os
import random

import numpy as np


def seed_everything(seed: int) -> np.random.Generator:
    """Seed python, numpy and (if imported) torch; return a numpy Generator for explicit use."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    import sys

    if "torch" in sys.modules:
        import torch

        torch.manual_seed(seed)
    return np.random.default_rng(seed)


def limit_threads(n: int | None = None) -> int:
    """Cap BLAS/OpenMP/torch threads. Two busy threads on two cores made TRL steps 50x slower here.

    ``n``, else ``RLFT_NUM_THREADS``, else ``OMP_NUM_THREADS``, else 1. An explicit ``n`` or ``RLFT_NUM_THREADS``
    overrides ``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` (the Makefile exports them as 1): torch reads those when it is
    imported, so they are set here even when torch is not imported yet, and torch is told directly when it is.
    """
    explicit = n or os.environ.get("RLFT_NUM_THREADS")
    n = int(explicit or os.environ.get("OMP_NUM_THREADS") or 1)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        if explicit:
            os.environ[var] = str(n)
        else:
            os.environ.setdefault(var, str(n))
    import sys

    if "torch" in sys.modules:
        import torch

        torch.set_num_threads(n)
    return n
