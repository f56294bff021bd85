"""Hugging Face Hub layout: Parquet shards under ``data/``, a README card with the Hub YAML header, the codec."""
