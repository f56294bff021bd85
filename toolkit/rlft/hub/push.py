"""Publish a dataset folder to the Hugging Face Hub (the network boundary: tests replace ``hf_api``)."""

from __future__ import annotations

from pathlib import Path

from rlft.codecs.base import CODEC_FILENAME
from rlft.core.errors import InvalidInputError, OfflineError
from rlft.core.net import check_reachable, hub_offline
from rlft.hub.layout import CARD_FILENAME, DATA_DIR

HUB_HOST = "huggingface.co"

# Hidden files and folders at any depth stay local (temporary files, caches): fnmatch's "*" crosses "/",
# so "*/.*" catches "data/.tmp-x", which ".*" alone lets through.
UPLOAD_IGNORE = (".*", "*/.*")


def hf_api(token: str | None):
    """The client used to upload (a seam for tests: they pass a fake with the same methods)."""
    from huggingface_hub import HfApi

    return HfApi(token=token)


def check_dataset_folder(folder: Path) -> None:
    """An rlft dataset folder holds a card, Parquet data and its codec."""
    missing = [name for name in (CARD_FILENAME, DATA_DIR, CODEC_FILENAME) if not (folder / name).exists()]
    if not folder.is_dir() or missing:
        raise InvalidInputError(
            f"{folder} is not an rlft dataset folder" + (f" (missing {', '.join(missing)})" if missing else ""),
            hint="pass a folder written by rlft data export-q / serialize",
        )
    if not any((folder / DATA_DIR).glob("*.parquet")):
        raise InvalidInputError(f"{folder}/{DATA_DIR} holds no Parquet file")


def check_hub_online(host: str = HUB_HOST, port: int = 443, timeout: float = 3.0) -> None:
    """Fail in seconds, with a clear message, when the Hub cannot be reached or offline mode is set."""
    if hub_offline():
        raise OfflineError("HF_HUB_OFFLINE is set", hint="unset it to push to the Hub")
    check_reachable(host, port, timeout, "the Hugging Face Hub",
                    hint="check the network; the dataset folder is unchanged")


def resolve_token(token: str | None) -> str:
    from huggingface_hub import get_token

    token = token or get_token()
    if not token:
        raise InvalidInputError(
            "no Hugging Face token", hint="run `hf auth login`, set HF_TOKEN, or pass --token"
        )
    return token


def push_dataset(
    folder: Path,
    repo_id: str,
    private: bool = False,
    revision: str | None = None,
    token: str | None = None,
    commit_message: str | None = None,
    api=None,
) -> str:
    """Create the dataset repo if needed and upload the whole folder; return the repo URL."""
    folder = Path(folder)
    check_dataset_folder(folder)
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise InvalidInputError(f"--repo-id must be USER/NAME, got {repo_id!r}")
    if api is None:
        token = resolve_token(token)
        check_hub_online()
        api = hf_api(token)
    url = api.create_repo(repo_id=repo_id, repo_type="dataset", private=private, exist_ok=True)
    if revision:
        api.create_branch(repo_id=repo_id, repo_type="dataset", branch=revision, exist_ok=True)
    api.upload_folder(
        folder_path=str(folder),
        repo_id=repo_id,
        repo_type="dataset",
        revision=revision,
        commit_message=commit_message or f"Upload {folder.name} with rlft",
        ignore_patterns=list(UPLOAD_IGNORE),
    )
    return str(url)
