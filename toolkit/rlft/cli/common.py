"""Shared CLI plumbing: one-line errors with exit code 2, interrupted runs that say nothing was written."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import typer

from rlft.core.errors import RlftError

EXIT_USAGE = 2


def handle_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turn :class:`RlftError` into ``Error: <message>`` on stderr and exit code 2 (no traceback)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from rlft.core.console import err_console

        try:
            return func(*args, **kwargs)
        except RlftError as exc:
            err_console.print(f"[bold red]Error:[/] {exc}", markup=True, highlight=False, soft_wrap=True)
            raise typer.Exit(EXIT_USAGE) from exc
        except KeyboardInterrupt as exc:
            err_console.print(
                "[bold red]Interrupted:[/] dataset folders and reports are written atomically, so none was left "
                "half-written; a training run keeps its checkpoints for --resume."
            )
            raise typer.Exit(130) from exc

    return wrapper


def command(app: typer.Typer, name: str | None = None, **kwargs: Any):
    """``@command(app, "name")``: register a Typer command with :func:`handle_errors` applied."""

    def decorator(func: Callable[..., Any]) -> Callable[..., Any]:
        app.command(name, **kwargs)(handle_errors(func))
        return func

    return decorator
