"""Writing outputs safely: a run either leaves complete outputs or leaves the old ones untouched, and a
filesystem fault (a parent that is a file, no permission, a full disk) is one clear error naming the path.

Outputs are checked before any work (:func:`check_output_dir`, :func:`check_output_file`) and written through a
temporary sibling renamed at the end (:func:`atomic_output_dir`, :func:`atomic_write_text`); an ``OSError`` while
writing becomes an :class:`~rlft.core.errors.OutputError` and the temporary is removed.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from rlft.core.console import err_console
from rlft.core.errors import InvalidInputError, OutputError, OutputExistsError, WriteFaultError

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
}


DISK_FAULTS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)  # whatever file failed, the disk itself is the problem
MACHINE_FAULTS = (*DISK_FAULTS, errno.EIO)  # not the path's fault: the machine's (exit code 1)


def output_error(path: str | os.PathLike, exc: OSError, option: str = "--out") -> OutputError:
    """``exc`` (raised while creating or writing ``path``) as one line that says what went wrong."""
    reason = _REASONS.get(exc.errno or -1, exc.strerror or str(exc))
    kind = WriteFaultError if exc.errno in MACHINE_FAULTS else OutputError  # exit code 1 / 2
    return kind(f"cannot write {option} {path}: {reason}", hint="nothing was written there")


def check_output_parent(path: str | os.PathLike, option: str = "--out") -> None:
    """The nearest existing ancestor of ``path`` must be a folder we may write into."""
    path = Path(path)
    for parent in path.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise OutputError(f"cannot write {option} {path}: {parent} is a file, not a folder",
                                  hint="choose another path")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise OutputError(f"cannot write {option} {path}: no permission to write in {parent}",
                                  hint="choose another path")
            return


Inputs = Iterable[tuple[str, "str | os.PathLike | None"]]


def _resolved(path: str | os.PathLike, option: str) -> Path:
    """``path`` made absolute with its links followed; a link loop or a name too long is one line."""
    try:
        return Path(path).expanduser().absolute().resolve()
    except RuntimeError as exc:  # Python 3.11's resolve() on a symlink loop
        raise OutputError(f"cannot write {option} {path}: a symbolic link in it loops") from exc
    except OSError as exc:
        raise output_error(path, exc, option) from exc


def refuse_overlap(out: str | os.PathLike, inputs: Inputs, option: str = "--out") -> None:
    """Refuse an output that is, contains or lies inside one of the command's ``inputs`` ((option, path) pairs;
    paths that are not local files or folders, such as Hub ids, are skipped): writing there, with ``--overwrite``
    above all, would destroy or alter what the command reads."""
    target = _resolved(out, option)
    for name, path in inputs:
        if path is None or not Path(path).expanduser().exists():
            continue
        source = Path(path).expanduser().absolute().resolve()
        if target == source:
            relation = "is"
        elif target in source.parents:
            relation = "contains"
        elif source in target.parents:
            relation = "lies inside"
        else:
            continue
        raise InvalidInputError(f"{option} {out} {relation} the input {name} {path}: writing there would destroy it",
                                hint=f"choose an {option} outside every input; nothing was read or written")


# Files rlft writes at the top of every output folder it makes: a folder holding none of them is not rlft's to replace.
RLFT_MARKERS = ("rlft_codec.json", "rlft_run.json", "rlft_info.json", "rlft_model.json", "rlft_offline.json",
                "rlft_online.json")
# `RLFT_REPLACE_FOREIGN=1`: --overwrite may replace a folder without those files (the user's explicit choice).
REPLACE_FOREIGN_ENV = "RLFT_REPLACE_FOREIGN"


def refuse_foreign(out: str | os.PathLike, option: str = "--out") -> None:
    """``--overwrite`` replaces only what rlft wrote: never the current folder, one of its parents or the home folder,
    and no folder that holds none of :data:`RLFT_MARKERS` (unless ``RLFT_REPLACE_FOREIGN=1``)."""
    path = Path(out).expanduser().absolute()
    resolved = path.resolve()
    cwd, home = Path.cwd().resolve(), Path.home().resolve()
    if resolved in (cwd, home, Path(resolved.anchor)) or resolved in cwd.parents:
        what = "the current folder" if resolved == cwd else "the home folder" if resolved == home else \
            "a parent of the current folder"
        raise OutputExistsError(f"{option} {out} is {what}: rlft never replaces it",
                                hint=f"give {option} a new folder for this output")
    if not path.is_dir() or not any(path.iterdir()):
        return
    if any((path / marker).is_file() for marker in RLFT_MARKERS) or os.environ.get(REPLACE_FOREIGN_ENV) == "1":
        return
    names = sorted(p.name for p in path.iterdir())
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    raise OutputExistsError(f"{option} {out} holds files rlft did not write ({shown}), so --overwrite will not "
                            "replace it", hint=f"choose another {option}; to replace it anyway, set "
                                               f"{REPLACE_FOREIGN_ENV}=1")


def check_output_dir(out: str | os.PathLike, overwrite: bool, option: str = "--out", inputs: Inputs = ()) -> Path:
    """Refuse an ``out`` that is, contains or lies inside an input (:func:`refuse_overlap`), that exists and is not an
    empty folder (unless ``overwrite``, and then only a folder rlft wrote: :func:`refuse_foreign`), or that cannot be
    made. A replacement of ``out`` killed before it completed is undone first (:func:`recover_set_aside`)."""
    refuse_overlap(out, inputs, option)
    claim_output(out, option)
    recover_set_aside(out)
    out = Path(out)
    if out.exists():
        if not out.is_dir():
            raise OutputExistsError(f"{option} {out} exists and is not a folder", hint="choose another path")
        if any(out.iterdir()) and not overwrite:
            raise OutputExistsError(
                f"{option} {out} exists and is not empty", hint="pass --overwrite to replace it, or choose another path"
            )
        if overwrite:
            refuse_foreign(out, option)
    check_output_parent(out, option)
    return out


def check_output_file(path: str | os.PathLike, overwrite: bool, option: str = "--out", inputs: Inputs = ()) -> Path:
    """Refuse a file output that is or lies inside an input, exists (unless ``overwrite``), is a folder, or cannot be
    made."""
    refuse_overlap(path, inputs, option)
    claim_output(path, option)
    path = Path(path)
    if path.is_dir():
        raise OutputExistsError(f"{option} {path} is a folder", hint="give a file path")
    if path.exists() and not overwrite:
        raise OutputExistsError(f"{option} {path} already exists", hint="pass --overwrite to replace it")
    check_output_parent(path, option)
    return path


def is_output_fault(exc: OSError, *roots: Path) -> bool:
    """An OSError that concerns writing under ``roots`` (or the disk itself), not reading some input."""
    if exc.errno in DISK_FAULTS:
        return True
    names = [n for n in (exc.filename, getattr(exc, "filename2", None)) if n]
    return any(str(Path(n).absolute()).startswith(str(root.absolute())) for n in names for root in roots)


def leftovers(out: Path) -> list[Path]:
    """Temporary siblings of ``out`` that a killed run (SIGKILL, power loss) could not remove."""
    if not out.parent.is_dir():
        return []
    return sorted(p for pattern in (f".{out.name}.tmp-*", f".{out.name}.old-*", f".{out.name}.unfinished-*")
                  for p in out.parent.glob(pattern))


def warn_leftovers(out: Path) -> None:
    """Name them (another run writing the same folder right now would own one, so nothing is deleted)."""
    found = leftovers(out)
    if found:

        err_console.print(f"[yellow]Warning:[/] {len(found)} temporary folder(s) of an interrupted run beside "
                          f"{out}: {', '.join(p.name for p in found)}; remove them if no other run is writing "
                          "there.", highlight=False, soft_wrap=True)


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


@contextlib.contextmanager
def atomic_output_dir(out: str | os.PathLike, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary sibling folder; on success it replaces ``out`` in one rename.

    On any exception the temporary folder is removed and ``out`` (old content included) is left as it was,
    so an interrupted run never leaves a half-written dataset where a good one was.
    """
    out = check_output_dir(out, overwrite).resolve()
    warn_leftovers(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    except OSError as exc:
        raise output_error(out, exc) from exc
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes 0700; the finished folder gets the usual permissions
    try:
        yield tmp
        old: Path | None = None
        swapped = False
        try:
            with signals_held():  # Ctrl-C between the two renames would leave no folder at ``out``
                if out.exists():
                    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
                    os.replace(out, old / "content")
                    try:
                        os.replace(tmp, out)
                    except OSError:
                        os.replace(old / "content", out)  # the good folder goes back where it was
                        raise
                else:
                    os.replace(tmp, out)
                swapped = True
        finally:  # outside the held block: deleting a large old folder must not hold off Ctrl-C
            if old is not None and swapped:
                shutil.rmtree(old, ignore_errors=True)
            elif old is not None:
                with contextlib.suppress(OSError):
                    old.rmdir()  # empty unless the good folder could not go back: then it stays, and is named
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OutputError) or not is_output_fault(exc, tmp, out):
            raise
        raise output_error(out, exc) from exc
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        release_output(out)


def atomic_write_file(path: str | os.PathLike, write, option: str = "--out", suffix: str = "") -> Path:
    """Write ``path`` by calling ``write(tmp)`` on a temporary sibling (named with ``suffix``, for writers that
    insist on one) and renaming it into place; a write fault is an :class:`OutputError`, the temporary removed."""
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.tmp-{os.getpid()}{suffix or path.suffix}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        raise output_error(path, exc, option) from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return path


def atomic_write_text(path: str | os.PathLike, text: str, option: str = "--out") -> Path:
    """Write a text file through a temporary file and a rename (a write fault: :class:`OutputError`)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as exc:
        raise output_error(path, exc, option) from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; a written file gets the usual permissions
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise output_error(path, exc, option) from exc
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


@contextlib.contextmanager
def staged_text(path: str | os.PathLike | None, text: str, option: str = "--out") -> Iterator[None]:
    """Write ``text`` to a temporary file beside ``path`` now, and move it into place only when the block (which
    writes a command's other outputs) succeeds: the outputs of one command land as a set, or none of them does.
    ``path`` None: nothing to stage."""
    if path is None:
        yield
        return
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
    except OSError as exc:
        if "tmp" in locals():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        raise output_error(path, exc, option) from exc
    try:
        yield
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


MAX_TEXT_FILE_BYTES = 16 * 2**20  # a settings, card or pipeline file larger than this is not one


def read_text_file(path: str | os.PathLike, what: str = "file", limit: int = MAX_TEXT_FILE_BYTES) -> str:
    """A UTF-8 text file's content; one clear error when it is missing, a folder, not a regular file (a FIFO or a
    device would be read forever), larger than ``limit`` bytes, unreadable or binary."""

    path = Path(path)
    if not path.exists():
        raise InvalidInputError(f"{what} {path} does not exist")
    if path.is_dir():
        raise InvalidInputError(f"{what} {path} is a folder, not a file")
    if not path.is_file():
        raise InvalidInputError(f"{what} {path} is not a regular file (a pipe or a device?)")
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
        if len(data) > limit:
            raise InvalidInputError(f"{what} {path} is larger than {limit / 2**20:g} MiB",
                                    hint="give a small text file")
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{what} {path} is not UTF-8 text (a binary file?)") from exc
    except OSError as exc:
        raise InvalidInputError(f"cannot read {what} {path}: {exc.strerror or exc}") from exc


def read_json_mapping(path: str | os.PathLike, what: str = "JSON file") -> dict:
    """A JSON file that must hold an object, with one clear error for anything else."""
    import json


    text = read_text_file(path, what)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{what} {path} is not valid JSON ({exc.msg} at line {exc.lineno})") from exc
    if not isinstance(data, dict):
        raise InvalidInputError(f"{what} {path} must hold a JSON object, not a {type(data).__name__}")
    return data


def read_yaml_mapping(path: str | os.PathLike, expected: str = "a mapping") -> dict:
    """A YAML file that must hold a mapping, with one clear error for invalid YAML or another shape."""
    import yaml


    path = Path(path)
    text = read_text_file(path, "YAML file")
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        if node is not None and _expanded_size(node) > MAX_YAML_NODES:
            raise InvalidInputError(f"{path} holds more than {MAX_YAML_NODES:,} values once its aliases (*name) are "
                                    "expanded", hint="a settings file is small: is an alias repeated on purpose?")
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise InvalidInputError(f"{path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise InvalidInputError(f"{path} must hold {expected}")
    return data


MAX_YAML_NODES = 100_000  # values of a YAML file with every alias expanded (a "billion laughs" file has 10^9)


def _expanded_size(node, memo: dict | None = None) -> int:
    """How many values ``node`` holds with aliases expanded (an alias repeats a node object: each distinct node's
    count is computed once, so a file whose expansion is huge is measured in its own size), stopping past the cap."""
    import yaml

    memo = {} if memo is None else memo
    key = id(node)
    if key in memo:
        return memo[key]
    memo[key] = 1  # a node reached again while counting itself (recursive alias) counts once
    size = 1
    if isinstance(node, yaml.SequenceNode):
        children = node.value
    elif isinstance(node, yaml.MappingNode):
        children = [part for pair in node.value for part in pair]
    else:
        children = []
    for child in children:
        size += _expanded_size(child, memo)
        if size > MAX_YAML_NODES:
            break
    memo[key] = size
    return size


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
    return pid != os.getpid() and _alive(pid)


def recover_set_aside(out: str | os.PathLike) -> Path | None:
    """An old ``out`` set aside by a process that is gone (killed with SIGKILL, or the machine went down, before its
    new content completed and before its exit handlers could put the old back) is put back at ``out``; the unfinished
    new content, if any, is kept beside it as ``.NAME.unfinished-*`` and named, never deleted. Returns the aside
    folder it came from, or None."""
    out = Path(out).absolute()
    if not out.parent.is_dir():
        return None
    for aside in sorted(out.parent.glob(f".{out.name}.old-*")):
        if not (aside / "content").is_dir() or _owner_alive(aside) or aside in _ASIDE.values():
            continue
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


# -- one writer per output: a lock file beside it holds the writer's pid -------------------------------------------
_LOCKS: set[Path] = set()


def _lock_path(out: Path, option: str = "--out") -> Path:
    """The lock of ``out`` lies beside it (its parent is made first): every process that writes ``out`` sees the same
    file, whatever its ``TMPDIR`` (batch schedulers give each job its own)."""
    out = out.resolve()
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise output_error(out, exc, option) from exc
    return out.parent / f".{out.name}.rlft-lock"


def _is_rlft(pid: int) -> bool:
    """A live ``pid`` that runs rlft (its command line names rlft, or pytest running it in-process). Where
    /proc cannot say (not Linux), any live process counts."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return _alive(pid)
    return b"rlft" in cmdline or b"pytest" in cmdline


def _alive(pid: int) -> bool:
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
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                pid = int(lock.read_text(encoding="utf-8").strip() or 0)
            except (OSError, ValueError):
                pid = 0
            if pid and pid != os.getpid() and _alive(pid) and _is_rlft(pid):
                raise OutputError(f"{option} {out} is being written by another rlft process (pid {pid})",
                                  hint=f"wait for it, or choose another {option} (its lock: {lock})") from None
            with contextlib.suppress(OSError):
                lock.unlink()  # stale: its process is gone, or the pid now belongs to another program
            continue
        except OSError as exc:
            raise output_error(out, exc, option) from exc
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()}\n")
        if not _LOCKS:
            atexit.register(release_outputs)
        _LOCKS.add(lock)
        return
    raise OutputError(f"{option} {out}: its lock {lock} could not be taken", hint="remove it if no rlft runs")


def release_output(out: str | os.PathLike) -> None:
    """Drop this process's lock of ``out`` (its output is in place, or given up): nothing of rlft's is left beside it
    once it is written."""
    lock = Path(out).absolute().resolve().parent / f".{Path(out).name}.rlft-lock"
    if lock in _LOCKS:
        with contextlib.suppress(OSError):
            lock.unlink()
        _LOCKS.discard(lock)


def release_outputs() -> None:
    """Drop every output lock this process holds."""
    for lock in list(_LOCKS):
        with contextlib.suppress(OSError):
            lock.unlink()
        _LOCKS.discard(lock)
