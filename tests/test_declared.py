"""A setting's choices and bounds are declared once, in its field, and hold however a config is made: flags, a YAML
file, or code (core/options.check_declared; the stage configs add TRL's settings)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from rlft.core.errors import InvalidInputError
from rlft.core.options import Declared, option


@dataclass(kw_only=True)
class _Toy(Declared):
    mode: str = option("a", "a or b.", choices=("a", "b"))
    rate: float = option(0.5, "A rate.", min=0.0, max=1.0)
    steps: int = option(1, "Steps.", min=1)
    free: float = option(2.0, "Unbounded: any float, inf included.")


@pytest.mark.parametrize(("values", "message"), [
    ({"mode": "c"}, "--mode must be one of a, b, got 'c'"),
    ({"rate": 1.5}, "--rate must be within [0.0, 1.0], got 1.5"),
    ({"rate": float("nan")}, "--rate must be a finite number"),
    ({"steps": 0}, "--steps must be >= 1, got 0"),
])
def test_a_config_made_in_code_is_held_to_its_declarations(values, message):
    with pytest.raises(InvalidInputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        _Toy(**values)


def test_what_is_declared_passes_and_what_is_not_bounded_is_free():
    toy = _Toy(mode="b", rate=1.0, steps=3, free=float("inf"))
    assert (toy.mode, toy.rate, toy.steps) == ("b", 1.0, 3)


def test_the_commands_list_a_settings_choices_and_refuse_others_in_one_line(cli, tmp_path):
    help_text = cli("train", "grpo", "--help").output
    assert "step|episode" in help_text and "group|target" in help_text
    result = cli("eval", "--policy", "random", "--env", "CartPole-v1", "--backend", "vllm")
    assert result.exit_code == 2 and "--backend must be one of transformers, openai, got 'vllm'" in result.output
    (tmp_path / "grpo.yaml").write_text("grpo:\n  rollout: episodes\n")
    result = cli("train", "grpo", "--config", tmp_path / "grpo.yaml", "--dataset", tmp_path, "--model", tmp_path,
                 "--out", tmp_path / "r")
    assert result.exit_code == 2 and "--rollout must be one of step, episode, got 'episodes'" in result.output
    assert not (tmp_path / "r").exists()
