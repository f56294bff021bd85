"""``rlft pipeline run FILE``: a YAML list of rlft commands with variables, run in-process in order.

A pipeline file::

    name: frozenlake-q
    vars: {episodes: 1000}          # defaults, overridden by --set episodes=10
    steps:
      - command: data export-q frozenlake
        args: {map: 4x4, episodes: "{episodes}", out: "{out}"}
        skip_if_exists: some/path     # optional: a step whose product is already there is skipped...
        force: "{retrain}"            # ...unless this is true
        enabled: "{collect}"          # optional: false skips the step

``{out}`` is the --out folder; ``{overwrite}`` is true/false. Args become CLI options (``key: true`` ->
``--key``, ``false`` -> ``--no-key``), so a pipeline step is exactly the command a user would type.

An experiment recipe (``pipelines/experiments/``) adds ``seeds: [0, 1, 2]``: the steps run once per seed with
``{seed}`` set and ``{out}`` = ``OUT/seed-N``; then the ``final:`` steps run once with ``{out}`` = ``OUT`` and
``{seeds}`` = ``0,1,2``. ``--seeds 5,6`` replaces the file's list (e.g. to check a result on another seed).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import typer

from rlft.cli.common import command
from rlft.cli.train import check_trl_flags
from rlft.core.console import console
from rlft.core.errors import InvalidInputError
from rlft.core.reading import read_yaml_mapping
from rlft.core.secrets import redact_argv

app = typer.Typer(no_args_is_help=True)


def _substitute(value: Any, variables: dict[str, Any]) -> Any:
    if isinstance(value, str):
        for key, val in variables.items():
            if value == f"{{{key}}}":  # a whole-value reference keeps the variable's type
                return val
            value = value.replace(f"{{{key}}}", str(val))
        return value
    if isinstance(value, list):
        return [_substitute(v, variables) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, variables) for k, v in value.items()}
    return value


def _flag_value(value: Any) -> Any:
    """YAML strings from --set like 'true'/'false' act as booleans."""
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return value


def args_to_argv(args: dict[str, Any]) -> list[str]:
    """``{"map": "4x4", "slippery": False}`` -> ``["--map", "4x4", "--no-slippery"]``."""
    argv: list[str] = []
    for key, value in args.items():
        flag = "--" + key.replace("_", "-")
        value = _flag_value(value)
        if value is None:
            continue
        if isinstance(value, bool):
            argv.append(flag if value else "--no-" + key.replace("_", "-"))
        elif isinstance(value, list):
            for item in value:
                argv += [flag, str(item)]
        else:
            argv += [flag, str(value)]
    return argv


def parse_seeds(text: str) -> list[int]:
    """``"0,1,2"`` or ``"0-4"`` -> a list of distinct integer seeds."""
    seeds: list[int] = []
    for part in str(text).split(","):
        part = part.strip()
        low, sep, high = part.partition("-")
        try:
            values = range(int(low), int(high) + 1) if sep and low else [int(part)]
        except ValueError as exc:
            raise InvalidInputError(f"--seeds {text!r}: {part!r} is not a seed or a range A-B") from exc
        if sep and low and not values:
            raise InvalidInputError(f"--seeds {text!r}: the range {part} runs backwards", hint=f"write {high}-{low}")
        if len(seeds) + len(values) > MAX_SEEDS:  # counted before the range is expanded
            raise InvalidInputError(f"--seeds {text!r} names more than {MAX_SEEDS:,} seeds",
                                    hint="an experiment runs every step once per seed: give a few")
        seeds += [v for v in values if v not in set(seeds)]
    if not seeds or any(v < 0 for v in seeds):
        raise InvalidInputError(f"--seeds {text!r} must list seeds >= 0")
    return seeds


def _resolve(variables: dict[str, Any], fixed: dict[str, Any]) -> dict[str, Any]:
    """The variables with every ``{name}`` of another variable filled in, however deep and in whatever order they
    are declared (``source: "{data_path}/{dataset_id}"`` with ``data_path: "{out}/minari"``)."""
    merged = {**variables, **fixed}
    for _ in range(len(merged) + 1):
        resolved = {k: _substitute(v, merged) for k, v in merged.items()}
        if resolved == merged:
            return resolved
        merged = resolved
    circle = sorted(k for k, v in merged.items() if set(_undefined(v)) & set(merged))
    raise InvalidInputError(f"pipeline variables refer to each other in a circle: {', '.join(circle)}")


STEP_KEYS = ("command", "args", "enabled", "skip_if_exists", "force")
PIPELINE_KEYS = ("name", "description", "extends", "vars", "presets", "steps", "seeds", "final", "sft",
                 "grpo")  # sft, grpo: --config
MAX_EXTENDS = 8  # a pipeline extends at most this many others in a chain (a circle is refused by name)
MAX_NESTING = 8  # pipeline run steps inside pipelines, at most this deep
MAX_SEEDS = 1000  # --seeds of an experiment
UNDEFINED = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _undefined(value: Any) -> list[str]:
    """``{name}`` references left after substitution: variables the pipeline does not define."""
    if isinstance(value, str):
        return UNDEFINED.findall(value)
    if isinstance(value, list):
        return [n for v in value for n in _undefined(v)]
    if isinstance(value, dict):
        return [n for v in value.values() for n in _undefined(v)]
    return []


def _step_argvs(steps: list, variables: dict[str, Any], path: Path, section: str) -> list[list[str]]:
    runs = []
    for i, step in enumerate(steps, 1):  # numbered from 1, as the run banners and preflight errors are
        if not isinstance(step, dict) or "command" not in step:
            raise InvalidInputError(f"{section} {i} of {path} has no 'command'")
        unknown = sorted(set(step) - set(STEP_KEYS))
        if unknown:
            raise InvalidInputError(f"{section} {i} of {path} ({step['command']}): unknown key "
                                    f"{', '.join(map(repr, unknown))}", hint=f"a step has {', '.join(STEP_KEYS)}")
        missing = sorted(set(_undefined(_substitute({k: step.get(k) for k in STEP_KEYS}, variables))))
        if missing:
            raise InvalidInputError(f"{section} {i} of {path} ({step['command']}): undefined variable "
                                    f"{', '.join('{' + m + '}' for m in missing)}",
                                    hint=f"define it under vars: (defined: {', '.join(sorted(variables))})")
        if not _flag_value(_substitute(step.get("enabled", True), variables)):
            continue
        skip = step.get("skip_if_exists")
        forced = _flag_value(_substitute(step.get("force", False), variables))
        if skip and not forced and Path(_substitute(skip, variables)).exists():
            continue
        command_words = str(_substitute(step["command"], variables)).split()
        runs.append(command_words + args_to_argv(_substitute(step.get("args") or {}, variables)))
    return runs


def read_pipeline_spec(path: Path, chain: tuple[Path, ...] = ()) -> dict:
    """The pipeline file's mapping, with its top-level keys and step lists checked. ``extends: OTHER.yaml`` (next
    to it) takes the other pipeline whole and changes only what this one states: its ``vars`` and ``presets`` are
    laid over the other's, any other key replaces the other's."""
    spec = read_yaml_mapping(path, "a pipeline mapping (name, vars, steps)")
    unknown = sorted(set(spec) - set(PIPELINE_KEYS))
    if unknown:
        raise InvalidInputError(f"pipeline {path}: unknown key {', '.join(map(repr, unknown))}",
                                hint=f"a pipeline has {', '.join(PIPELINE_KEYS)}")
    if "extends" in spec:
        spec = _extended(path, spec, chain)
    if not isinstance(spec.get("steps"), list) or not spec["steps"]:
        raise InvalidInputError(f"pipeline {path} has no steps")
    if not isinstance(spec.get("final") or [], list):
        raise InvalidInputError(f"'final:' of pipeline {path} must be a list of steps")
    return spec


def _extended(path: Path, spec: dict, chain: tuple[Path, ...]) -> dict:
    base_path = (path.parent / str(spec["extends"])).resolve()
    chain = (*chain, path.resolve())
    if base_path in chain:
        raise InvalidInputError(f"pipeline {path} extends itself through {' -> '.join(p.name for p in chain)} -> "
                                f"{base_path.name}")
    if len(chain) > MAX_EXTENDS:
        raise InvalidInputError(f"pipeline {path}: more than {MAX_EXTENDS} pipelines extend each other in a chain")
    if not base_path.is_file():
        raise InvalidInputError(f"pipeline {path} extends {spec['extends']}, which is not a file next to it")
    merged = dict(read_pipeline_spec(base_path, chain))
    for key in ("vars", "presets"):
        if not isinstance(spec.get(key, {}), dict):
            raise InvalidInputError(f"'{key}:' of pipeline {path} must be a mapping")
        merged[key] = {**(merged.get(key) or {}), **(spec.get(key) or {})}
    merged.update({k: v for k, v in spec.items() if k not in ("vars", "presets", "extends")})
    return merged


def load_pipeline(path: Path, out: Path, overwrite: bool, overrides: list[str],
                  seeds: str | None = None) -> tuple[dict, list[tuple[str, list[str]]]]:
    """Parse a pipeline file and return (spec, [(label, argv) of each step to run])."""
    import yaml

    if not path.is_file():
        raise InvalidInputError(f"no pipeline file {path}", hint="see the files under pipelines/")
    spec = read_pipeline_spec(path)
    variables = dict(spec.get("vars") or {})
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise InvalidInputError(f"--set {item!r} is not KEY=VALUE")
        if key not in variables:
            raise InvalidInputError(f"--set {key}: pipeline {path.name} has no variable {key!r}",
                                    hint=f"its variables: {sorted(variables)}")
        variables[key] = yaml.safe_load(value)
    variables = apply_presets(spec, variables, {item.partition("=")[0] for item in overrides}, path)
    seed_list = parse_seeds(seeds) if seeds is not None else spec.get("seeds")
    if seed_list is None:
        return spec, [("", argv) for argv in _step_argvs(spec["steps"], _resolve(variables, {
            "out": str(out), "overwrite": overwrite}), path, "step")]
    if seeds is None and (not isinstance(seed_list, list) or not seed_list
                          or not all(isinstance(v, int) and v >= 0 for v in seed_list)):
        raise InvalidInputError(f"'seeds:' of pipeline {path} must be a list of integers >= 0")
    runs = []
    for seed in seed_list:
        fixed = {"seed": seed, "out": f"{out}/seed-{seed}", "overwrite": overwrite}
        runs += [(f"seed {seed}", argv) for argv in _step_argvs(spec["steps"], _resolve(variables, fixed), path,
                                                                 "step")]
    final = {"out": str(out), "overwrite": overwrite, "seeds": ",".join(map(str, seed_list))}
    runs += [("final", argv) for argv in _step_argvs(spec.get("final") or [], _resolve(variables, final), path,
                                                     "final step")]
    return spec, runs


def apply_presets(spec: dict, variables: dict[str, Any], given: set[str], path: Path) -> dict[str, Any]:
    """``presets: {quick: {max_steps: 150, ...}}``: a preset is a boolean variable of the same name; when it is true
    its values replace the variables' defaults (a variable given with --set keeps the given value)."""
    presets = spec.get("presets") or {}
    if not isinstance(presets, dict):
        raise InvalidInputError(f"'presets:' of pipeline {path} must map preset names to variable values")
    out = dict(variables)
    for name, values in presets.items():
        if name not in variables or not isinstance(values, dict):
            raise InvalidInputError(f"preset {name!r} of pipeline {path} needs a variable {name!r} (false by "
                                    "default) and a mapping of variable values")
        unknown = sorted(set(values) - set(variables))
        if unknown:
            raise InvalidInputError(f"preset {name!r} of pipeline {path} sets unknown variables {unknown}")
        if _flag_value(variables[name]) is True:
            out.update({k: v for k, v in values.items() if k not in given})
    return out


# Options whose value is an input that must exist (or be written by an earlier step) before the pipeline starts.
INPUT_OPTIONS = ("--dataset", "--model", "--codec", "--policy", "--expert")
LABELLED_INPUTS = ("--report", "--run", "--dataset")  # rlft results record LABEL=PATH
POLICY_PREFIXES = ("llm:", "expert:", "bc:")


def _usage_error():
    try:  # typer vendors click: its errors are not the click package's classes
        from typer._click.exceptions import UsageError
    except ImportError:  # pragma: no cover - a typer that uses click itself
        from click.exceptions import UsageError
    return UsageError


def parse_step(argv: list[str], root) -> None:
    """Let the CLI parse one step's words and options without running it (UsageError when they are wrong).

    ``root`` is the ``rlft`` command (the click group ``rlft pipeline run`` runs under, or the Typer app of
    :mod:`rlft.cli.main`): it is passed in because this module is part of what builds it."""
    command = typer.main.get_command(root) if isinstance(root, typer.Typer) else root
    ctx = command.make_context("rlft", list(argv), resilient_parsing=True)
    words = list(argv)
    while hasattr(command, "list_commands"):  # a group: the next word names a command...
        if words and words[0].startswith("-"):  # ...or the group runs itself (rlft eval --policy ...)
            command.make_context(command.name, list(words), parent=ctx.parent)
            return
        if not words:
            raise _usage_error()(f"'rlft {' '.join(argv)}' names no command")
        name = words.pop(0)
        sub = command.get_command(ctx, name)
        if sub is None:
            raise _usage_error()(f"unknown command {name!r} in 'rlft {' '.join(argv)}'")
        command = sub
        group = hasattr(sub, "list_commands")
        ctx = command.make_context(name, list(words) if not group else words[:1], parent=ctx,
                                   resilient_parsing=group)
    _refuse_repeated_scalars(command, words)
    if ctx.args:  # flags the command does not declare: train sft|grpo hands them to TRL's parser

        try:
            check_trl_flags(ctx.info_name, list(ctx.args))
        except InvalidInputError as exc:
            raise _usage_error()(str(exc)) from exc


def _refuse_repeated_scalars(command, words: list[str]) -> None:
    """A YAML list becomes a repeated flag; click keeps only the last value of an option that takes one."""
    single = {opt for p in command.params if not getattr(p, "multiple", False) and not getattr(p, "is_flag", False)
              for opt in getattr(p, "opts", ())}
    given = [w for w in words if w in single]
    repeated = sorted({w for w in given if given.count(w) > 1})
    if repeated:
        raise _usage_error()(f"{', '.join(repeated)} takes one value, the step gives several (a YAML list?)")


def mask_secrets(argv: list[str]) -> list[str]:
    """The step's words as its banner shows them: every secret masked, in either option form (rlft.core.secrets)."""
    return redact_argv(argv)


def _options(argv: list[str]) -> list[tuple[str, str]]:
    return [(argv[i], argv[i + 1]) for i in range(len(argv) - 1) if argv[i].startswith("--")]


def _inside(path: Path, produced: list[Path]) -> bool:
    path = path.resolve()
    return any(path == out or out in path.parents for out in produced)


def preflight(runs: list[tuple[str, list[str]]], root, produced: list[Path] | None = None,
              sources: list[Path] | None = None) -> None:
    """Check every step before any runs: the CLI accepts it, its reward names are known, every input it
    names exists or is the output of an earlier step, and no step writes over a pipeline file being run
    (``sources``). Nested ``pipeline run`` steps are checked too."""
    produced = produced if produced is not None else []
    sources = sources if sources is not None else []
    for i, (label, argv) in enumerate(runs, 1):
        where = f"step {i}{' (' + label + ')' if label else ''}, rlft {' '.join(argv[:3])}"
        try:
            parse_step(argv, root)
        except _usage_error() as exc:
            raise InvalidInputError(f"{where}: {exc.format_message()}") from exc
        options = _options(argv)
        if argv[:2] == ["pipeline", "run"]:
            sets = [v for k, v in options if k == "--set"]
            seeds = next((v for k, v in options if k == "--seeds"), None)
            out = next(v for k, v in options if k == "--out")
            nested_path = Path(argv[2])
            if nested_path.resolve() in [s.resolve() for s in sources]:
                raise InvalidInputError(f"{where}: the pipeline {nested_path} runs itself, through "
                                        f"{' -> '.join(s.name for s in sources)}")
            if len(sources) >= MAX_NESTING:
                raise InvalidInputError(f"{where}: pipelines nested more than {MAX_NESTING} deep")
            _, nested = load_pipeline(nested_path, Path(out), "--overwrite" in argv, sets, seeds)
            preflight(nested, root, produced, [*sources, nested_path])
            continue
        episodic = ("--rollout", "episode") in options
        for key, value in options:
            if key == "--reward":
                _check_rewards(value, episodic, where)
            _check_input(argv, key, value, produced, where)
        outs = [Path(v).expanduser().resolve() for k, v in options if k == "--out"]
        for source in sources:
            if _inside(source, outs):
                raise InvalidInputError(f"{where}: its --out {outs[0]} holds the pipeline file {source}, which "
                                        "the step would replace",
                                        hint="give the pipeline an --out folder outside the one its files live in")
        produced += outs


def _check_rewards(value: str, episodic: bool, where: str) -> None:
    """A step's ``--reward`` names, as the trainer it runs will parse them."""
    from rlft.train.rewards import parse_reward_names

    try:
        if episodic:
            from rlft.train.episode_rewards import parse_episode_reward_names

            parse_episode_reward_names(value)
        else:
            parse_reward_names(value)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{where}: {exc.message}", hint=exc.hint) from exc


def _check_input(argv: list[str], key: str, value: str, produced: list[Path], where: str) -> None:
    """An input option's path exists, is written by an earlier step, or is a Hub id."""
    from rlft.datasets.loading import looks_like_hub_id

    labelled = argv[:2] == ["results", "record"]
    if key not in (LABELLED_INPUTS if labelled else INPUT_OPTIONS):
        return
    target = value.partition("=")[2] if labelled else next(
        (value[len(p):] for p in POLICY_PREFIXES if value.startswith(p)), value)
    if key == "--policy" and target == value:
        return  # random, constant, q-greedy: no input
    path = Path(target).expanduser()
    if path.exists() or _inside(path, produced) or (looks_like_hub_id(target) and "/" in target):
        return  # a local input, one an earlier step writes, or a Hub id (resolved when the step runs)
    raise InvalidInputError(f"{where}: {key} {value} does not exist and no earlier step writes it",
                            hint="fix the path, or add the step that makes it")


@command(app, "run")
def run(
    ctx: typer.Context,
    path: Path = typer.Argument(..., help="Pipeline YAML file (see pipelines/)."),
    out: Path = typer.Option(..., "--out", help="Output folder, available to steps as {out}."),
    overwrite: bool = typer.Option(False, help="Replace an existing output (available as {overwrite})."),
    set_: list[str] = typer.Option([], "--set", help="Override a pipeline variable: KEY=VALUE (repeatable)."),
    seeds: str | None = typer.Option(None, "--seeds", help="Seeds to run the steps for, e.g. 0-4 or 5,6 "
                                                          "(replaces the file's seeds: list)."),
) -> None:
    """Run every step of a pipeline file, in order, as the rlft commands it names (once per seed for an
    experiment recipe, then its final steps)."""

    root = ctx.find_root().command  # the rlft group this command runs under: each step runs through it

    spec, runs = load_pipeline(path, out, overwrite, set_, seeds)
    preflight(runs, root, sources=[path])  # a missing model or a misspelled reward fails here, before any step runs
    for i, (label, argv) in enumerate(runs, 1):
        where = f" {label}," if label else ""
        console.rule(f"[bold]{spec.get('name', path.stem)}[/]{where} step {i}/{len(runs)}: "
                     f"rlft {' '.join(mask_secrets(argv))}")
        # standalone_mode=False: click returns a step's exit code instead of exiting the process.
        code = root.main(argv, prog_name="rlft", standalone_mode=False)
        if isinstance(code, int) and code != 0:
            raise typer.Exit(code)
