"""A stage setting named like a field of TRL's config reaches TRL by one rule: marked for TRL (passed as rlft holds
it, declared once with rlft's default) or resolved by rlft first (``resolved_trl_fields``), never copied by hand."""

from __future__ import annotations

import dataclasses

import pytest

from rlft.train.configs import trl_settings
from rlft.train.grpo.config import GRPOStageConfig
from rlft.train.sft_config import SFTStageConfig


@pytest.mark.parametrize("cls", [SFTStageConfig, GRPOStageConfig])
def test_every_setting_named_like_trls_reaches_trl_by_one_rule(cls):
    import trl

    trl_names = {f.name for f in dataclasses.fields(getattr(trl, cls.trl_config_class))}
    fields = dataclasses.fields(cls)
    shared = {f.name for f in fields if f.name in trl_names}
    marked = {f.name for f in fields if f.metadata.get("trl")}
    resolved = set(cls.resolved_trl_fields)
    assert marked <= trl_names, "a field marked for TRL that TRL's config does not have would break it"
    assert not marked & resolved
    assert shared == marked | resolved, "a field shadows TRL's without reaching it (mark it or resolve it)"


def test_the_trl_config_a_grpo_run_builds_holds_the_stage_settings(tmp_path):
    import torch

    from rlft.train.grpo.run import grpo_training_args

    config = GRPOStageConfig(learning_rate=1e-3, num_generations=4, per_device_train_batch_size=8, beta=0.1,
                             temperature=0.7, max_completion_length=12, loss_type="grpo", max_steps=3, seed=5,
                             mask_truncated_completions=True, trl={"weight_decay": 0.01})
    _, args = grpo_training_args(config, tmp_path / "run", torch.nn.Linear(2, 2), episodic=True)
    assert (args.learning_rate, args.num_generations, args.beta, args.temperature) == (1e-3, 4, 0.1, 0.7)
    assert (args.max_completion_length, args.loss_type, args.max_steps, args.seed) == (12, "grpo", 3, 5)
    assert args.weight_decay == 0.01  # a TRL setting rlft does not declare, applied last
    assert args.mask_truncated_completions is False  # resolved: an episode's last answer need not end in EOS
    assert set(trl_settings(config)) >= {"learning_rate", "num_generations", "beta"}
    assert not {"seed", "dataset", "rewards"} & set(trl_settings(config))
