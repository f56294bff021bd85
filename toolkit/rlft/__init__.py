"""rlft: reinforcement-learning experience as language-model training data, and LLMs as RL policies.

Data flows one way: ``core -> envs -> sources -> codecs -> datasets -> models -> policy -> train -> evaluate ->
results``, with ``cli`` on top (``tests/test_layers.py``).
Importing ``rlft`` is cheap; heavy libraries are imported inside the functions that need them.
"""

__version__ = "0.1.0"
