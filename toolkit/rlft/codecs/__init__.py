"""Reversible text codecs. ``load_codec(DATASET_DIR)`` returns the codec a dataset was written with.

The names below load on first use (PEP 562), so a light module (a command's config) can import the codecs' setting
values from :mod:`rlft.codecs.choices` without loading numpy and pyarrow."""

from importlib import import_module

_HOMES = {
    "CODEC_FILENAME": "base", "ActionParseError": "base", "Codec": "base", "codec_from_dict": "base",
    "load_codec": "base", "BinnedCodec": "binned", "DiscretizedCodec": "discretized", "NUMERIC_FORMATS": "factory",
    "make_codec": "factory", "FrozenLakeGridCodec": "grid", "NumericCodec": "numeric",
    "numeric_template": "numeric_prompt", "RawCodec": "raw", "PromptTemplate": "template",
    "TokenizedCodec": "tokenized",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'rlft.codecs' has no attribute {name!r}")
    return getattr(import_module(f"rlft.codecs.{_HOMES[name]}"), name)
