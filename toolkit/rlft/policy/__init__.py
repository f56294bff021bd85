"""Acting with a language model, shared by training and evaluation: generation backends (one batched call for
many prompts; a local ``transformers`` model or an OpenAI-compatible server), the codec's answer grammar, and
constrained decoding by that grammar.

It sits between ``hub`` and ``train`` so that training (e.g. the criterion callback that decodes every decision
state) and evaluation act through the same code. Heavy libraries are imported inside the functions.
"""
