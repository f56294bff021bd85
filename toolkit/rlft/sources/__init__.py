"""Where experience comes from: SB3 experts, Minari datasets, exact tabular solutions."""
