"""Thread settings: RLFT_NUM_THREADS wins over the OMP_NUM_THREADS=1 the Makefile exports, whether or not torch
is imported yet; without it, OMP_NUM_THREADS is respected (tests and CI run one thread per process)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SCRIPT = """
import sys
from rlft.core.seeding import limit_threads
if sys.argv[1] == "before":
    import torch
n = limit_threads()
import os, torch
print(n, torch.get_num_threads(), os.environ["OMP_NUM_THREADS"])
"""


@pytest.mark.parametrize("order", ["before", "after"])
@pytest.mark.parametrize("env,expected", [
    ({"OMP_NUM_THREADS": "1", "RLFT_NUM_THREADS": "2"}, "2 2 2"),
    ({"OMP_NUM_THREADS": "1"}, "1 1 1"),
    ({}, "1 1 1"),
])
def test_rlft_num_threads_wins_over_omp(order, env, expected):
    clean = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "RLFT_NUM_THREADS", "MKL_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", SCRIPT, order], env={**clean, **env}, capture_output=True, text=True,
                         check=True).stdout.split()
    assert " ".join(out) == expected
