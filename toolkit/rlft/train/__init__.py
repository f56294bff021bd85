"""Training stages: SFT, GRPO (step and episodic), online PPO/TRPO and behaviour cloning on rlft datasets, with
control rewards; the models they start from and the RUN folders they write are :mod:`rlft.models`.

Heavy libraries (torch, transformers, trl, peft) are imported inside the modules that use them; importing
``rlft.train`` itself is cheap.
"""
