"""Every float option of every command refuses NaN and infinities when parsed, one table over the command tree
(a new float option without the check fails here), as a one-line usage error (exit 2) before anything runs."""

from __future__ import annotations

import typing

import pytest
import typer

from rlft.cli.main import app


def _is_float(param) -> bool:
    """A float option, in typer's own parameter classes (0.2x: the annotation) or click's (the type's name)."""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is not None:
        return descriptor.annotation is float or float in typing.get_args(descriptor.annotation)
    return getattr(getattr(param, "type", None), "name", "") in ("float", "float range")


def float_options() -> list[tuple[list[str], str]]:
    """(command words, option flag) of every float option under ``rlft``."""
    found = []

    def walk(command, words):
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            walk(sub, [*words, name])
        for param in command.params:
            if _is_float(param):
                found.append((words, param.opts[0]))

    walk(typer.main.get_command(app), [])
    return found


OPTIONS = float_options()


def test_the_table_covers_every_command_group():
    commands = {" ".join(words) for words, _ in OPTIONS}
    assert {"train sft", "train grpo", "train online", "train bc", "eval", "data collect", "data export-q",
            "expert train", "model init"} <= commands
    assert len(OPTIONS) >= 30


@pytest.mark.parametrize(("words", "flag"), OPTIONS, ids=[f"{' '.join(w)} {f}" for w, f in OPTIONS])
def test_non_finite_values_are_refused_when_parsed(cli, words, flag):
    # click processes the options given first, in their order: the value is refused before any missing option
    for bad in ("nan", "inf", "-inf"):
        result = cli(*words, flag, bad)
        assert result.exit_code == 2, (bad, result.output)
        # its own reason, bounded options too (a bound's "should be <= 86400" for NaN: hostile pass 11)
        text = " ".join(result.output.replace("│", " ").split())
        assert f"Invalid value for '{flag}': must be a finite number, got {bad}" in text, result.output
        assert "Traceback" not in result.output, result.output


def test_finite_values_pass_the_check(cli, tmp_path):
    result = cli("data", "collect", "--noise", "0.5", "--env", "CartPole-v1", "--episodes", "1", "--dataset-id",
                 "cp/x-v0", "--data-path", tmp_path)
    assert result.exit_code == 0, result.output
