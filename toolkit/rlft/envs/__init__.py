"""Environment specs and helpers (first stage of the data flow: imports nothing else from rlft but core)."""
