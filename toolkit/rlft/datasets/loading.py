"""Reading rlft dataset folders, local or from the Hub: resolving a name to a folder (the Hub's cache first,
failing fast offline), its splits as a DatasetDict, its Parquet columns as Arrow/numpy, its info and codec.

Training, evaluation and behaviour cloning all read datasets through here.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlft.codecs.base import CODEC_FILENAME, Codec, load_codec
from rlft.core.errors import InvalidInputError, OfflineError, RemoteError
from rlft.core.io import kept_content
from rlft.core.net import (
    HUB_TIMEOUT_VARIABLE,
    DeadlineError,
    check_answers,
    hub_endpoint,
    hub_offline,
    hub_timeout,
    remote_fault,
    within_deadline,
)
from rlft.core.reading import read_json_mapping
from rlft.core.secrets import redact_text
from rlft.datasets.folder import load_dataset_folder, read_parquet, read_parquet_schema
from rlft.datasets.layout import DATA_DIR, INFO_FILENAME
from rlft.datasets.push import check_hub_online

# Resolving names: local folders first, then the Hub (its cache, or fail fast offline). Models use it too.
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def looks_like_hub_id(name: str) -> bool:
    return bool(_HUB_ID.match(name)) and not name.startswith((".", "~")) and name.count("/") <= 1


def resolve_dataset(name: str | os.PathLike) -> Path:
    """A local rlft dataset folder for ``name``: the folder itself, or a Hub dataset id downloaded (or taken
    from the cache when offline). Raises InvalidInputError / OfflineError with what to do."""
    path = Path(name).expanduser()
    kept = kept_content(path) if not (path / CODEC_FILENAME).is_file() else None
    if kept is not None:  # a killed --overwrite: the dataset the user had is whole, beside it (hostile pass 16, U2)
        raise InvalidInputError(f"{path} holds no dataset: an --overwrite of it was killed before the new one was "
                                f"complete, and the previous one is kept whole at {kept}",
                                hint=f"the next rlft command that writes {path} (--out {path}) puts it back; or use "
                                     "that folder")
    if path.is_dir():
        if not (path / CODEC_FILENAME).is_file():
            raise InvalidInputError(
                f"{path} is not an rlft dataset folder (no {CODEC_FILENAME})",
                hint="make one with rlft data export-q / serialize",
            )
        return path
    text = str(name)
    if path.exists():  # a file, a pipe: a dataset is a folder
        raise InvalidInputError(f"dataset {text!r} is not a folder", hint="pass an rlft dataset folder or a Hub id")
    if path.is_symlink():  # a link to nothing, or to itself through others
        raise InvalidInputError(f"dataset {text!r} is a symbolic link that leads nowhere (its target is missing, "
                                "or the links loop)", hint="point it at an rlft dataset folder")
    if not looks_like_hub_id(text):
        raise InvalidInputError(f"dataset {text!r} does not exist", hint="pass an rlft dataset folder or a Hub id")
    return Path(hub_snapshot(text, "dataset"))


def hub_snapshot(repo_id: str, repo_type: str) -> str:
    """The local snapshot of Hub ``repo_id``: the cache first, else downloaded within ``$RLFT_HUB_TIMEOUT`` seconds
    in all (an hour by default), after checks that the endpoint takes a connection and answers, each in seconds."""
    from huggingface_hub import snapshot_download

    what = "dataset" if repo_type == "dataset" else "model"
    try:  # the cache first: works offline
        return snapshot_download(repo_id, repo_type=repo_type, local_files_only=True, endpoint=hub_endpoint())
    except Exception:  # noqa: BLE001 - not cached: go online below
        pass
    local = f"pass a local {what} folder" + (" (rlft model init / rlft model fetch)" if what == "model" else "")
    if hub_offline():
        raise InvalidInputError(
            f"{what} {repo_id!r} is not a local folder, and HF_HUB_OFFLINE is set so the Hub is not asked", hint=local)
    endpoint, seconds = hub_endpoint(), hub_timeout()
    try:
        check_hub_online(min(3.0, seconds))
        check_answers(endpoint, min(10.0, seconds), "the Hugging Face Hub", hint="")
    except OfflineError as exc:
        raise OfflineError(f"{what} {repo_id!r} is not a local folder and the Hugging Face Hub cannot be reached "
                           f"({exc.message})", hint=f"check HF_ENDPOINT and the network, or {local}") from exc
    try:
        return within_deadline(lambda: snapshot_download(repo_id, repo_type=repo_type, endpoint=endpoint), seconds)
    except DeadlineError as exc:  # a server that stalls or drips: the download thread is left to the exit
        raise OfflineError(f"the download of {what} {repo_id!r} from {redact_text(endpoint)} did not finish "
                           f"within {seconds:g} s",
                           hint=f"a slow or stalled Hub: try again, raise {HUB_TIMEOUT_VARIABLE} (seconds), or "
                                f"{local}") from exc
    except Exception as exc:  # noqa: BLE001 - repository not found, gated, network error...
        raise download_error(exc, what, repo_id, endpoint) from exc


def download_error(exc: Exception, what: str, repo_id: str, endpoint: str) -> Exception:
    """A failed Hub download as one line: the repository the user named is wrong (not found, gated, a 4xx: exit 2),
    or the endpoint failed or answered something that is not a Hub reply (a 5xx, HTML, bad JSON: exit 1)."""
    kind, status = remote_fault(exc)
    if kind == "status" and status < 500:
        return InvalidInputError(f"cannot download {what} {repo_id!r} from the Hub: {exc}")
    if kind == "transport":  # the connection dropped
        return OfflineError(f"the download of {what} {repo_id!r} from {redact_text(endpoint)} failed: "
                            f"{type(exc).__name__}: {str(exc)[:160]}", hint="check the network and try again")
    return RemoteError(f"the Hub at {redact_text(endpoint)} answered the download of {what} {repo_id!r} with "
                       + (f"HTTP {status}" if status else f"something that is not a Hub reply ({type(exc).__name__}: "
                                                          f"{str(exc)[:160]})"),
                       hint="is HF_ENDPOINT a Hugging Face Hub? try again later")


def load_dataset_dict(local: Path):
    """A local rlft dataset folder as a DatasetDict (read from its Parquet shards, no stale cache)."""

    try:
        return load_dataset_folder(local)
    except InvalidInputError:
        raise
    except Exception as exc:  # noqa: BLE001 - unreadable folder: say which
        raise InvalidInputError(f"cannot load the dataset at {local}: {exc}") from exc


def dataset_dir(path: str | os.PathLike) -> Path:
    """A local rlft dataset folder (a Hub dataset id is resolved through the training code's resolver)."""
    local = Path(path).expanduser()
    if local.is_dir():
        return local
    return resolve_dataset(str(path))


def read_split(path: str | os.PathLike, columns: list[str] | None = None, split: str = "train"):
    """The Parquet shards of ``split`` as one Arrow table (only ``columns`` when given)."""
    import pyarrow as pa

    root = Path(path)
    files = sorted((root / DATA_DIR).glob(f"{split}-*.parquet"))
    if not files:
        raise InvalidInputError(f"{root} has no {split} split ({DATA_DIR}/{split}-*.parquet)")
    schema = read_parquet_schema(files[0])
    if columns is not None:
        missing = [c for c in columns if c not in schema.names]
        if missing:
            raise InvalidInputError(f"{root} has no column {', '.join(missing)} (columns: {', '.join(schema.names)})")
    return pa.concat_tables([read_parquet(f, columns) for f in files])


def column_array(table, name: str) -> np.ndarray:
    """A column as numpy: (N,) for scalars, (N, D) for fixed-length lists."""
    import pyarrow as pa

    col = table.column(name).combine_chunks()
    if pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
        n = len(col)
        flat = np.asarray(col.flatten().to_numpy(zero_copy_only=False))
        return flat.reshape(n, -1) if n else flat.reshape(0, 0)
    return np.asarray(col.to_numpy(zero_copy_only=False))


def observation_column(table) -> str:
    for name in ("observation", "state"):
        if name in table.column_names:
            return name
    raise InvalidInputError("the dataset has no observation (or state) column")


def observations_actions(path: str | os.PathLike, split: str = "train",
                         best_episodes: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The dataset's raw observation (or FrozenLake state) and action columns; with ``best_episodes`` F, only the
    rows of the F highest-return episodes (a fraction in (0, 1]: "%BC", filtered behaviour cloning)."""
    root = Path(path)
    files = sorted((root / DATA_DIR).glob(f"{split}-*.parquet"))
    names = read_parquet_schema(files[0]).names if files else []
    obs_col = "observation" if "observation" in names else "state"
    extra = ["episode_id", "reward"] if best_episodes is not None else []
    table = read_split(root, [obs_col, "action", *extra], split)
    obs, actions = column_array(table, obs_col), column_array(table, "action")
    if best_episodes is None:
        return obs, actions
    if not 0 < best_episodes <= 1:
        raise InvalidInputError(f"--best-episodes must be a fraction in (0, 1], got {best_episodes}")
    episode, reward = column_array(table, "episode_id"), column_array(table, "reward").astype(np.float64)
    if not np.isfinite(reward).all():
        raise InvalidInputError(f"{root}: --best-episodes ranks episodes by their return, and this data has no "
                                "rewards")
    ids, inverse = np.unique(episode, return_inverse=True)
    returns = np.bincount(inverse, weights=reward)
    keep = max(1, int(round(best_episodes * len(ids))))
    best = np.argsort(-returns, kind="stable")[:keep]
    rows = np.isin(inverse, best)
    return obs[rows], actions[rows]


def dataset_info(path: str | os.PathLike) -> dict:
    """The dataset's ``rlft_info.json`` ({} when the folder has none; a damaged one is an error)."""

    file = Path(path) / INFO_FILENAME
    return read_json_mapping(file, "dataset info file") if file.exists() else {}


def load_dataset_codec(path: str | os.PathLike) -> Codec:
    return load_codec(dataset_dir(path))


def column_names(path: str | os.PathLike, split: str = "train") -> list[str]:
    """The columns of a dataset folder's ``split`` (its first shard's schema; none without shards)."""
    files = sorted((Path(path) / DATA_DIR).glob(f"{split}-*.parquet"))
    return read_parquet_schema(files[0]).names if files else []


def has_q_values(path: str | os.PathLike) -> bool:
    return {"state", "q_values", "optimal_actions"} <= set(column_names(path))


@dataclass
class Transitions:
    """A split's rows as (s, a, r, s', terminated) arrays, in row order, with each row's episode."""

    observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_observations: np.ndarray
    terminated: np.ndarray
    episode_id: np.ndarray

    def __len__(self) -> int:
        return len(self.rewards)

    def episode_returns(self) -> np.ndarray:
        """The sum of the rewards of each episode (of the rows present)."""
        _, inverse = np.unique(self.episode_id, return_inverse=True)
        return np.bincount(inverse, weights=self.rewards)


def read_transitions(path: str | os.PathLike, split: str = "train", max_rows: int | None = None) -> Transitions:
    """The transitions of a dataset folder's ``split`` (its first ``max_rows`` rows), with the executed action where
    the rows hold one (DART data, whose ``action`` is a label); a folder written without
    next observations (before rlft wrote them, or imported without episodes) or without rewards is refused."""
    root = Path(path)
    if dataset_info(root).get("rewards") is False:
        raise InvalidInputError(f"{root} holds no rewards (imported {dataset_info(root).get('source_format')} "
                                "pairs), and a critic is learned from rewards",
                                hint="use a dataset serialized from Minari episodes (rlft data collect, then "
                                     "rlft data serialize)")
    names = column_names(root, split)
    if names and "next_observation" not in names:
        raise InvalidInputError(f"{root} has no next_observation column, so its rows are not whole transitions",
                                hint="serialize its Minari source again (rlft data serialize SOURCE --out DIR): "
                                     "rlft writes s' on every row since issue #43")
    # DART data: the critic's transition is the action the env was stepped with, not the clean label (the action)
    action = "executed_action" if "executed_action" in names else "action"
    columns = ["observation", action, "reward", "next_observation", "terminated", "episode_id"]
    table = read_split(root, columns, split)
    if max_rows is not None:
        table = table.slice(0, max_rows)
    rewards = column_array(table, "reward").astype(np.float64)
    if len(rewards) and not np.isfinite(rewards).all():
        raise InvalidInputError(f"{root}: {int((~np.isfinite(rewards)).sum())} {split} row(s) have no finite reward; "
                                "a critic is learned from rewards", hint="use a dataset recorded with rewards")
    return Transitions(column_array(table, "observation"), column_array(table, action), rewards,
                       column_array(table, "next_observation"), column_array(table, "terminated").astype(bool),
                       column_array(table, "episode_id"))
