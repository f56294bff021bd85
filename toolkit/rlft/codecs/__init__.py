"""Reversible text codecs. ``load_codec(DATASET_DIR)`` returns the codec a dataset was written with."""

from rlft.codecs.base import CODEC_FILENAME, ActionParseError, Codec, codec_from_dict, load_codec
from rlft.codecs.binned import BinnedCodec
from rlft.codecs.discretized import DiscretizedCodec
from rlft.codecs.factory import NUMERIC_FORMATS, make_codec
from rlft.codecs.grid import FrozenLakeGridCodec
from rlft.codecs.numeric import NumericCodec
from rlft.codecs.numeric_prompt import numeric_template
from rlft.codecs.raw import RawCodec
from rlft.codecs.template import PromptTemplate
from rlft.codecs.tokenized import TokenizedCodec

__all__ = [
    "CODEC_FILENAME",
    "NUMERIC_FORMATS",
    "ActionParseError",
    "BinnedCodec",
    "Codec",
    "DiscretizedCodec",
    "FrozenLakeGridCodec",
    "NumericCodec",
    "PromptTemplate",
    "RawCodec",
    "TokenizedCodec",
    "codec_from_dict",
    "load_codec",
    "make_codec",
    "numeric_template",
]
