"""Acting with a policy, shared by training and evaluation: the policy interface and its baselines, the LLM
policy (prompts and parsing through the codec, fallback and invalid-action counting), the behaviour-cloning
policy, generation backends (one batched call for many prompts; a local ``transformers`` model or an
OpenAI-compatible server), the codec's answer grammar and constrained decoding, the LLM backbone of online RL,
and the rollout loop that plays a policy in vector environments.

It sits between ``models`` and ``train`` so that training (the criterion and closed-loop checks) and evaluation
act through the same code. Heavy libraries are imported inside the functions.
"""
