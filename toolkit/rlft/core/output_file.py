"""A single-file output (a report, a CSV, a plot, a policy file): checked before any work, replaced with
``--overwrite`` only when the file there may be rlft's."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from rlft.core.claims import claim_output
from rlft.core.errors import OutputExistsError
from rlft.core.io import Inputs, refuse_overlap
from rlft.core.manifest import read_manifest
from rlft.core.output_names import check_output_name, check_output_parent


def check_output_file(path: str | os.PathLike, overwrite: bool, option: str = "--out", inputs: Inputs = (),
                      ours: Callable[[Path], bool] | None = None) -> Path:
    """Refuse a file output that is or lies inside an input, exists (unless ``overwrite``), is a folder, or cannot be
    made. With ``overwrite``, an existing file is replaced only when it may be rlft's: not a file of another rlft
    output folder (its manifest lists it), and, given ``ours``, one that looks like what this option writes (a
    CSV's header, a PNG's signature...): a user's file passed by mistake stays."""
    check_output_name(path, option)
    refuse_overlap(path, inputs, option)
    claim_output(path, option)
    path = Path(path)
    if path.is_dir():
        raise OutputExistsError(f"{option} {path} is a folder", hint="give a file path")
    if path.exists() and not overwrite:
        raise OutputExistsError(f"{option} {path} already exists", hint="pass --overwrite to replace it")
    if path.exists() or path.is_symlink():
        _refuse_foreign_file(path, option, ours)
    check_output_parent(path, option)
    return path


def _refuse_foreign_file(path: Path, option: str, ours: Callable[[Path], bool] | None) -> None:
    resolved = path.absolute()
    for folder in list(resolved.parents)[:8]:  # an rlft output folder holding it, however deep in it
        listed = read_manifest(folder)
        if listed is not None and resolved.relative_to(folder).as_posix() in listed:
            raise OutputExistsError(f"{option} {path} is a file of the rlft output {folder}",
                                    hint="rlft replaces it only as that whole folder: choose another path")
    if path.is_symlink() or not path.is_file():
        raise OutputExistsError(f"{option} {path} is a link or not a regular file: rlft never replaces it",
                                hint="choose another path")
    if ours is not None and not _safely(ours, path):
        raise OutputExistsError(f"{option} {path} does not look like a file rlft writes there: it is kept",
                                hint="choose another path, or move that file away first")


def _safely(test: Callable[[Path], bool], path: Path) -> bool:
    try:
        return bool(test(path))
    except (OSError, ValueError):  # unreadable or not parseable: not recognisably rlft's
        return False


def is_png(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(8) == b"\x89PNG\r\n\x1a\n"


def is_zip(path: Path) -> bool:
    """A torch checkpoint (``torch.save``: ``NAME/data.pkl`` inside) or an SB3 model (``data`` and
    ``policy.pth``): not any zip archive, which may be a user's."""
    import zipfile

    if not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as archive:
        names = set(archive.namelist())
    return {"data", "policy.pth"} <= names or any(n.endswith("/data.pkl") for n in names)


def is_json_with(*keys: str) -> Callable[[Path], bool]:
    """A JSON object holding ``keys``: a report or metadata file rlft wrote (read only when small)."""

    def test(path: Path) -> bool:
        import json

        if path.stat().st_size > 64 * 1024 * 1024:
            return False
        data = json.loads(path.read_text(encoding="utf-8"))
        return isinstance(data, dict) and all(k in data for k in keys)

    return test


def starts_with(header: str) -> Callable[[Path], bool]:
    """A text file whose first line is ``header`` (a CSV rlft wrote)."""

    def test(path: Path) -> bool:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.readline(len(header) + 2).rstrip("\r\n") == header

    return test
