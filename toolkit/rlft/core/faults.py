"""What an operating-system failure while writing an output means (one line naming the path and the reason, the
machine's faults told from the path's), and the blocks of renames that must happen whole (signals held)."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

from rlft.core.errors import OutputError, WriteFaultError

_REASONS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EROFS: "the file system is read-only",
    errno.ENOTDIR: "a parent of it is a file, not a folder",
    errno.EEXIST: "a parent of it is a file, not a folder",
    errno.ENAMETOOLONG: "the name is too long",
    errno.ELOOP: "a symbolic link in it loops",
    errno.EFBIG: "a file would pass the size limit set for this process (ulimit -f) or the file system's",
}


# whatever file failed, the disk (or the limit set on writing to it) is the problem
DISK_FAULTS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG)


MACHINE_FAULTS = (*DISK_FAULTS, errno.EIO)  # not the path's fault: the machine's (exit code 1)


def as_disk_full(exc: BaseException, *roots: Path, written: Path | None = None) -> OSError | None:
    """A writer that is not Python's file API (safetensors, torch's zip writer) reports a full disk as an error of
    its own: the ENOSPC it stands for, when its message says so or the disk under ``roots`` has no room left; the
    EFBIG it stands for when the file it was ``written`` into stopped at the process's file-size limit."""
    if isinstance(exc, OSError | KeyboardInterrupt | SystemExit):
        return None
    text = str(exc)
    if "File too large" in text or "os error 27" in text or _at_file_limit(written):  # EFBIG (Rust's wording)
        return OSError(errno.EFBIG, f"File too large ({type(exc).__name__}: {text[:120]})")
    if "No space left on device" not in text and not any(_nearly_full(Path(root)) for root in roots):
        return None
    return OSError(errno.ENOSPC, f"No space left on device ({type(exc).__name__}: {text[:120]})")


def _at_file_limit(written: Path | None) -> bool:
    """``written`` is within 1 MiB of the file-size limit set for this process (``ulimit -f``): Python ignores
    SIGXFSZ, so the writer got EFBIG and torch's words it "iostream error" or "unexpected pos" (hostile pass 20, F5)."""
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        return (written is not None and limit != resource.RLIM_INFINITY
                and written.stat().st_size + (1 << 20) >= limit)
    except (ImportError, OSError, ValueError):
        return False


def free_bytes(path: Path) -> int | None:
    """Bytes free for this user on the file system of ``path`` (its nearest existing folder), or None unknown."""
    try:
        probe = next(p for p in (path, *path.parents) if p.exists())
        stat = os.statvfs(probe)
    except (OSError, StopIteration):
        return None
    return stat.f_bavail * stat.f_frsize


def _nearly_full(path: Path) -> bool:
    """Under 1 MiB free on the file system of ``path``."""
    free = free_bytes(path)
    return free is not None and free < (1 << 20)


def output_error(path: str | os.PathLike, exc: OSError, option: str = "--out") -> OutputError:
    """``exc`` (raised while creating or writing ``path``) as one line that says what went wrong."""
    reason = _REASONS.get(exc.errno or -1, exc.strerror or str(exc))
    kind = WriteFaultError if exc.errno in MACHINE_FAULTS else OutputError  # exit code 1 / 2
    return kind(f"cannot write {option} {path}: {reason}", hint="nothing was written there")


def is_output_fault(exc: OSError, *roots: Path) -> bool:
    """An OSError that concerns writing under ``roots`` (or the disk itself), not reading some input."""
    if exc.errno in DISK_FAULTS:
        return True
    names = [n for n in (exc.filename, getattr(exc, "filename2", None)) if n]
    return any(str(Path(n).absolute()).startswith(str(root.absolute())) for n in names for root in roots)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM arriving inside are held and acted on when the block has finished.

    Python raises ``KeyboardInterrupt`` between any two bytecodes, so a step of several renames needs this to
    happen whole. A held signal goes to the handler that was in place (the ``rlft`` command's raise
    ``Terminated``/``KeyboardInterrupt``; the default one ends the process); a block that raises keeps its own
    error. Signal handlers can only be set in the main thread: elsewhere the block runs as is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[tuple[int, object]] = []
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, lambda signum, frame: held.append((signum, frame)))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
    if held:
        signum, frame = held[0]
        handler = previous[signum]
        if callable(handler):
            handler(signum, frame)
        elif handler != signal.SIG_IGN:
            signal.raise_signal(signum)
