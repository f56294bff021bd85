"""Minari datasets in: load any local dataset (by id or folder, any storage format) and summarise it.

Offline, Minari's own download retries for about 23 s before a ConnectError; :func:`load_minari` first probes
the remote host with a short timeout and fails at once with :class:`OfflineError` instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from rlft.core.claims import claim_output, release_output
from rlft.core.console import err_console
from rlft.core.errors import InvalidInputError, OfflineError, OutputExistsError, RemoteError, require
from rlft.core.io import atomic_write_text, holds_content, refuse_arrival, refuse_foreign, temp_name
from rlft.core.manifest import write_manifest
from rlft.core.net import (
    DeadlineError,
    check_reachable,
    host_port,
    hub_endpoint,
    hub_offline,
    remote_fault,
    within_deadline,
)
from rlft.core.secrets import redact_text
from rlft.sources.minari_hdf5 import flat_hdf5_file, read_flat_hdf5
from rlft.sources.reference_scores import check_reference_scores

CONNECT_TIMEOUT_S = 3.0
DOWNLOAD_TIMEOUT_S = 3600.0  # in all: a server that accepts and stalls, or drips bytes, is given up


def check_dataset_id(dataset_id: str) -> str:
    """Require Minari's ``(namespace/)name-vN``: Minari itself raises an unhelpful TypeError without a version."""
    from minari.dataset.minari_dataset import DATASET_ID_RE

    match = DATASET_ID_RE.fullmatch(dataset_id)
    if match is None or match.group("version") is None:
        hint = (
            f"add a version, e.g. {dataset_id}-v0" if not re.search(r"-v\d+$", dataset_id)
            else "names use letters, digits, - and _; a namespace has at least 2 characters"
        )
        raise InvalidInputError(f"dataset id {dataset_id!r} must look like namespace/name-vN", hint=hint)
    return dataset_id


def datasets_root() -> Path:
    """Minari's local dataset folder (``$MINARI_DATASETS_PATH`` or ``~/.minari/datasets``), from Minari's own
    helper so the two never disagree (it creates the folder, as Minari does on any use)."""
    from minari.storage.datasets_root_dir import get_dataset_path

    return Path(get_dataset_path())


@contextlib.contextmanager
def minari_root(path: Path | None) -> Iterator[None]:
    """Point Minari (which reads the variable on every call) at ``path`` for the duration (made absolute: Minari
    joins a relative root onto itself when it writes); None leaves Minari's root as it is (``--data-path`` not
    given)."""
    if path is None:
        yield
        return
    if Path(path).exists() and not Path(path).is_dir():
        raise InvalidInputError(f"--data-path {path} is a file, not a folder of Minari datasets",
                                hint="give a folder (it is made if missing)")
    old = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = str(Path(path).resolve())
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("MINARI_DATASETS_PATH", None)
        else:
            os.environ["MINARI_DATASETS_PATH"] = old


STAGING_PREFIX = ".rlft-collect-"


@contextlib.contextmanager
def staged_dataset(dataset_id: str, overwrite: bool) -> Iterator[Path]:
    """Write a Minari dataset under a hidden temporary root inside the real one (Minari skips hidden folders) and
    move it into place when the block ends without an error; an existing dataset of that id is replaced only
    then, and only with ``overwrite``. Yields the final dataset folder's path (it exists once the block has ended)."""
    root = datasets_root()
    claim_output(root / dataset_id, "--dataset-id")  # one writer of an id at a time, whatever TMPDIR each has
    held = holds_content(root / dataset_id)
    if held and not overwrite:  # written since the command's check (hostile pass 20, F4: replaced without a word)
        raise OutputExistsError(f"Minari dataset {dataset_id} appeared in {root} while this command ran",
                                hint="pass --overwrite to replace it, or bump the version (-vN)")
    if (root / dataset_id).exists():  # replaced at the end: only a dataset rlft wrote, every file of it listed
        refuse_foreign(root / dataset_id, "--dataset-id")
    root.mkdir(parents=True, exist_ok=True)
    stale = sorted(p.name for p in root.glob(STAGING_PREFIX + "*"))
    if stale:  # named, not deleted: another writer may be running into the same root
        err_console.print(f"[yellow]Warning:[/] temporary folder(s) of an interrupted collect in {root}: "
                          f"{', '.join(stale)}; remove them if no other collect is running.", highlight=False,
                          soft_wrap=True)
    tmp_root = temp_name(root, STAGING_PREFIX)
    try:
        tmp_root.mkdir()  # inside the cleanup: an interrupt right after it leaves nothing
        with minari_root(tmp_root):
            yield root / dataset_id
        _move_into_place(tmp_root, root, dataset_id, held)
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)
        release_output(root / dataset_id)


def _move_into_place(tmp_root: Path, root: Path, dataset_id: str, held: bool = True) -> Path:
    """Swap the new dataset folder in; the old one (if any) is deleted only after the new one is in place. What is
    at the id now must be what was checked at the start (``held``: a dataset was there), see
    :func:`rlft.core.io.refuse_arrival`."""
    from minari.dataset.minari_dataset import parse_dataset_id

    _make_namespace(root, parse_dataset_id(dataset_id)[0])
    new, final = tmp_root / dataset_id, root / dataset_id
    write_manifest(new)  # last: what rlft wrote, so a later --overwrite replaces nothing else
    final.parent.mkdir(parents=True, exist_ok=True)
    refuse_arrival(final, held, "--dataset-id")
    if final.exists():
        trash = tmp_root / ".old"
        os.replace(final, trash)
        try:
            os.replace(new, final)
        except BaseException:
            os.replace(trash, final)
            raise
    else:
        os.replace(new, final)
    return final


def _make_namespace(root: Path, namespace: str | None) -> None:
    """Minari's namespace folders of ``namespace`` (each with its metadata file) under ``root``, as
    ``minari.namespace.create_namespace`` makes them, without its ``list_local_namespaces``: that walks every folder
    under the datasets root, symlinks followed (``--data-path /`` walked /proc and failed after the episodes were
    recorded: hostile pass 18, B9)."""
    from minari.namespace import NAMESPACE_METADATA_FILENAME, validate_namespace

    if namespace is None:
        return
    validate_namespace(namespace)
    parts = namespace.split("/")
    for depth in range(1, len(parts) + 1):
        folder = root.joinpath(*parts[:depth])
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / NAMESPACE_METADATA_FILENAME).exists():
            atomic_write_text(folder / NAMESPACE_METADATA_FILENAME, "{}")


def env_requirements(env_id: str) -> list[str]:
    """The pip requirements a dataset of ``env_id`` records: gymnasium's version, and mujoco's for MuJoCo envs."""
    import gymnasium

    requirements = [f"gymnasium=={gymnasium.__version__}"]
    try:
        import mujoco

        if "mujoco" in str(gymnasium.spec(env_id).entry_point):
            requirements.append(f"mujoco=={mujoco.__version__}")
    except ImportError:  # pragma: no cover - mujoco is a dependency, but only MuJoCo envs need it
        pass
    return requirements


def remote_endpoint() -> tuple[str, int]:
    """(host, port) of the remote Minari downloads from: ``$MINARI_REMOTE`` (default ``hf://farama-minari``)."""
    remote = os.environ.get("MINARI_REMOTE", "hf://farama-minari")
    if remote.startswith("gcp://"):
        return "storage.googleapis.com", 443
    return host_port(hub_endpoint())


def check_minari_remote(timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Raise :class:`OfflineError` unless a TCP connection to the remote opens within ``timeout`` seconds."""
    hf_remote = os.environ.get("MINARI_REMOTE", "hf://farama-minari").startswith("hf://")
    if hf_remote and hub_offline():
        raise OfflineError("cannot download a Minari dataset: HF_HUB_OFFLINE is set", hint="unset it or use local ids")
    host, port = remote_endpoint()
    check_reachable(host, port, timeout, "the Minari remote",
                    hint="check the network, or load a local dataset (rlft data collect makes one)")


def data_folder(path: Path) -> Path | None:
    """The ``data`` folder of a dataset given as its folder or as the ``data`` folder itself."""
    for candidate in (path / "data", path):
        if (candidate / "metadata.json").is_file():
            return candidate
    return None


def damaged(source: str, exc: Exception) -> InvalidInputError:
    """A Minari dataset whose files cannot be read (truncated HDF5, broken metadata.json...) as one clear line."""
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return InvalidInputError(f"cannot read Minari dataset {source}: its files are damaged ({first})",
                             hint="re-create it (rlft data collect --overwrite) or download it again")


# What a damaged dataset raises from h5py, pyarrow and Minari's own metadata parsing (its space checks assert).
DAMAGE_ERRORS = (OSError, ValueError, KeyError, TypeError, AssertionError)


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_counts(data: Path, source: str) -> None:
    """Every file of the dataset is a regular one (a FIFO in place of the HDF5 file blocks for ever). Minari sizes
    its episode index from metadata.json's ``total_episodes`` before it reads any data, so a
    damaged count (10**9) would take gigabytes before anything fails: the counts must be whole numbers, at most one
    episode per step, and for HDF5 storage the number of episodes the file holds."""
    special = next((p for p in sorted(data.rglob("*")) if not p.is_dir() and not p.is_file()), None)
    if special is not None:  # a FIFO or a device would block or never end when HDF5 or Arrow opens it
        raise damaged(source, ValueError(f"{special.relative_to(data)} is not a regular file"))
    try:
        meta = json.loads((data / "metadata.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # Minari's own reading names this damage
    if not isinstance(meta, dict):  # a list, null or text: an AttributeError inside Minari (hostile pass 17, B7)
        raise damaged(source, ValueError(f"metadata.json holds a {type(meta).__name__}, not a JSON object"))
    dataset_id = meta.get("dataset_id")
    if dataset_id is not None and not (isinstance(dataset_id, str) and re.search(r"-v\d+$", dataset_id)):
        raise damaged(source, ValueError(f"metadata.json's dataset_id {dataset_id!r} is not namespace/name-vN"))
    check_reference_scores(meta, data / "metadata.json", source)
    if "total_episodes" not in meta:
        return
    episodes, steps = meta["total_episodes"], meta.get("total_steps")
    if not _whole(episodes) or (steps is not None and (not _whole(steps) or episodes > max(steps, 1))):
        raise damaged(source, ValueError(f"metadata.json counts {episodes!r} episodes of {steps!r} steps"))
    hdf5 = data / "main_data.hdf5"
    if hdf5.is_file():
        import h5py

        try:
            with h5py.File(hdf5, "r") as file:
                held = sum(1 for key in file if key.startswith("episode_"))
        except OSError:
            return
        if held != episodes:
            raise damaged(source, ValueError(f"metadata.json counts {episodes} episodes, the HDF5 file holds {held}"))


def _opened(open_fn, source: str):
    try:
        return open_fn()
    except InvalidInputError:
        raise
    except DAMAGE_ERRORS as exc:
        raise damaged(source, exc) from exc


def load_minari(dataset_id_or_path: str | os.PathLike, download: bool = False,
                timeout: float = DOWNLOAD_TIMEOUT_S):
    """Open a Minari dataset from a local id (``namespace/name-vN``) or a dataset folder; returns MinariDataset.

    Works for HDF5, Arrow and Parquet storage, whatever tool wrote it. With ``download=True`` a missing id
    is fetched from the Minari remote, after a connectivity check that fails within a few seconds.
    """
    require("minari", package='"minari[hdf5]"')
    import minari
    from minari.dataset.minari_dataset import MinariDataset

    text = os.fspath(dataset_id_or_path)
    path = Path(text).expanduser()
    if path.is_dir():
        data = data_folder(path)
        if data is None:
            raise InvalidInputError(f"{path} is not a Minari dataset folder (no metadata.json in it or in data/)")
        check_counts(data, str(path))
        return _opened(lambda: MinariDataset(data), str(path))
    check_dataset_id(text)
    if (datasets_root() / text / "data").is_dir():
        check_counts(datasets_root() / text / "data", text)
        return _opened(lambda: minari.load_dataset(text), text)
    if not download:
        raise InvalidInputError(
            f"Minari dataset {text} is not in {datasets_root()}",
            hint="pass --download to fetch a remote dataset, or create it with `rlft data collect`",
        )
    check_minari_remote()
    ds = _download(text, timeout)
    check_reference_scores(ds.storage.metadata, Path(ds.storage.data_path) / "metadata.json", text)
    return ds



def _download(dataset_id: str, seconds: float):
    """``minari.load_dataset(download=True)`` within ``seconds`` in all, any failure of the remote as one line."""
    import minari

    try:
        return within_deadline(lambda: minari.load_dataset(dataset_id, download=True), seconds)
    except DeadlineError as exc:
        raise OfflineError(f"the download of {dataset_id} did not finish within {seconds:g} s",
                           hint="a slow or stalled remote: try again, or raise --download-timeout") from exc
    except (InvalidInputError, OfflineError):
        raise
    except Exception as exc:  # the network boundary: a refusal, an answer that is not the remote's, a drop
        raise remote_download_error(exc, dataset_id) from exc


def remote_download_error(exc: Exception, dataset_id: str) -> Exception:
    """A failed Minari download as one line, classified as every Hub call is (:func:`rlft.core.net.remote_fault`):
    the id is wrong (a 4xx: exit 2), the network dropped, or the remote failed or is no Hub (exit 1)."""
    kind, status = remote_fault(exc)
    what = f"{type(exc).__name__}: {str(exc)[:160]}"
    if kind == "status" and status < 500:
        return InvalidInputError(f"the remote refused the download of {dataset_id}: HTTP {status}",
                                 hint="check the dataset id (`minari list remote` lists them), or your access to it")
    if kind == "transport":
        return OfflineError(f"the download of {dataset_id} failed: {what}", hint="check the network and try again")
    return RemoteError(f"the download of {dataset_id} failed: " + (f"HTTP {status}" if status else what),
                       hint="is the remote (HF_ENDPOINT) a Hugging Face Hub? try again later")


def iterate_episodes(ds, source: str, episode_indices=None):
    """The dataset's episodes as Minari ``EpisodeData`` (flat HDF5 ones with only the infos rlft reads);
    damage found while reading them (deep in an HDF5 file) is one clear error."""
    fast = flat_hdf5_file(ds)
    if episode_indices is None:
        episode_indices = ds.episode_indices
    episodes = (read_flat_hdf5(fast, episode_indices) if fast is not None
                else ds.iterate_episodes(episode_indices=episode_indices))
    while True:
        try:
            episode = next(episodes)
        except StopIteration:
            return
        except DAMAGE_ERRORS as exc:
            raise damaged(source, exc) from exc
        yield episode


def space_line(space, limit: int = 120) -> str:
    """A space in one short line: gymnasium's own text, except a Text space's full character set (megabytes for
    a Unicode charset) becomes its length limits and charset size."""
    from gymnasium import spaces

    if isinstance(space, spaces.Text):
        return (f"Text(min_length={space.min_length}, max_length={space.max_length}, "
                f"{len(space.character_set):,} characters)")
    text = str(space)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def dataset_summary(ds) -> dict[str, Any]:
    """Episodes, steps, spaces, return statistics, normalized score (x100), storage format and env id."""
    meta = ds.storage.metadata
    returns, lengths, terminated, truncated = [], [], 0, 0
    for episode in iterate_episodes(ds, meta.get("dataset_id", "")):
        returns.append(float(np.sum(episode.rewards)))
        lengths.append(len(episode.rewards))
        terminated += bool(len(episode.terminations) and episode.terminations[-1])
        truncated += bool(len(episode.truncations) and episode.truncations[-1])
    rets = np.asarray(returns) if returns else np.zeros(1)
    summary: dict[str, Any] = {
        "dataset_id": meta.get("dataset_id"),
        "env_id": ds.env_spec.id if ds.env_spec is not None else None,
        "max_episode_steps": ds.env_spec.max_episode_steps if ds.env_spec is not None else None,
        "episodes": int(ds.total_episodes),
        "steps": int(ds.total_steps),
        "observation_space": space_line(ds.observation_space),
        "action_space": space_line(ds.action_space),
        "return_mean": float(rets.mean()),
        "return_std": float(rets.std()),
        "return_min": float(rets.min()),
        "return_max": float(rets.max()),
        "length_mean": float(np.mean(lengths)) if lengths else 0.0,
        "episodes_terminated": terminated,
        "episodes_truncated": truncated,
        "ref_min_score": meta.get("ref_min_score"),
        "ref_max_score": meta.get("ref_max_score"),
        "normalized_score_x100": None,
        "storage_format": meta.get("data_format", "hdf5"),
        "algorithm_name": meta.get("algorithm_name"),
        "author": sorted(redact_text(a) for a in meta.get("author", [])) or None,  # printed and copied on
        "minari_version": meta.get("minari_version"),
        "size_mb": meta.get("dataset_size"),
        "path": str(ds.storage.data_path),
    }
    if summary["ref_min_score"] is not None and summary["ref_max_score"] is not None:
        import minari

        summary["normalized_score_x100"] = float(100.0 * minari.get_normalized_score(ds, rets).mean())
    rlft_meta = meta.get("rlft")
    if isinstance(rlft_meta, dict):
        summary["seed"] = rlft_meta.get("seed")
        summary["policy"] = rlft_meta.get("policy")
    return summary
