"""Shared CLI plumbing: one-line errors (exit code 2 for usage errors, 1 for faults), interrupted runs that say
nothing was written."""

from __future__ import annotations

import _thread
import errno
import functools
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

import typer
from rich.markup import escape

from rlft.core.claims import release_outputs, restore_set_aside
from rlft.core.console import err_console
from rlft.core.errors import FaultError, RlftError
from rlft.core.secrets import environment_secrets, is_secret_name, known_secrets, redact_text

# OSErrors that say what went wrong with a path or the machine, as one line: a full disk, a file-size limit, a name
# too long, a symlink loop...
SYSTEM_FAULTS = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exceeded",
                 errno.EFBIG: "the file is larger than this process may write (a file-size limit)",
                 errno.ENAMETOOLONG: "a file name is too long", errno.ELOOP: "a symbolic link loops",
                 errno.EROFS: "the file system is read-only", errno.EIO: "an input/output error of the device",
                 errno.EACCES: "permission denied", errno.EPERM: "permission denied"}
MACHINE_FAULTS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO)  # the machine's, not the input's


def system_fault(exc: OSError) -> str:
    names = " -> ".join(str(n) for n in (exc.filename, getattr(exc, "filename2", None)) if n)
    return f"{SYSTEM_FAULTS[exc.errno]}" + (f": {names}" if names else "")


EXIT_USAGE = 2  # the input is wrong
EXIT_FAULT = 1  # the disk, the network or a remote failed (FaultError)


def finite(value: float | None) -> float | None:
    """Option callback of every float option: NaN and infinities are refused when parsed (click's FloatRange lets
    NaN through its bounds, since every comparison with NaN is false)."""
    import math

    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"must be a finite number, got {value}")
    return value


def finite_within(low: float | None, high: float | None):
    """The option callback of a float option declared with bounds: :func:`finite`, then ``low <= value <= high``."""

    def check(value: float | None) -> float | None:
        value = finite(value)
        if value is not None and ((low is not None and value < low) or (high is not None and value > high)):
            span = (f"from {low:g} to {high:g}" if low is not None and high is not None
                    else f"at least {low:g}" if low is not None else f"at most {high:g}")
            raise typer.BadParameter(f"must be {span}, got {value:g}")
        return value

    return check


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is, so every ``finally`` and temporary-folder cleanup runs as on
    Ctrl-C (the default SIGTERM action kills the process and leaves temporary folders behind)."""


def print_usage_error(exc) -> None:
    """A usage error click finds (a value out of its declared range, an unknown option, a missing one) as the one
    ``Error:`` line every other bad input gets, with where to look, instead of typer's boxed usage text."""
    if type(exc).__name__ == "NoArgsIsHelpError":  # typer has printed the help already
        return
    ctx = getattr(exc, "ctx", None)
    where = f"{ctx.command_path} --help" if ctx is not None else "--help"  # click names no command for some
    hint = f" (`{where}` lists the options)"
    message = " ".join(redact_text(exc.format_message()).split())
    err_console.print(f"[bold red]Error:[/] {escape(message)}{escape(hint)}", markup=True, highlight=False,
                      soft_wrap=True)


def _terminate(signum, frame):
    raise Terminated()


def _redeliver_lost_interrupts(previous_hook, unraisable) -> None:
    """``sys.unraisablehook`` while a command runs: a ``KeyboardInterrupt`` (or :class:`Terminated`) raised while
    Python runs a garbage-collection callback or a ``__del__`` (jax registers such a callback) cannot propagate,
    and Python would print it and carry on, ignoring the Ctrl-C or SIGTERM. The signal is delivered again, from
    another thread a moment later: raised from this hook it would be lost the same way, and by then the main
    thread is past the callback (if it is in another one, this happens again). Anything else goes to the
    previous hook."""
    if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
        signum = signal.SIGTERM if issubclass(unraisable.exc_type, Terminated) else signal.SIGINT
        timer = threading.Timer(0.01, _thread.interrupt_main, (signum,))
        timer.daemon = True
        timer.start()
        return
    previous_hook(unraisable)


def _put_back_set_aside() -> None:
    """A run that replaced an old one (--overwrite) did not complete: the old one returns, the unfinished goes."""

    restored = restore_set_aside()
    if restored:
        err_console.print(f"the previous content of {', '.join(map(str, restored))} was put back (the unfinished "
                          "new run is removed)")


def handle_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turn :class:`RlftError` into ``Error: <message>`` on stderr and exit code 2, or 1 for a
    :class:`FaultError` (no traceback); SIGINT and
    SIGTERM into a one-line note and exit code 130 / 143 after the cleanups have run."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        # the values of its secret-named options and environment variables (OPENAI_API_KEY, which a server may echo
        # in a 401) are masked in all it prints or writes, its error line included
        with known_secrets([*(v for k, v in kwargs.items() if is_secret_name(k)), *environment_secrets()]):
            return _guarded(func, *args, **kwargs)

    return wrapper


def _raise_interrupt_behind(error: BaseException) -> None:
    """Raise the Ctrl-C or SIGTERM ``error`` was raised while handling: torchrl's vmapped losses turn one into a
    RuntimeError about a tensordict (hostile pass 21, F13), which is the interrupt, not a fault to print whole."""
    seen: set[int] = set()
    exc: BaseException | None = error
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt) and exc is not error:
            raise exc from None
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__


def _guarded(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """:func:`handle_errors`' body."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminate) if main else None
    previous_hook = sys.unraisablehook
    sys.unraisablehook = functools.partial(_redeliver_lost_interrupts, previous_hook)
    try:
        try:
            return func(*args, **kwargs)
        except BaseException as exc:
            _put_back_set_aside()
            _raise_interrupt_behind(exc)
            raise
    except RlftError as exc:
        # the message is data, not markup: "rlft[collect]" must print as written
        err_console.print(f"[bold red]Error:[/] {escape(redact_text(str(exc)))}", markup=True, highlight=False,
                          soft_wrap=True)
        raise typer.Exit(EXIT_FAULT if isinstance(exc, FaultError) else EXIT_USAGE) from exc
    except OSError as exc:  # not an RlftError: a file-system fault nothing nearer turned into one line
        if exc.errno not in SYSTEM_FAULTS:
            raise
        err_console.print(f"[bold red]Error:[/] {escape(redact_text(system_fault(exc)))}", markup=True,
                          highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_FAULT if exc.errno in MACHINE_FAULTS else EXIT_USAGE) from exc
    except RecursionError as exc:  # a JSON or YAML file nested thousands deep (a damaged or hostile file)
        err_console.print("[bold red]Error:[/] an input file or setting is nested too deeply to read (Python's "
                          "recursion limit); nothing was written. Check the JSON/YAML files this command reads.",
                          markup=True, highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_USAGE) from exc
    except ValueError as exc:  # Python's bound on a number's digits (4,300), met in a JSON or YAML file rlft reads
        if "integer string conversion" not in str(exc):
            raise
        err_console.print("[bold red]Error:[/] an input file holds a number of more than 4,300 digits, which no rlft "
                          "file holds (a damaged or hostile file); nothing was written. Check the JSON/YAML files "
                          "this command reads.", markup=True, highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_USAGE) from exc
    except KeyboardInterrupt as exc:
        err_console.print(
            f"[bold red]{'Terminated' if isinstance(exc, Terminated) else 'Interrupted'}:[/] dataset folders "
            "and reports are written atomically, so none was left half-written; a training run keeps its "
            "checkpoints for --resume, and one that replaced an old run with --overwrite gave it back."
        )
        raise typer.Exit(143 if isinstance(exc, Terminated) else 130) from exc
    finally:
        release_outputs()
        sys.unraisablehook = previous_hook
        if main:
            signal.signal(signal.SIGTERM, previous)


def given_on_command_line(ctx) -> list:
    """The parameters of a parsed click context whose values were typed on the command line (not defaults)."""
    return [p for p in ctx.command.params if getattr(ctx.get_parameter_source(p.name), "name", "") == "COMMANDLINE"]


def command(app: typer.Typer, name: str | None = None, **kwargs: Any):
    """``@command(app, "name")``: register a Typer command with :func:`handle_errors` applied."""

    def decorator(func: Callable[..., Any]) -> Callable[..., Any]:
        app.command(name, **kwargs)(handle_errors(func))
        return func

    return decorator
