"""rlft: reinforcement-learning experience as language-model training data, and LLMs as RL policies.

Data flows one way: ``envs -> sources -> codecs/records -> hub -> train -> evaluate``, with ``cli`` on top.
Importing ``rlft`` is cheap; heavy libraries are imported inside the functions that need them.
"""

__version__ = "0.1.0"
