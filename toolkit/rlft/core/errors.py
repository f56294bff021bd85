"""Typed errors. The CLI turns every :class:`RlftError` into a one-line message: exit code 2 for a usage error
(the input is wrong: fix the command), 1 for a fault (:class:`FaultError`: the disk, the network, a remote
service failed: the same command may work later)."""

from __future__ import annotations


class RlftError(Exception):
    """An error caused by the user's input or environment, with a hint on what to do."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class InvalidInputError(RlftError, ValueError):
    """A value given on the command line or in a file is not acceptable."""


class OutputExistsError(RlftError, FileExistsError):
    """The output location already holds something that would be overwritten."""


class FaultError(RlftError):
    """Not the input's fault: the machine or a remote failed (exit code 1)."""


class OutputError(RlftError, OSError):
    """An output cannot be written where it was asked for: a parent is a file, no permission (choose another)."""


class WriteFaultError(OutputError, FaultError):
    """An output could not be written because the machine failed: a full disk, a read-only file system, I/O."""


class OfflineError(FaultError, ConnectionError):
    """A remote resource (Hugging Face Hub, Minari remote) could not be reached."""


class RemoteError(FaultError):
    """A remote service answered with an error (an HTTP 401 from the Hub, a 500 from a model server)."""


class MissingDependencyError(RlftError, ImportError):
    """An optional library is needed for this feature."""


def require(module: str, extra: str | None = None, package: str | None = None):
    """Import ``module`` or raise :class:`MissingDependencyError` with the pip command that installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - exercised only when the dependency is absent
        target = f'"rlft[{extra}]"' if extra else (package or module)
        raise MissingDependencyError(
            f"{module} is not installed", hint=f"install it with: pip install {target}"
        ) from exc
