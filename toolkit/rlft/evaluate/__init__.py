"""Evaluation: LLM policies and baselines in real (vector) environments, reports and comparisons.

``rlft.evaluate.runner.run_evaluation(EvalConfig(...))`` is what ``rlft eval`` runs; heavy libraries are
imported inside the functions, so importing this package is cheap.
"""
