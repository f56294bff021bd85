"""Rows of prompt/completion records built from sources with a codec."""
