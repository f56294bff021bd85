"""Atomic output folders: a run either leaves a complete folder at ``out`` or leaves ``out`` untouched."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from rlft.core.errors import OutputExistsError


def check_output_dir(out: str | os.PathLike, overwrite: bool) -> Path:
    """Refuse an ``out`` that exists and is not an empty folder, unless ``overwrite`` is set."""
    out = Path(out)
    if out.exists():
        if not out.is_dir():
            raise OutputExistsError(f"--out {out} exists and is not a folder", hint="choose another path")
        if any(out.iterdir()) and not overwrite:
            raise OutputExistsError(
                f"--out {out} exists and is not empty", hint="pass --overwrite to replace it, or choose another path"
            )
    return out


@contextlib.contextmanager
def atomic_output_dir(out: str | os.PathLike, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary sibling folder; on success it replaces ``out`` in one rename.

    On any exception the temporary folder is removed and ``out`` (old content included) is left as it was,
    so an interrupted run never leaves a half-written dataset where a good one was.
    """
    out = check_output_dir(out, overwrite).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes 0700; the finished folder gets the usual permissions
    try:
        yield tmp
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
            os.replace(out, old / "content")
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write a text file through a temporary file and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; a written file gets the usual permissions
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


def read_yaml_mapping(path: str | os.PathLike, expected: str = "a mapping") -> dict:
    """A YAML file that must hold a mapping, with one clear error for invalid YAML or another shape."""
    import yaml

    from rlft.core.errors import InvalidInputError

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise InvalidInputError(f"{path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise InvalidInputError(f"{path} must hold {expected}")
    return data
