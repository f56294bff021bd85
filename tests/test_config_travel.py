"""Where a GRPO run's config goes: the modules whose functions are handed the config object itself, or an object that
holds it, while a tiny run trains (a profile hook on every call), for the per-answer and the episodic kinds. The
config stays in the training layer and at most 12 modules see it; below that layer, code gets the values it needs,
never the config. Run with ``-s`` to see the modules and functions."""

from __future__ import annotations

import sys
import threading
from collections import defaultdict

import pytest

from factories import lake_episode_config, make_lake_q_model

MAX_MODULES = 12


def _own_attribute(value, name: str):
    try:
        own = object.__getattribute__(value, "__dict__")
    except (AttributeError, TypeError):
        return None
    return own.get(name) if isinstance(own, dict) else None


def _modules_handed_the_config(config) -> dict[str, set[str]]:
    from rlft.train.grpo.config import GRPOStageConfig
    from rlft.train.grpo.run import run_grpo

    seen: dict[str, set[str]] = defaultdict(set)

    def hook(frame, event, arg):
        if event != "call":
            return
        code = frame.f_code
        names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
        values = [frame.f_locals.get(name) for name in names]
        # handed the config, or an object that holds it (a run kind's methods read self.config); read from the
        # instance's own dict, so no property or __getattr__ runs inside the hook
        held = [_own_attribute(v, "config") for v in values]
        if any(isinstance(v, GRPOStageConfig) for v in [*values, *held]):
            seen[frame.f_globals.get("__name__", "?")].add(code.co_name)

    sys.setprofile(hook)
    threading.setprofile(hook)
    try:
        run_grpo(config)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return {module: functions for module, functions in seen.items() if module.startswith("rlft")}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["answers", "episodes"])
def test_a_grpo_runs_config_stays_in_the_training_layer(kind, tmp_path):
    from rlft.train.grpo.config import GRPOStageConfig

    data, model = make_lake_q_model(tmp_path)
    if kind == "episodes":
        config = lake_episode_config(data, model, tmp_path / "run", max_steps=1)
    else:
        config = GRPOStageConfig.of(dataset=str(data), model=str(model), out=tmp_path / "run", rewards=["format"],
                                    lora=False, max_steps=1, num_generations=2, per_device_train_batch_size=2)
    modules = _modules_handed_the_config(config)
    for module, functions in sorted(modules.items()):
        print(f"{module}: {', '.join(sorted(functions))}")
    assert "rlft.train.grpo.run" in modules  # the hook saw the run
    below = {m for m in modules if not m.startswith("rlft.train.")}
    assert not below, f"the config went below the training layer: {sorted(below)}"
    assert len(modules) <= MAX_MODULES, f"{len(modules)} modules see the config: {sorted(modules)}"
