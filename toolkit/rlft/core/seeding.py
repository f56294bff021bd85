"""Seeding and thread settings, in one place (CleanRL style)."""

from __future__ import annotations

import os
import random

# The largest seed any command takes: numpy's legacy seeding stops at 2**32 - 1, Minari stores seeds in 32-bit
# fields, and episode seeds are this plus the episode index.
MAX_SEED = 2**31 - 1
THREADS_PER_CORE = 4  # the most threads rlft starts per core: more only waits, and many fail to start


def seed_everything(seed: int):
    """Seed python, numpy and (if imported) torch; return a numpy Generator for explicit use."""
    import numpy as np  # here, not at the top: the CLI imports this module for MAX_SEED and starts without numpy

    random.seed(seed)
    np.random.seed(seed % 2**32)
    import sys

    if "torch" in sys.modules:
        import torch

        torch.manual_seed(seed)
    return np.random.default_rng(seed)


def threads_setting(text: str | None) -> int | None:
    """The thread count a ``*_NUM_THREADS`` value sets: OpenMP takes a list per nesting level (``2,1``), whose first
    number is the one rlft's single level uses; a value OpenMP would ignore (empty, not a positive number) is None."""
    first = (text or "").split(",")[0].strip()
    return int(first) if first.isdigit() and int(first) > 0 else None


def limit_threads(n: int | None = None) -> int:
    """Cap BLAS/OpenMP/torch threads. Two busy threads on two cores made TRL steps 50x slower here.

    ``n``, else ``RLFT_NUM_THREADS``, else ``OMP_NUM_THREADS``, else 1. An explicit ``n`` or ``RLFT_NUM_THREADS``
    overrides ``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` (the Makefile exports them as 1): torch reads those when it is
    imported, so they are set here even when torch is not imported yet, and torch is told directly when it is.
    """
    explicit = n or threads_setting(os.environ.get("RLFT_NUM_THREADS"))
    n = int(explicit or threads_setting(os.environ.get("OMP_NUM_THREADS")) or 1)
    most = THREADS_PER_CORE * (os.cpu_count() or 1)
    if n > most:  # 100,000 threads failed to start in OpenBLAS and the process died (hostile pass 21, F12)
        import sys

        print(f"Note: {n:,} threads asked for (RLFT_NUM_THREADS / OMP_NUM_THREADS); this machine has "
              f"{os.cpu_count()} cores: using {most}", file=sys.stderr)
        explicit, n = explicit and most, most
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
