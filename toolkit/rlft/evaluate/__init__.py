"""Evaluation: LLM policies and baselines in real (vector) environments, reports and comparisons.

``rlft eval`` runs ``runner.run_evaluation(config.EvalConfig(...))``: ``setup`` builds the policy, env and codec,
``rollout`` runs the episodes over ``rlft.envs.vector_envs``, ``report`` writes the results. Heavy libraries are
imported inside the functions, so importing this package is cheap.
"""
