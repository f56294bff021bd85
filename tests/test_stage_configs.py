"""A stage config holds TRL's settings under TRL's names instead of copying TRL's fields: no field of a stage config is
named like a field of TRL's config class; what rlft says of one of TRL's settings (its default, note, bounds) is a
``TrlDefault``, and the values reach TRL's class as one mapping."""

from __future__ import annotations

import dataclasses

import pytest

from rlft.train.configs import merge_config
from rlft.train.grpo.config import GRPOStageConfig
from rlft.train.sft_config import SFTStageConfig
from rlft.train.trl_config import trl_settings


@pytest.mark.parametrize("cls", [SFTStageConfig, GRPOStageConfig])
def test_no_stage_field_is_named_like_a_field_of_trls_config(cls):
    import trl

    trl_names = {f.name for f in dataclasses.fields(getattr(trl, cls.trl_config_class))}
    shadowing = sorted(f.name for f in dataclasses.fields(cls) if f.name in trl_names and f.name != "trl")
    assert shadowing == [], "hold the setting in trl_defaults, by TRL's name, instead of a field of the stage"
    assert set(cls.trl_defaults) <= trl_names, "a default for a setting TRL's config does not have would break it"


@pytest.mark.parametrize("cls", [SFTStageConfig, GRPOStageConfig])
def test_rlfts_defaults_are_of_the_type_trl_declares(cls):
    import typing

    import trl

    hints = typing.get_type_hints(getattr(trl, cls.trl_config_class))
    for name, default in cls.trl_defaults.items():
        if default.value is None:
            continue
        declared = hints[name]
        allowed = {a for a in typing.get_args(declared)} | {declared, typing.get_origin(declared)}
        assert type(default.value) in allowed or (type(default.value) is int and float in allowed), (name, declared)


def test_a_setting_given_any_way_is_held_once_under_trls_name():
    config, _ = merge_config(GRPOStageConfig, {"learning_rate": "1e-3", "weight_decay": 0.1},
                             {"num_generations": 6, "max_steps": None}, trl_flags={"top_k": 5})
    assert config.trl == {"learning_rate": 1e-3, "weight_decay": 0.1, "num_generations": 6, "top_k": 5}
    assert (config.learning_rate, config.num_generations, config.max_steps) == (1e-3, 6, 500)  # 500: rlft's default
    assert not hasattr(dataclasses.replace(config), "no_such_setting")
    changed = config.with_trl(beta=0.2)
    assert (changed.beta, config.beta) == (0.2, None)
    held, _ = merge_config(GRPOStageConfig, {"trl": {"learning_rate": "2e-3", "weight_decay": 0.1}})
    assert held.learning_rate == 2e-3 and held.trl["weight_decay"] == 0.1  # a trl: mapping is read the same way
    with pytest.raises(Exception, match="top-p must be within"):
        merge_config(GRPOStageConfig, {"top_p": 1.5})


def test_the_trl_config_a_grpo_run_builds_holds_the_stage_settings(tmp_path):
    import torch

    from rlft.train.grpo.run import grpo_training_args

    config = GRPOStageConfig.of(learning_rate=1e-3, num_generations=4, per_device_train_batch_size=8, beta=0.1,
                             temperature=0.7, max_completion_length=12, loss_type="grpo", max_steps=3, seed=5,
                             mask_truncated_completions=True, trl={"weight_decay": 0.01})
    _, args = grpo_training_args(config, tmp_path / "run", torch.nn.Linear(2, 2), episodic=True)
    assert (args.learning_rate, args.num_generations, args.beta, args.temperature) == (1e-3, 4, 0.1, 0.7)
    assert (args.max_completion_length, args.loss_type, args.max_steps, args.seed) == (12, "grpo", 3, 5)
    assert args.weight_decay == 0.01  # a TRL setting rlft does not declare, applied last
    assert args.mask_truncated_completions is False  # resolved: an episode's last answer need not end in EOS
    assert set(trl_settings(config)) >= {"learning_rate", "num_generations", "beta"}
    assert not {"seed", "dataset", "rewards"} & set(trl_settings(config))
