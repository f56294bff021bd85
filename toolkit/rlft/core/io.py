"""Writing outputs safely: a run either leaves complete outputs or leaves the old ones untouched, and a
filesystem fault (a parent that is a file, no permission, a full disk) is one clear error naming the path.

Outputs are checked before any work (:func:`check_output_dir`, :func:`check_output_file`) and written through a
temporary sibling renamed at the end (:func:`atomic_output_dir`, :func:`atomic_write_text`); an ``OSError`` while
writing becomes an :class:`~rlft.core.errors.OutputError` and the temporary is removed.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

from rlft.core.claims import (
    claim_output,
    keep_modes,
    kept_aside,
    pid_alive,
    recover_set_aside,
    release_output,
    replaced_mode,
    usual_modes,
)
from rlft.core.console import err_console
from rlft.core.errors import InvalidInputError, OutputError, OutputExistsError
from rlft.core.faults import as_disk_full, is_output_fault, output_error, signals_held
from rlft.core.manifest import (
    MANIFEST,
    RUN_FILE,
    never_replaced,
    output_holding,
    unfinished_run_foreign,
    unlisted_files,
    write_manifest,
)
from rlft.core.output_names import check_output_name, check_output_parent

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


# Files rlft writes at the top of every output folder it makes (a folder without a manifest that holds one of them
# is an rlft output of an earlier version, or a user's copy: named in the refusal, not replaced).
RLFT_MARKERS = ("rlft_codec.json", RUN_FILE, "rlft_info.json", "rlft_model.json", "rlft_offline.json",
                "rlft_online.json")
# `RLFT_REPLACE_FOREIGN=1`: --overwrite may replace a folder rlft cannot vouch for (the user's explicit choice).
REPLACE_FOREIGN_ENV = "RLFT_REPLACE_FOREIGN"


def refuse_never_replaced(out: str | os.PathLike, option: str = "--out") -> None:
    """The root, a folder directly under it, the current folder, a home folder or a parent of one is never an
    output, empty or not (:func:`rlft.core.manifest.never_replaced`)."""
    what = never_replaced(Path(out).absolute().resolve())
    if what is not None:
        raise OutputExistsError(f"{option} {out} is {what}: rlft never replaces it",
                                hint=f"give {option} a new folder for this output")


def refuse_foreign(out: str | os.PathLike, option: str = "--out") -> None:
    """``--overwrite`` replaces only what rlft wrote (:mod:`rlft.core.manifest`): never the root, a folder directly
    under it, the current folder, a home folder or a parent of one; a non-empty folder only when its manifest lists
    every file in it, or it is a training run that never completed holding only its trainer's files. Anything else
    needs ``RLFT_REPLACE_FOREIGN=1``."""
    path = Path(out).absolute()  # as written: the writers do not expand "~" either (a quoted ~ is a folder named ~)
    refuse_never_replaced(out, option)
    holder = output_holding(path)  # a dataset's data/: replaced only as the whole output, whatever is set
    if holder is not None:
        raise OutputExistsError(f"{option} {path} is a folder of the rlft output {holder}",
                                hint=f"rlft replaces it only as that whole folder: choose another {option}")
    if not path.is_dir() or not any(path.iterdir()) or os.environ.get(REPLACE_FOREIGN_ENV) == "1":
        return
    foreign, unfinished = unlisted_files(path), unfinished_run_foreign(path)
    if foreign is None:
        foreign = unfinished
    elif unfinished is not None:  # a resumed run that was stopped: its trainer's files changed, the user's count
        foreign = [f for f in foreign if f in unfinished]
    if foreign is None:
        names = sorted(p.name for p in path.iterdir())
        made = any((path / marker).is_file() for marker in RLFT_MARKERS)
        why = (f"has no record of the files rlft wrote ({MANIFEST}): an output of an earlier rlft, or a copy"
               if made else f"holds files rlft did not write ({_shown(names)})")
        raise OutputExistsError(f"{option} {out} {why}, so --overwrite will not replace it",
                                hint=f"delete it yourself or choose another {option}; to replace it anyway, set "
                                     f"{REPLACE_FOREIGN_ENV}=1")
    if foreign:
        raise OutputExistsError(f"{option} {out} holds files that are not, or no longer, what rlft wrote there "
                                f"({_shown(foreign)}), so --overwrite will not replace it",
                                hint=f"move them out (a copy of one you edited) or choose another {option}; to "
                                     f"replace it anyway, set "
                                     f"{REPLACE_FOREIGN_ENV}=1")


def refuse_arrival(out: Path, held: bool, option: str = "--out") -> None:
    """Just before a finished output replaces ``out``: what is there now must be what was checked at the start.
    A folder that appeared while the command ran (``held`` False: nothing or an empty folder was there) is kept and
    the new output given up; one that was there is checked again, as files may have been added to it since."""
    if not holds_content(out):
        return
    if not held:
        raise OutputExistsError(f"{option} {out} was filled by someone else while this command ran: it is kept, and "
                                "this command's output is not written", hint=f"run again with another {option}")
    refuse_foreign(out, option)


def holds_content(out: Path) -> bool:
    return out.is_dir() and any(out.iterdir())


def _shown(names: list[str]) -> str:
    """Up to five names for a one-line message; a name holding a newline or a terminal escape is shown quoted."""
    shown = [repr(n) if any(ord(c) < 32 or ord(c) == 127 for c in n) else n for n in names[:5]]
    return ", ".join(shown) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


REPLACED = ".replaced-"  # atomic_output_dir's aside for the old content while the new one is renamed in


def recover_replaced(out: str | os.PathLike) -> None:
    """Old content :func:`atomic_output_dir` moved aside and a kill kept it from deleting: put back when nothing is
    at ``out`` (killed between its two renames), else deleted (the new content was complete and in place)."""
    out = Path(out).absolute()
    if not out.parent.is_dir():
        return
    for aside in sorted(out.parent.glob(f".{out.name}{REPLACED}*")):
        if (aside / "content").is_dir() and not (out.exists() or out.is_symlink()):
            os.replace(aside / "content", out)
            err_console.print(f"[yellow]Note:[/] a replacement of {out} was killed between its two renames: the "
                              "previous content is back", highlight=False, soft_wrap=True)
        shutil.rmtree(aside, ignore_errors=True)


def kept_content(out: str | os.PathLike) -> Path | None:
    """Where the previous content of ``out`` waits after a killed ``--overwrite`` (a training run's set aside, or a
    folder killed between :func:`atomic_output_dir`'s two renames), for a reader of ``out`` to name; None when it
    is not waiting (the next rlft command that writes ``out`` puts it back)."""
    out = Path(out).absolute()
    if out.exists() or not out.parent.is_dir():
        return kept_aside(out)
    replaced = [a / "content" for a in sorted(out.parent.glob(f".{out.name}{REPLACED}*")) if (a / "content").is_dir()]
    return replaced[0] if replaced else kept_aside(out)


def check_output_dir(out: str | os.PathLike, overwrite: bool, option: str = "--out", inputs: Inputs = ()) -> Path:
    """Refuse an ``out`` that is, contains or lies inside an input (:func:`refuse_overlap`), that exists and is not an
    empty folder (unless ``overwrite``, and then only a folder rlft wrote: :func:`refuse_foreign`), or that cannot be
    made. A replacement of ``out`` killed before it completed is undone first (:func:`recover_set_aside`)."""
    check_output_name(out, option)
    refuse_overlap(out, inputs, option)
    claim_output(out, option)
    recover_set_aside(out)
    recover_replaced(out)
    out = Path(out)
    if out.exists():
        refuse_never_replaced(out, option)  # even empty: a shell standing in the current folder would be left behind
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


def leftovers(out: Path) -> list[Path]:
    """Temporary siblings of ``out`` that a killed run (SIGKILL, power loss) could not remove."""
    if not out.parent.is_dir():
        return []
    return sorted(p for pattern in (f".{out.name}.tmp-*", f".{out.name}.old-*", f".{out.name}.unfinished-*")
                  for p in out.parent.glob(pattern))


def warn_leftovers(out: Path) -> None:
    """Remove the temporary folders of this output whose writer is gone (their name carries its pid: a killed
    serialize left GBs of half datasets), and name the rest (a live process may own one, so they are kept)."""
    pattern = re.compile(rf"\.{re.escape(out.name)}\.tmp-(\d+)-[0-9a-f]{{12}}")
    for stale in [p for p in leftovers(out) if (m := pattern.fullmatch(p.name)) and not pid_alive(int(m[1]))]:
        shutil.rmtree(stale, ignore_errors=True)
        err_console.print(f"[yellow]Note:[/] removed {stale.name}, the unfinished output of an rlft run that was "
                          "killed", highlight=False, soft_wrap=True)
    found = leftovers(out)
    if found:
        err_console.print(f"[yellow]Warning:[/] {len(found)} temporary folder(s) of an interrupted run beside "
                          f"{out}: {', '.join(p.name for p in found)}; remove them if no other run is writing "
                          "there.", highlight=False, soft_wrap=True)


def temp_name(parent: Path, prefix: str) -> Path:
    """A fresh name for a temporary folder in ``parent``, not yet made: the caller makes it inside the block that
    removes it, so an interrupt, however early, never leaves one behind (``mkdtemp`` returns it already made)."""
    return parent / f"{prefix}{uuid.uuid4().hex[:12]}"


def _swap_in(tmp: Path, out: Path, held: bool) -> None:
    """``tmp`` renamed to ``out``; an old ``out`` moved aside first and deleted once the new one is in place."""
    old: Path | None = None
    swapped = False
    try:
        with signals_held():  # Ctrl-C between the two renames would leave no folder at ``out``
            refuse_arrival(out, held)
            usual_modes(tmp)
            if out.exists():  # not ".old-": recover_set_aside would bring a replaced folder back
                keep_modes(out, tmp)
                old = Path(tempfile.mkdtemp(prefix=f".{out.name}{REPLACED}", dir=out.parent))
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


@contextlib.contextmanager
def atomic_output_dir(out: str | os.PathLike, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary sibling folder; on success it replaces ``out`` in one rename.

    On any exception the temporary folder is removed and ``out`` (old content included) is left as it was,
    so an interrupted run never leaves a half-written dataset where a good one was.
    """
    out = check_output_dir(out, overwrite).resolve()
    held = holds_content(out)  # what the checks saw; refuse_arrival holds the end to it
    warn_leftovers(out)
    tmp = temp_name(out.parent, f".{out.name}.tmp-{os.getpid()}-")  # the pid: a later run removes it if we die
    try:
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp.mkdir()  # the usual permissions, which the finished folder keeps
        except OSError as exc:
            raise output_error(out, exc) from exc
        yield tmp
        write_manifest(tmp)  # last: the list of what rlft wrote, so a later --overwrite replaces nothing else
        _swap_in(tmp, out, held)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OutputError) and str(tmp) in exc.message:  # a file of it: named where it was to be
            exc.message = exc.message.replace(str(tmp), str(out))
            exc.args = (exc.message,)
        if isinstance(exc, OutputError) or not is_output_fault(exc, tmp, out):
            raise
        raise output_error(out, exc) from exc
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        disk = as_disk_full(exc, out)
        if disk is not None:
            raise output_error(out, disk) from exc
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
        os.chmod(tmp, replaced_mode(path))
        os.replace(tmp, path)
    except OSError as exc:
        raise output_error(path, exc, option) from exc
    except RuntimeError as exc:  # torch's writer words a full disk or a file-size limit as an error of its own
        fault = as_disk_full(exc, path.parent, written=tmp)
        if fault is None:
            raise
        raise output_error(path, fault, option) from exc
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
        os.chmod(tmp, replaced_mode(path))  # mkstemp makes 0600
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
        os.chmod(tmp, replaced_mode(path))
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
