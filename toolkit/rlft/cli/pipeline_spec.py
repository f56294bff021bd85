"""A pipeline file read into the commands it runs: its keys checked, ``extends:`` laid under it, presets and
``--set`` applied, ``{variables}`` filled in, and each step's args turned into the argv a user would type (once per
seed for an experiment recipe, then its final steps)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from rlft.core.errors import InvalidInputError
from rlft.core.reading import read_yaml_mapping, require_file, yaml_value
from rlft.core.secrets import redact_command
from rlft.core.seeding import MAX_SEED


def _substitute(value: Any, variables: dict[str, Any]) -> Any:
    if isinstance(value, str):
        for key, val in variables.items():
            if value == f"{{{key}}}":  # a whole-value reference keeps the variable's type
                return val
            value = value.replace(f"{{{key}}}", str(val))
            if len(value) > MAX_VALUE_CHARS:  # variables that repeat each other grow tenfold per level
                raise InvalidInputError(f"a pipeline value grows past {MAX_VALUE_CHARS:,} characters once its "
                                        f"variables are filled in (through {{{key}}})",
                                        hint="a variable that repeats another many times, level after level")
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
        count = max(0, values.stop - values.start) if isinstance(values, range) else 1  # len() overflows at 2**63
        if len(seeds) + count > MAX_SEEDS:  # counted before the range is expanded
            raise InvalidInputError(f"--seeds {text!r} names more than {MAX_SEEDS:,} seeds",
                                    hint="an experiment runs every step once per seed: give a few")
        seeds += [v for v in values if v not in set(seeds)]
    if not seeds or any(v < 0 or v > MAX_SEED for v in seeds):
        raise InvalidInputError(f"--seeds {text!r} must list seeds from 0 to {MAX_SEED}")
    return seeds


def _resolve(variables: dict[str, Any], fixed: dict[str, Any]) -> dict[str, Any]:
    """The variables with every ``{name}`` of another variable filled in, however deep and in whatever order they
    are declared (``source: "{data_path}/{dataset_id}"`` with ``data_path: "{out}/minari"``)."""
    merged = {**variables, **fixed}
    for _ in range(len(merged) + 1):
        resolved = {k: _substitute(v, merged) for k, v in merged.items()}
        if resolved == merged:
            break
        merged = resolved
    # a value still naming a variable once nothing changes (a: "{b}", b: "{a}" settle as a: "{a}") is a circle
    circle = sorted(k for k, v in merged.items() if set(_undefined(v)) & set(merged))
    if circle:
        raise InvalidInputError(f"pipeline variables refer to each other in a circle: {', '.join(circle)}",
                                hint="give one of them a value that names no other")
    return merged


STEP_KEYS = ("command", "args", "enabled", "skip_if_exists", "force")
PIPELINE_KEYS = ("name", "description", "extends", "vars", "presets", "steps", "seeds", "final", "sft",
                 "grpo")  # sft, grpo: --config
MAX_EXTENDS = 8  # a pipeline extends at most this many others in a chain (a circle is refused by name)
MAX_SEEDS = 1000  # --seeds of an experiment
MAX_VALUE_CHARS = 100_000  # a step's value once its variables are filled in
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


# what each key of a step holds once its variables are filled in (None: not given)
STEP_TYPES = {"command": (str, "text, e.g. 'data export-q frozenlake'"),
              "args": (dict, "a mapping of option name: value"),
              "skip_if_exists": (str, "a path"),
              "enabled": (bool, "true or false"), "force": (bool, "true or false")}


def _is_name(key: Any) -> bool:
    return isinstance(key, str) and bool(key)  # an option's name: "args: {1: 2}" was an AttributeError (pass 15, B5)


def _check_step_types(step: dict[str, Any], where: str) -> None:
    """A step's keys of the wrong kind (``args: [1, 2]``, ``skip_if_exists: [a, b]``, ``enabled: [1]``) named before
    any step runs, instead of a traceback or a step run that a list made truthy (hostile pass 14, B9)."""
    for key, (kind, what) in STEP_TYPES.items():
        value = _flag_value(step.get(key)) if kind is bool else step.get(key)  # --set gives "true" / "false"
        if value is None or (isinstance(value, kind) and not (kind is dict and not all(map(_is_name, value)))):
            continue
        raise InvalidInputError(f"{where}: '{key}' is {value!r}, which is not {what}",
                                hint="fix the step in the pipeline file")


def _step_argvs(steps: list, variables: dict[str, Any], path: Path, section: str) -> list[list[str]]:
    runs = []
    for i, step in enumerate(steps, 1):  # numbered from 1, as the run banners and preflight errors are
        if not isinstance(step, dict) or "command" not in step:
            raise InvalidInputError(f"{section} {i} of {path} has no 'command'")
        unknown = sorted(set(step) - set(STEP_KEYS))
        if unknown:
            raise InvalidInputError(f"{section} {i} of {path} ({redact_command(step['command'])}): unknown key "
                                    f"{', '.join(map(repr, unknown))}", hint=f"a step has {', '.join(STEP_KEYS)}")
        missing = sorted(set(_undefined(_substitute({k: step.get(k) for k in STEP_KEYS}, variables))))
        if missing:
            raise InvalidInputError(f"{section} {i} of {path} ({redact_command(step['command'])}): undefined variable "
                                    f"{', '.join('{' + m + '}' for m in missing)}",
                                    hint=f"define it under vars: (defined: {', '.join(sorted(variables))})")
        filled = {key: _substitute(step.get(key), variables) for key in STEP_KEYS}
        _check_step_types(filled, f"{section} {i} of {path} ({redact_command(str(step['command']))})")
        if filled["enabled"] is not None and not _flag_value(filled["enabled"]):
            continue
        skip, forced = filled["skip_if_exists"], _flag_value(filled["force"] or False)
        if skip and not forced and Path(skip).exists():
            continue
        # split before the variables are filled: a value with a space ("--out 'my runs'") stays one word, and a --set
        # value cannot add options to the command (hostile pass 21, F4)
        words = [str(_substitute(word, variables)) for word in str(step["command"]).split()]
        runs.append(words + args_to_argv(filled["args"] or {}))
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
    for key in ("vars", "presets"):  # checked before an extended pipeline's are laid under them
        if not isinstance(spec.get(key) or {}, dict):
            raise InvalidInputError(f"'{key}:' of pipeline {path} must be a mapping, got {type(spec[key]).__name__}")
    if "extends" in spec:
        spec = _extended(path, spec, chain)
    if "steps" in spec and not isinstance(spec["steps"], list):
        raise InvalidInputError(f"'steps:' of pipeline {path} must be a list of steps, got "
                                f"{type(spec['steps']).__name__}", hint="write each step as '- command: ...'")
    if not isinstance(spec.get("steps"), list) or not spec["steps"]:
        raise InvalidInputError(f"pipeline {path} has no steps")
    if not isinstance(spec.get("final") or [], list):
        raise InvalidInputError(f"'final:' of pipeline {path} must be a list of steps")
    for key in ("name", "description"):  # a banner's title: text (hostile pass 17, U2)
        if spec.get(key) is not None and not isinstance(spec[key], str):
            raise InvalidInputError(f"'{key}:' of pipeline {path} must be text, got {type(spec[key]).__name__}")
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
        merged[key] = {**(merged.get(key) or {}), **(spec.get(key) or {})}
    merged.update({k: v for k, v in spec.items() if k not in ("vars", "presets", "extends")})
    return merged


def load_pipeline(path: Path, out: Path, overwrite: bool, overrides: list[str],
                  seeds: str | None = None) -> tuple[dict, list[tuple[str, list[str]]]]:
    """Parse a pipeline file and return (spec, [(label, argv) of each step to run]); the spec's ``vars`` are the
    resolved ones."""

    require_file(path, "pipeline file", hint="see the files under pipelines/")
    spec = read_pipeline_spec(path)
    variables = dict(spec.get("vars") or {})
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:  # the value is not echoed: it may be a token typed without its name (hostile pass 15)
            raise InvalidInputError("--set takes NAME=VALUE: a value was given with no '=' and no variable name")
        if key not in variables:
            raise InvalidInputError(f"--set {key}: pipeline {path.name} has no variable {key!r}",
                                    hint=f"its variables: {sorted(variables)}")
        variables[key] = yaml_value(value, f"--set {key}")
    variables = apply_presets(spec, variables, {item.partition("=")[0] for item in overrides}, path)
    # the spec handed back holds the variables as the steps see them (--set and presets applied): what a secret-named
    # one holds is masked wherever a step uses it
    spec = {**spec, "vars": variables}
    seed_list = parse_seeds(seeds) if seeds is not None else spec.get("seeds")
    if seed_list is None:
        fixed = _resolve(variables, {"out": str(out), "overwrite": overwrite})
        # a pipeline without seeds runs its final steps after its steps, not never (hostile pass 14, B10)
        return spec, [("", argv) for argv in _step_argvs(spec["steps"], fixed, path, "step")] + \
            [("final", argv) for argv in _step_argvs(spec.get("final") or [], fixed, path, "final step")]
    if seeds is None and (not isinstance(seed_list, list) or not seed_list or len(set(seed_list)) != len(seed_list)
                          or len(seed_list) > MAX_SEEDS
                          or not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_SEED
                                     for v in seed_list)):
        # [0, 0] ran seed 0 and then failed on its own output (hostile pass 15): refused before any step
        raise InvalidInputError(f"'seeds:' of pipeline {path} must be a list of distinct integers from 0 to "
                                f"{MAX_SEED} (at most {MAX_SEEDS:,})")
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
        switch = _flag_value(variables[name])
        if not isinstance(switch, bool):  # "maybe" was silently false (hostile pass 15)
            raise InvalidInputError(f"preset {name!r} of pipeline {path} is switched by {switch!r}: true or false")
        if switch:
            out.update({k: v for k, v in values.items() if k not in given})
    return out
