"""Datasets in the Hugging Face Hub layout, built and read in one room: Parquet shards under ``data/``, a README
card with the Hub YAML header and the codec file (``layout``, ``card``, ``folder``); the records that codecs make
from Minari episodes (``offline``, ``textops``); the builders behind ``rlft data serialize`` (``serialize``) and
``rlft data import`` (``import_rlft4rl``); reading folders and Hub ids (``loading``) and pushing (``push``).
Everything about FrozenLake's exact Q-values, from value iteration to the table evaluation reads, is
:mod:`rlft.datasets.frozenlake_q`."""
