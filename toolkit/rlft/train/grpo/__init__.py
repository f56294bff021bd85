"""GRPO: :mod:`~rlft.train.grpo.run` (the stage), :mod:`~rlft.train.grpo.config` (its settings),
:mod:`~rlft.train.grpo.variant` (the kinds of run, one file each) and the control rewards."""
