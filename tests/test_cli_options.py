"""Commands whose options are generated from their config dataclass (rlft.cli.options): a setting is declared once,
as a field, and appears in --help, in YAML configs and in the config the command runs with."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest
import typer
from typer.testing import CliRunner

from rlft.cli.options import config_command
from rlft.train.bc_config import BCConfig
from rlft.train.grpo.config import GRPOStageConfig
from rlft.train.online_config import OnlineConfig
from rlft.train.sft_config import SFTStageConfig


@dataclass
class _WithNewField(GRPOStageConfig):
    shiny_new_knob: float = field(default=0.25, metadata={"help": "A setting added as one field."})
    new_flag: bool = field(default=False, metadata={"help": "A boolean field."})


def _app(cls, section):
    seen = []
    app = typer.Typer()
    config_command(app, "stage", cls, lambda config, ctx: seen.append(config), section=section, trl_flags=True,
                   doc="A stage.")

    @app.callback()
    def main() -> None:  # a group, as rlft train is
        pass

    return app, seen


def test_a_new_field_is_a_flag_a_yaml_key_and_a_config_value(tmp_path):
    app, seen = _app(_WithNewField, "grpo")
    runner = CliRunner()
    help_text = runner.invoke(app, ["stage", "--help"], env={"COLUMNS": "200"}).output
    assert "--shiny-new-knob" in help_text and "A setting added as one field. [0.25]" in help_text
    assert "--new-flag" in help_text and "--no-new-flag" in help_text
    result = runner.invoke(app, ["stage", "--shiny-new-knob", "0.5", "--new-flag"])
    assert result.exit_code == 0, result.output
    assert seen[-1].shiny_new_knob == 0.5 and seen[-1].new_flag is True
    config = tmp_path / "stage.yaml"
    config.write_text("shiny_new_knob: 0.75\nnum_generations: 8\n")
    result = runner.invoke(app, ["stage", "--config", str(config), "--num-generations", "16"])
    assert result.exit_code == 0, result.output
    assert seen[-1].shiny_new_knob == 0.75 and seen[-1].num_generations == 16  # the flag wins over the file
    result = runner.invoke(app, ["stage"])
    assert seen[-1].shiny_new_knob == 0.25 and seen[-1].new_flag is False  # left out: the field's default


def test_aliases_lists_and_trl_flags_reach_the_config():
    app, seen = _app(GRPOStageConfig, "grpo")
    result = CliRunner().invoke(app, ["stage", "--reward", "format,bc", "--batch-size", "4", "--weight-decay",
                                      "0.1"])
    assert result.exit_code == 0, result.output
    config = seen[-1]
    assert config.rewards == ["format", "bc"] and config.per_device_train_batch_size == 4
    # both held under TRL's names: rlft's --batch-size alias and a flag only TRL's parser knows
    assert config.trl == {"per_device_train_batch_size": 4, "weight_decay": 0.1}


def test_bad_values_are_refused_by_the_parser():
    app, _ = _app(GRPOStageConfig, "grpo")
    result = CliRunner().invoke(app, ["stage", "--seed", "-1"])
    assert result.exit_code == 2 and "--seed" in result.output
    result = CliRunner().invoke(app, ["stage", "--num-generations", "many"])
    assert result.exit_code == 2 and "--num-generations" in result.output


@pytest.mark.parametrize("command,cls", [("sft", SFTStageConfig), ("grpo", GRPOStageConfig),
                                         ("online", OnlineConfig), ("bc", BCConfig)])
def test_rlft_train_commands_declare_exactly_their_config_fields(command, cls):
    """No option list is written by hand: rlft train's options are the config's fields and the TRL settings it
    names (plus --config)."""
    import typer.main

    from rlft.cli.train import app

    click_group = typer.main.get_command(app)
    params = {p.name for p in click_group.commands[command].params}
    fields = {f.name for f in dataclasses.fields(cls) if f.name != "trl"} | set(getattr(cls, "trl_defaults", {}))
    assert params - {"config"} == fields


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_non_finite_numbers_are_refused_when_parsed(value, tmp_path):
    """A NaN learning rate trained NaN weights to the end before failing in torch; now it is refused at once,
    from a flag or from a YAML file."""
    app, seen = _app(GRPOStageConfig, "grpo")
    result = CliRunner().invoke(app, ["stage", "--learning-rate", value])
    assert result.exit_code == 2 and "--learning-rate" in result.output and "finite number" in result.output
    config = tmp_path / "c.yaml"
    config.write_text(f"beta: {value}\n")
    result = CliRunner().invoke(app, ["stage", "--config", str(config)])
    assert result.exit_code == 2 and "beta" in result.output and not seen


def test_rlft_eval_declares_exactly_its_config_fields():
    import typer.main

    from rlft.cli.eval import app
    from rlft.evaluate.config import EvalConfig

    params = {p.name for p in typer.main.get_command(app).params} - {"install_completion", "show_completion"}
    assert params == {f.name for f in dataclasses.fields(EvalConfig)}  # (those two: Typer's, as a sub-app alone)


@pytest.mark.parametrize("path,config", [
    ("data export-q", "rlft.datasets.frozenlake_q.config:ExportQConfig"),
    ("data import", "rlft.datasets.import_config:ImportConfig"),
    ("data improve", "rlft.datasets.improve_config:ImproveConfig"),
    ("data collect", "rlft.sources.collect_config:CollectConfig"),
    ("data serialize", "rlft.datasets.serialize_config:SerializeConfig"),
    ("expert train", "rlft.sources.expert_config:ExpertConfig"),
    ("model init", "rlft.models.tiny_config:ModelInitConfig"),
    ("model fetch", "rlft.models.fetch_config:FetchConfig"),
    ("model add-bins", "rlft.models.fetch_config:AddBinsConfig"),
    ("train offline", "rlft.train.offline_config:OfflineConfig"),
])
def test_every_config_command_declares_exactly_its_config_fields(path, config):
    """The other commands built from a config: one option per field the CLI shows, none declared beside them."""
    import importlib

    import typer.main

    from rlft.cli.main import app

    module, name = config.split(":")
    cls = getattr(importlib.import_module(module), name)
    command = typer.main.get_command(app)
    for word in path.split():
        command = command.commands[word]
    params = {p.name for p in command.params}
    assert params == {f.name for f in dataclasses.fields(cls) if f.metadata.get("cli", True)}
