"""Hugging Face Hub layout: Parquet shards under ``data/``, a README card with the Hub YAML header, the codec;
reading dataset folders and Hub ids, pushing to the Hub. The builders that fill the layout: :mod:`rlft.builders`."""
