"""Reversible text codecs. ``load_codec(DATASET_DIR)`` returns the codec a dataset was written with."""

from rlft.codecs.base import CODEC_FILENAME, ActionParseError, Codec, codec_from_dict, load_codec
from rlft.codecs.grid import FrozenLakeGridCodec
from rlft.codecs.template import PromptTemplate

__all__ = [
    "CODEC_FILENAME",
    "ActionParseError",
    "Codec",
    "FrozenLakeGridCodec",
    "PromptTemplate",
    "codec_from_dict",
    "load_codec",
]
