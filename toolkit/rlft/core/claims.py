"""Who may write an output, and what happens to the content it replaces: one writer per output (a lock file
beside it holds the writer's pid; a lock of a killed process is taken over), and a folder replaced by a long job
(a training run) whose old content waits aside until the new one completes, is put back when it does not, and is
recovered on the next command when the process was killed."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import stat
import tempfile
import time
import uuid
from pathlib import Path

from rlft.core.console import err_console
from rlft.core.errors import OutputError
from rlft.core.faults import output_error, signals_held
from rlft.core.manifest import unlisted_files

# -- a folder replaced by a long job (a training run): the old content waits aside until the new one completes ----
_ASIDE: dict[Path, Path] = {}


def set_aside(out: str | os.PathLike) -> Path | None:
    """Move a non-empty ``out`` to a hidden sibling and make ``out`` empty: :func:`release_aside` drops the old
    content once the new one is complete, :func:`restore_set_aside` (also run at exit) puts it back otherwise."""
    out = Path(out).absolute()
    if not out.is_dir() or not any(out.iterdir()):
        return None
    try:
        aside = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
        (aside / OWNER_FILE).write_text(f"{os.getpid()}\n", encoding="utf-8")
        os.replace(out, aside / "content")
        out.mkdir()
    except OSError as exc:
        raise output_error(out, exc) from exc
    if not _ASIDE:
        atexit.register(restore_set_aside)
    _ASIDE[out] = aside
    return aside


OWNER_FILE = "owner"  # beside the content set aside: the pid of the process replacing it


def _owner_alive(aside: Path) -> bool:
    try:
        pid = int((aside / OWNER_FILE).read_text(encoding="utf-8").strip() or 0)
    except (OSError, ValueError):
        return False
    return pid != os.getpid() and pid_alive(pid)


def recover_set_aside(out: str | os.PathLike) -> Path | None:
    """An old ``out`` set aside by a process that is gone (killed with SIGKILL, or the machine went down, before its
    new content completed and before its exit handlers could put the old back) is put back at ``out``; the unfinished
    new content, if any, is kept beside it as ``.NAME.unfinished-*`` and named, never deleted. Returns the aside
    folder it came from, or None."""
    out = Path(out).absolute()
    aside = _orphaned_aside(out)
    if aside is None:
        return None
    if unlisted_files(out) == []:
        # the new content is whole (its manifest, written last, lists every file unchanged): the process was killed
        # while deleting the old content it replaced, as asked; what is left of that goes (hostile pass 14, B14)
        shutil.rmtree(aside, ignore_errors=True)
        err_console.print(f"[yellow]Note:[/] removed {aside.name}, what was left of the content an earlier --overwrite "
                          f"of {out} replaced (its process was stopped after the new content was complete)",
                          highlight=False, soft_wrap=True)
        return None
    kept = None
    with signals_held():
        if out.exists():
            kept = Path(tempfile.mkdtemp(prefix=f".{out.name}.unfinished-", dir=out.parent))
            os.replace(out, kept / "content")
        os.replace(aside / "content", out)
    shutil.rmtree(aside, ignore_errors=True)
    err_console.print(f"[yellow]Note:[/] an earlier --overwrite of {out} was stopped before its new content was "
                      f"complete (its process is gone): the previous content is back at {out}"
                      + (f"; the unfinished one is kept at {kept / 'content'}" if kept else ""),
                      highlight=False, soft_wrap=True)
    return aside


def kept_aside(out: str | os.PathLike) -> Path | None:
    """The previous content of ``out`` that a killed ``--overwrite`` left set aside (what :func:`recover_set_aside`
    puts back when rlft next writes ``out``), for a reader of ``out`` to name; None when there is none."""
    aside = _orphaned_aside(Path(out).absolute())
    return aside / "content" if aside is not None else None


def _orphaned_aside(out: Path) -> Path | None:
    """The first ``.NAME.old-*`` beside ``out`` holding content whose process is gone (not this one's own)."""
    if not out.parent.is_dir():
        return None
    for aside in sorted(out.parent.glob(f".{out.name}.old-*")):
        if (aside / "content").is_dir() and not _owner_alive(aside) and aside not in _ASIDE.values():
            return aside
    return None


def release_aside(out: str | os.PathLike) -> None:
    """The new ``out`` is complete: delete the old content set aside for it."""
    aside = _ASIDE.pop(Path(out).absolute(), None)
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)


def restore_set_aside() -> list[Path]:
    """Put back every old folder whose replacement did not complete (an error, Ctrl-C, SIGTERM); the unfinished
    new content is removed. Returns the folders restored."""
    restored = []
    for out, aside in list(_ASIDE.items()):
        with signals_held():
            shutil.rmtree(out, ignore_errors=True)
            os.replace(aside / "content", out)
        with contextlib.suppress(OSError):
            (aside / OWNER_FILE).unlink()
            aside.rmdir()
        del _ASIDE[out]
        restored.append(out)
    return restored


def replaced_mode(path: Path) -> int:
    """The permissions a file written at ``path`` gets: those of the file it replaces (a file the user made private
    stays private: hostile passes 14 and 15), else the usual ones (0666 less the umask)."""
    if path.is_file():
        return path.stat().st_mode & 0o7777
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def usual_modes(folder: Path) -> None:
    """A file a library wrote through a private temporary file (transformers' model.safetensors: 0600) gets the
    usual permissions of its folder's other files, 0666 less the umask (hostile pass 16, U5: the weights were the
    one file a shared group could not read)."""
    usual = replaced_mode(folder / "\0")  # no such file: the umask's mode
    with contextlib.suppress(OSError):
        for path in folder.rglob("*"):
            if path.is_file() and not path.is_symlink() and path.stat().st_mode & 0o7777 == 0o600 != usual:
                path.chmod(usual)


def keep_modes(old: Path, new: Path) -> None:
    """Give a folder about to replace ``old`` the permissions of ``old``, and each of its files those of the file of
    the same name in ``old``: --overwrite replaces the content, not who may read it."""
    with contextlib.suppress(OSError):
        new.chmod(old.stat().st_mode & 0o7777)
        for path in new.rglob("*"):
            before = old / path.relative_to(new)
            if path.is_file() and not path.is_symlink() and before.is_file():
                path.chmod(before.stat().st_mode & 0o7777)


# -- one writer per output: a lock file beside it holds the writer's pid -------------------------------------------
_LOCKS: set[Path] = set()
_MADE: dict[Path, list[Path]] = {}  # lock -> the folders made for it, deepest first


def _lock_path(out: Path, option: str = "--out") -> Path:
    """The lock of ``out`` lies beside it (its parent is made first): every process that writes ``out`` sees the same
    file, whatever its ``TMPDIR`` (batch schedulers give each job its own)."""
    out = out.resolve()
    missing = [p for p in (out.parent, *out.parent.parents) if not p.exists()]
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise output_error(out, exc, option) from exc
    lock = out.parent / f".{out.name}.rlft-lock"
    if missing:  # made for the lock: removed again if they are still empty when it is released (a refused command)
        _MADE[lock] = missing
    return lock


def _is_rlft(pid: int) -> bool:
    """A live ``pid`` that runs rlft: the ``rlft`` command (its program or script), ``-m rlft.cli.main`` (accelerate
    launch), or pytest running it in-process; not any program whose arguments mention rlft (``vim rlft-notes.md``
    holding a dead writer's pid kept its output locked for good). Where /proc cannot say (not Linux), any live
    process counts."""
    try:
        args = [a for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
    except OSError:
        return pid_alive(pid)
    programs = {os.path.basename(a) for a in args[:3]}  # the interpreter, the script (or -m) and the module
    return bool(programs & {b"rlft", b"pytest", b"py.test"}) or any(a.startswith(b"rlft.cli") for a in args)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (another user's counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def claim_output(out: str | os.PathLike, option: str = "--out") -> None:
    """Refuse ``out`` while another live process writes it; a lock left by a killed process is taken over. The
    lock is released by :func:`release_outputs` (when the command ends) or at exit."""
    out = Path(out).absolute()
    lock = _lock_path(out, option)
    if lock in _LOCKS:
        return
    for _ in range(3):
        try:
            if _create_lock(lock):
                if not _LOCKS:
                    atexit.register(release_outputs)
                _LOCKS.add(lock)
                return
        except OSError as exc:
            raise output_error(out, exc, option) from exc
        held = _lock_holder(lock)
        if held is not None:
            raise OutputError(f"{option} {out} is being written by another rlft process"
                              + (f" (pid {held})" if held > 0 else ""),
                              hint=f"wait for it, or choose another {option} (its lock: {lock})") from None
        _take_over_stale(lock)
    raise OutputError(f"{option} {out}: its lock {lock} could not be taken", hint="remove it if no rlft runs")


LOCK_WRITE_GRACE_S = 10.0  # a lock with no pid yet, younger than this, is one being made (an older rlft's way)


def _create_lock(lock: Path) -> bool:
    """Make ``lock`` holding this process's pid, or return False if it exists. The pid is written to a file of its
    own first and linked into place, so no other writer ever reads the lock empty and takes it for stale
    (hostile pass 14, B13: two writers both won in that window)."""
    tmp = _helper_name(lock, "new")
    # made new, never through a link: a user's file (or a link) of that name beside the output is not written over
    fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(f"{os.getpid()}\n")
    try:
        os.link(tmp, lock)
        return True
    except FileExistsError:
        return False
    except OSError:  # a file system without hard links: create-exclusive, then write (the older way)
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()}\n")
        return True
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _helper_name(lock: Path, kind: str) -> Path:
    """A lock's helper file beside it, named by this process and a random part (hostile pass 16, U3: a name made of
    the pid alone could be a user's file); short, as the output's own name may be near the limit."""
    return lock.with_name(f".rlft-lock-{os.getpid()}-{uuid.uuid4().hex[:8]}.{kind}")


MAX_PID = 4_194_304  # Linux's largest pid_max: a larger number in a lock is no process (and overflows os.kill)


def _read_lock(lock: Path) -> str | None:
    """The lock's text; a lock that is not a regular file (a FIFO would block the read for good, a folder) is not
    rlft's: refused by name, never read or removed (hostile pass 15, B15)."""
    try:
        regular = stat.S_ISREG(lock.lstat().st_mode)
    except OSError:
        return None
    if not regular:
        raise OutputError(f"{lock} is not a lock file rlft writes (it is not a regular file)",
                          hint="remove it if no rlft runs, then run the command again")
    try:
        return lock.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def _lock_holder(lock: Path) -> int | None:
    """The pid of the live rlft process holding ``lock`` (0 when its pid is still being written), None if stale."""
    text = _read_lock(lock)
    if text == "":
        with contextlib.suppress(OSError):
            if 0 <= time.time() - lock.stat().st_mtime < LOCK_WRITE_GRACE_S:  # a future stamp is no fresh lock
                return 0
        return None
    try:
        pid = int(text or 0)
    except ValueError:
        return None
    return pid if 0 < pid <= MAX_PID and pid != os.getpid() and pid_alive(pid) and _is_rlft(pid) else None


def _take_over_stale(lock: Path) -> None:
    """Remove a stale ``lock`` (its process is gone, or the pid now belongs to another program). It is renamed away
    first and checked there: if another writer replaced it with its own live lock in the meantime, that one is put
    back, so the next try refuses instead of two writers winning."""
    aside = _helper_name(lock, "stale")
    try:
        os.replace(lock, aside)
    except OSError:
        return  # gone already: the next try creates it
    if _lock_holder(aside) is not None:
        with contextlib.suppress(OSError):
            os.link(aside, lock)  # a live writer's, taken by mistake: back in place (unless a third made one)
    with contextlib.suppress(OSError):
        aside.unlink()


def release_output(out: str | os.PathLike) -> None:
    """Drop this process's lock of ``out`` (its output is in place, or given up): nothing of rlft's is left beside it
    once it is written."""
    lock = Path(out).absolute().resolve().parent / f".{Path(out).name}.rlft-lock"
    if lock in _LOCKS:
        _drop_lock(lock)


def release_outputs() -> None:
    """Drop every output lock this process holds."""
    for lock in list(_LOCKS):
        _drop_lock(lock)


def _drop_lock(lock: Path) -> None:
    with contextlib.suppress(OSError):
        lock.unlink()
    _LOCKS.discard(lock)
    for folder in _MADE.pop(lock, []):  # deepest first; a folder the output (or anyone) wrote into stays
        try:
            folder.rmdir()
        except OSError:
            break
