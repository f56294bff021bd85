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
``{seeds}`` = ``0,1,2``. ``--seeds 5,6`` replaces the file's list (e.g. to check a result on another seed). A
pipeline without seeds runs its ``final:`` steps once after its steps.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from rlft.cli.common import command, given_on_command_line
from rlft.cli.pipeline_spec import load_pipeline
from rlft.cli.train import check_trl_flags
from rlft.core.console import console
from rlft.core.errors import InvalidInputError, RlftError
from rlft.core.secrets import (
    MIN_KNOWN_SECRET,
    is_secret_name,
    known_secrets,
    mask_known,
    redact_argv,
    redact_command,
    secret_values,
)

app = typer.Typer(no_args_is_help=True)

MAX_NESTING = 8  # pipeline run steps inside pipelines, at most this deep
MAX_STEPS = 10_000  # steps of a pipeline and every pipeline it runs: 7 files running the next 10 times made 10^7
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


def parse_step(argv: list[str], root):
    """Let the CLI parse one step's words and options without running it (UsageError when they are wrong);
    returns the command's click context: its parameters as it would run with them, and where each came from.

    ``root`` is the ``rlft`` command (the click group ``rlft pipeline run`` runs under, or the Typer app of
    :mod:`rlft.cli.main`): it is passed in because this module is part of what builds it."""
    if not argv or argv[0].startswith("-"):  # rlft --version is no step (hostile pass 18, U2)
        raise _usage_error()(f"'rlft {' '.join(argv)}' names no command")
    command = root_command = typer.main.get_command(root) if isinstance(root, typer.Typer) else root
    ctx = command.make_context("rlft", list(argv), resilient_parsing=True)
    words = list(argv)
    while hasattr(command, "list_commands"):  # a group: the next word names a command...
        # ...or a group below rlft runs itself (rlft eval --policy ...)
        if words and words[0].startswith("-") and command is not root_command:
            _refuse_repeated_scalars(command, words)  # rlft eval too (hostile pass 21, F5)
            return command.make_context(command.name, list(words), parent=ctx.parent)
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
    return ctx


def given_options(ctx) -> list[tuple[tuple[str, ...], str]]:
    """The options a parsed step gives on its command line: (the option's names, each value as click parsed it),
    its defaults left out; what the preflight checks is read here, as the command itself will read it."""
    pairs = []
    for param in given_on_command_line(ctx):
        if param.param_type_name != "option":
            continue
        value = ctx.params.get(param.name)
        values = value if getattr(param, "multiple", False) else [value]
        pairs += [(tuple(param.opts), str(v)) for v in values if v is not None and not isinstance(v, bool)]
    return pairs


def _refuse_repeated_scalars(command, words: list[str]) -> None:
    """A YAML list becomes a repeated flag; click keeps only the last value of an option that takes one."""
    single = {opt for p in command.params if not getattr(p, "multiple", False) and not getattr(p, "is_flag", False)
              for opt in getattr(p, "opts", ())}
    given = [w for w in words if w in single]
    repeated = sorted({w for w in given if given.count(w) > 1})
    if repeated:
        raise _usage_error()(f"{', '.join(repeated)} takes one value, the step gives several (a YAML list?)")


def mask_secrets(argv: list[str]) -> list[str]:
    """The step's words as its banner shows them: every secret masked, in either option form, and each value a
    secret option takes anywhere in the pipeline wherever else it is used (rlft.core.secrets.known_secrets)."""
    return redact_argv(argv)


def pipeline_secrets(runs: list[tuple[str, list[str]]], spec: dict | None = None) -> set[str]:
    """The values of every secret option the pipeline's steps pass (a variable holding a token may also fill a
    non-secret option: ``--repo-id me/{tok}``), and of its secret-named variables as :func:`load_pipeline` resolved
    them, ``--set`` and presets applied (``--set token=V`` fed into a ``--system`` text reached the dataset: hostile
    pass 18, B6)."""
    variables = (spec or {}).get("vars") or {}
    named = {str(v) for k, v in variables.items()
             if is_secret_name(str(k)) and isinstance(v, (str, int)) and len(str(v)) >= MIN_KNOWN_SECRET}
    return named.union(*(secret_values(argv) for _, argv in runs))


def _inside(path: Path, produced: list[Path]) -> bool:
    path = path.resolve()
    return any(path == out or out in path.parents for out in produced)


def preflight(runs: list[tuple[str, list[str]]], root, produced: list[Path] | None = None,
              sources: list[Path] | None = None, counted: list[int] | None = None) -> None:
    """Check every step before any runs: the CLI accepts it, its reward names are known, every input it
    names exists or is the output of an earlier step, and no step writes over a pipeline file being run
    (``sources``). Nested ``pipeline run`` steps are checked too."""
    produced = produced if produced is not None else []
    sources = sources if sources is not None else []
    counted = counted if counted is not None else [0]  # steps checked so far, nested pipelines' included
    known = pipeline_secrets(runs)
    try:
        _preflight_steps(runs, root, produced, sources, counted)
    except RlftError as exc:  # a value a step names in its error may be a token a secret option passes elsewhere
        exc.message, exc.hint = mask_known(exc.message, known), exc.hint and mask_known(exc.hint, known)
        exc.args = (exc.message,)
        raise


def _preflight_steps(runs: list[tuple[str, list[str]]], root, produced: list[Path], sources: list[Path],
                     counted: list[int]) -> None:
    for i, (label, argv) in enumerate(runs, 1):
        counted[0] += 1
        if counted[0] > MAX_STEPS:
            raise InvalidInputError(f"the pipeline and the pipelines it runs make more than {MAX_STEPS:,} steps",
                                    hint="run fewer seeds or nested pipelines per run")
        # masked as the banner masks it: an error must not print the token a step passes (hostile pass 12, B1)
        where = f"step {i}{' (' + label + ')' if label else ''}, rlft {' '.join(redact_argv(argv)[:3])}"
        try:
            ctx = parse_step(argv, root)
        except _usage_error() as exc:
            raise InvalidInputError(f"{where}: {exc.format_message()}") from exc
        if argv[:2] == ["pipeline", "run"]:
            _preflight_nested(ctx.params, where, root, produced, sources, counted)
            continue
        options = given_options(ctx)
        episodic = any("--rollout" in names and value == "episode" for names, value in options)
        for names, value in options:
            if "--reward" in names:
                _check_rewards(value, episodic, where)
            _check_input(argv, names, value, produced, where)
        outs = [Path(v).expanduser().resolve() for names, v in options if "--out" in names]
        for source in sources:
            if _inside(source, outs):
                raise InvalidInputError(f"{where}: its --out {outs[0]} holds the pipeline file {source}, which "
                                        "the step would replace",
                                        hint="give the pipeline an --out folder outside the one its files live in")
        produced += outs


def _preflight_nested(params: dict, where: str, root, produced: list[Path], sources: list[Path],
                      counted: list[int]) -> None:
    """A ``pipeline run`` step: its pipeline loaded and checked as the step would run it (not itself, not deeper
    than :data:`MAX_NESTING`, its steps counted with the rest), with the parameters click parsed for it."""
    nested_path = Path(params["path"])
    if nested_path.resolve() in [s.resolve() for s in sources]:
        raise InvalidInputError(f"{where}: the pipeline {nested_path} runs itself, through "
                                f"{' -> '.join(s.name for s in sources)}")
    if len(sources) >= MAX_NESTING:
        raise InvalidInputError(f"{where}: pipelines nested more than {MAX_NESTING} deep")
    _, nested = load_pipeline(nested_path, Path(params["out"]), params["overwrite"], list(params["set_"]),
                              params["seeds"])
    preflight(nested, root, produced, [*sources, nested_path], counted)


def _check_rewards(value: str, episodic: bool, where: str) -> None:
    """A step's ``--reward`` names, as the trainer it runs will parse them."""
    from rlft.train.grpo.rewards import parse_reward_names

    try:
        if episodic:
            from rlft.train.grpo.episode_rewards import parse_episode_reward_names

            parse_episode_reward_names(value)
        else:
            parse_reward_names(value)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{where}: {exc.message}", hint=exc.hint) from exc


def _check_input(argv: list[str], names: tuple[str, ...], value: str, produced: list[Path], where: str) -> None:
    """An input option's path exists, is written by an earlier step, or is a Hub id."""
    from rlft.datasets.loading import looks_like_hub_id

    labelled = argv[:2] == ["results", "record"]
    key = next((n for n in names if n in (LABELLED_INPUTS if labelled else INPUT_OPTIONS)), None)
    if key is None:
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
    # a token a variable or an option passes is masked wherever the steps use it
    with known_secrets(pipeline_secrets(runs, spec)):
        preflight(runs, root, sources=[path])  # a missing model or a misspelled reward fails here, before any step
        title = escape(redact_command(str(spec.get("name", path.stem))))  # a banner masks what its name holds too
        for i, (label, argv) in enumerate(runs, 1):
            where = f" {label}," if label else ""
            console.rule(f"[bold]{title}[/]{escape(where)} step {i}/{len(runs)}: "
                         f"rlft {escape(' '.join(mask_secrets(argv)))}")
            # standalone_mode=False: click returns a step's exit code instead of exiting the process.
            code = root.main(argv, prog_name="rlft", standalone_mode=False)
            if isinstance(code, int) and code != 0:
                raise typer.Exit(code)
