"""An output's name checked before any work: UTF-8, not a link to nothing, a parent that can be written, and room for
the siblings rlft writes beside it (temporary folder, the old content set aside, the lock)."""

from __future__ import annotations

import os
from pathlib import Path

from rlft.core.errors import OutputError, OutputExistsError

# ".NAME.unfinished-XXXXXXXX": the longest name rlft gives a sibling of an output (temp, aside, lock), less NAME
SIBLING_ROOM = 24


def check_output_name(path: str | os.PathLike, option: str = "--out") -> None:
    """A name that is not UTF-8 (bytes the shell passed through as they were) is refused before any work: Arrow,
    safetensors and the JSON and TensorBoard writers cannot name such a file, and failed half-way through. So is a
    name holding a control character, and a link that leads nowhere (training failed on it in a traceback; other
    commands gave a false reason)."""
    try:
        os.fspath(path).encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(path).decode("utf-8", "backslashreplace")
        raise OutputError(f"cannot write {option} {shown}: the name is not valid UTF-8, and the files rlft writes "
                          "(Parquet, safetensors, JSON) cannot be given it", hint="choose a name in UTF-8") from None
    name = os.fspath(path)
    if any(ord(c) < 32 or ord(c) == 127 for c in name):  # a newline or a terminal escape: every listing is garbled
        raise OutputError(f"cannot write {option} {name!r}: the name holds a control character (a newline, a tab, "
                          "a terminal escape)", hint="choose a name without control characters")
    if os.path.islink(path) and not os.path.exists(path):  # rlft never writes through a link, nor replaces one
        raise OutputExistsError(f"{option} {path} is a symbolic link to {os.readlink(path)}, which does not exist",
                                hint="remove the link, or choose another path")


def check_output_parent(path: str | os.PathLike, option: str = "--out") -> None:
    """The nearest existing ancestor of ``path`` must be a folder we may write into, and every name still to be made
    short enough for the file system (the last one with room for rlft's siblings): said before any work is done,
    not when the finished output is moved into place."""
    check_output_name(path, option)
    path = Path(path)
    for parent in path.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise OutputError(f"cannot write {option} {path}: {parent} is a file, not a folder",
                                  hint="choose another path")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise OutputError(f"cannot write {option} {path}: no permission to write in {parent}",
                                  hint="choose another path")
            _check_name_lengths(path, parent, option)
            return


def _check_name_lengths(path: Path, parent: Path, option: str) -> None:
    try:
        name_max = os.pathconf(parent, "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = 255
    parts = path.absolute().relative_to(parent).parts
    for i, part in enumerate(parts):
        room = name_max - (SIBLING_ROOM if i == len(parts) - 1 else 0)
        if len(os.fsencode(part)) > room:
            raise OutputError(f"cannot write {option} {path}: the name {part[:24]}... is {len(os.fsencode(part))} "
                              f"bytes, the most this file system allows rlft there is {room}",
                              hint="choose a shorter name")
