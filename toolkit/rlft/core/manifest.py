"""What rlft wrote in an output folder, so that ``--overwrite`` replaces nothing else. Every folder rlft finishes (a
dataset, a model, a training run, an offline or online run) ends with :data:`MANIFEST`, the list of every file in
it, written last. ``--overwrite`` replaces a folder only when each file in it, at any depth, is on that list and
unchanged since (its size, and for a file of at most :data:`HASHED_BYTES` its SHA-256, as the manifest recorded
them): a user's notes beside a run, a card a user edited before a push, or a copied ``rlft_codec.json`` among a
user's own files, are named and kept. A training run that never completed has no manifest yet; it may be replaced
when every file in it is one its trainer writes (:func:`unfinished_run_foreign`). Some folders are never replaced,
by anyone's flag: the root and the folders directly under it, the current folder and its parents, and every
account's home folder and its parents (an override once let a test replace ``/root`` because ``$HOME`` pointed
elsewhere).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

MANIFEST = ".rlft_manifest.json"
MANIFEST_FORMAT = "rlft-manifest-v1"
MAX_MANIFEST_BYTES = 64 * 1024 * 1024  # a manifest larger than this is not one rlft wrote
HASHED_BYTES = 16 * 1024 * 1024  # files a user edits (cards, JSON) are small: hashed; larger ones by size only
RUN_FILE = "rlft_run.json"  # a training run's record: its status says whether it completed
UNFINISHED = ("running", "failed", "interrupted")
# what a trainer writes into a run before it completes: rlft's run files, the model, tokenizer and adapter files
# transformers/PEFT save, and per checkpoint its optimizer, scheduler, RNG and trainer states; event logs under logs/
_MODEL_FILES = (r"config\.json|generation_config\.json|model(-\d+-of-\d+)?\.safetensors|model\.safetensors\.index\.json"
                r"|adapter_config\.json|adapter_model\.safetensors|tokenizer\.json|tokenizer_config\.json"
                r"|special_tokens_map\.json|chat_template\.jinja|added_tokens\.json|vocab\.json|merges\.txt"
                r"|tokenizer\.model|training_args\.bin")
# summary.json is not one: it is written once the run completes, just before the manifest that stamps it, so in a run
# that never completed it is an earlier completion's (stamped) or the user's (hostile pass 13, U2: an edited one was
# replaced)
_RUN_FILE = re.compile(re.escape(RUN_FILE) + r"|rlft_codec\.json|" + _MODEL_FILES)
_CHECKPOINT_FILE = re.compile(r"checkpoints/checkpoint-\d+/(" + _MODEL_FILES
                              + r"|optimizer\.pt|scheduler\.pt|scaler\.pt|rng_state(_\d+)?\.pth|trainer_state\.json"
                                r"|README\.md)")
EVENT_FILE_PREFIX = "events.out.tfevents."  # TensorBoard's event files (a run's logs/, a report's REPORT_tb/)
_LOG_FILE = re.compile(r"(logs|checkpoints/runs)/(.+/)?" + re.escape(EVENT_FILE_PREFIX) + r"[^/]+")


def folder_files(folder: Path) -> list[str]:
    """Every file under ``folder`` (links and other non-folders included, links not followed), as relative POSIX
    paths, the manifest left out. An unreadable subfolder counts as a file: what it holds is unknown."""
    found = []
    for root, dirs, files in os.walk(folder, onerror=None, followlinks=False):
        rel = Path(root).relative_to(folder)
        for name in list(dirs):
            path = Path(root) / name
            if path.is_symlink() or not os.access(path, os.R_OK | os.X_OK):
                found.append((rel / name).as_posix())
                dirs.remove(name)
        found += [(rel / name).as_posix() for name in files]
    return sorted(f for f in found if f != MANIFEST)


def _stamp(path: Path) -> list | None:
    """[size, SHA-256 or None] of a regular file (None for anything else): what tells an edit after rlft wrote it."""
    try:
        if path.is_symlink() or not path.is_file():
            return None
        size = path.stat().st_size
        if size > HASHED_BYTES:
            return [size, None]
        with open(path, "rb") as fh:
            return [size, hashlib.file_digest(fh, "sha256").hexdigest()]
    except OSError:
        return None


def write_manifest(folder: str | os.PathLike) -> Path:
    """List every file of ``folder`` in its manifest, each with its stamp (call it last, once the folder is
    complete)."""
    folder = Path(folder)
    path = folder / MANIFEST
    tmp = folder / f".{MANIFEST}.tmp-{os.getpid()}"
    files = folder_files(folder)
    stamps = {name: stamp for name in files if (stamp := _stamp(folder / name)) is not None}
    tmp.write_text(json.dumps({"format": MANIFEST_FORMAT, "files": files, "stamps": stamps}) + "\n",
                   encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_manifest(folder: Path) -> set[str] | None:
    """The files the manifest of ``folder`` lists, or None when it has none (or something else by that name)."""
    data = _manifest_data(folder)
    return None if data is None else _listed(data)


def _listed(data: dict) -> set[str]:
    return {f for f in data["files"] if isinstance(f, str)}


def _manifest_data(folder: Path) -> dict | None:
    path = folder / MANIFEST
    try:
        if not path.is_file() or path.is_symlink() or path.stat().st_size > MAX_MANIFEST_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT or not isinstance(data.get("files"), list):
        return None
    return data


def output_holding(path: Path) -> Path | None:
    """The rlft output (up to 8 levels up) whose manifest lists files inside ``path``: a folder of it, which alone
    would leave the output's manifest and card describing files that are gone."""
    for folder in list(path.parents)[:8]:
        listed = read_manifest(folder)
        inside = path.relative_to(folder).as_posix() + "/"
        if listed is not None and any(name.startswith(inside) for name in listed):
            return folder
    return None


def unlisted_files(folder: Path) -> list[str] | None:
    """Files of ``folder`` its manifest does not list, or lists with another stamp (changed since rlft wrote them);
    [] when there are none, None without a manifest. A manifest of an rlft before stamps vouches by names only."""
    data = _manifest_data(folder)
    if data is None:
        return None
    listed = _listed(data)
    stamps = data.get("stamps") if isinstance(data.get("stamps"), dict) else {}
    return [f for f in folder_files(folder)
            if f not in listed or (f in stamps and _stamp(folder / f) != stamps[f])]


def unfinished_run_foreign(folder: Path) -> list[str] | None:
    """For a training run that never completed (its :data:`RUN_FILE` says running, failed or interrupted): the files
    in it no trainer writes ([] when there are none). None when ``folder`` holds no such run."""
    try:
        info = json.loads((folder / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(info, dict) or info.get("status") not in UNFINISHED:
        return None
    return [f for f in folder_files(folder) if not _trainer_file(folder, f)]


def _trainer_file(folder: Path, name: str) -> bool:
    return bool(_RUN_FILE.fullmatch(name) or _CHECKPOINT_FILE.fullmatch(name) or _LOG_FILE.fullmatch(name)
                or _model_card(folder, name))


def run_foreign(folder: Path) -> list[str]:
    """The files of a training run that neither its manifest lists nor a trainer writes: what a ``--resume`` would
    otherwise adopt as rlft's (its manifest lists everything there once it ends)."""
    listed = read_manifest(folder) or set()
    return [f for f in folder_files(folder) if f not in listed and not _trainer_file(folder, f)]


def _model_card(folder: Path, name: str) -> bool:
    """The model card TRL writes when it saves (at the run's top, and in checkpoints/, the trainer's output folder):
    a README.md whose front matter names TRL."""
    if name not in ("README.md", "checkpoints/README.md"):
        return False
    try:
        with open(folder / name, encoding="utf-8", errors="replace") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    return head.startswith("---") and "trl" in head.split("---")[1].lower() if head.count("---") >= 2 else False


def _homes() -> set[Path]:
    """Every account's home folder (the password database, where there is one) and ``$HOME``'s."""
    homes = {Path.home().resolve()}
    try:
        import pwd

        homes |= {Path(entry.pw_dir).resolve() for entry in pwd.getpwall() if entry.pw_dir}
    except (ImportError, OSError):  # pragma: no cover - no password database (Windows)
        pass
    return homes


def never_replaced(resolved: Path) -> str | None:
    """What ``resolved`` is when rlft must never replace it (module doc), else None."""
    cwd = Path.cwd().resolve()
    if resolved == cwd:
        return "the current folder"
    if resolved in cwd.parents:
        return "a parent of the current folder"
    if resolved == Path(resolved.anchor) or resolved.parent == Path(resolved.anchor):
        return "the root or a folder directly under it"
    for home in _homes():
        if resolved == home:
            return "a home folder"
        if resolved in home.parents:
            return "a parent of a home folder"
    return None
