"""Publish a dataset folder to the Hugging Face Hub (the network boundary: tests replace ``hf_api``)."""

from __future__ import annotations

import glob
from pathlib import Path

from rlft.codecs.base import CODEC_FILENAME
from rlft.core.console import err_console
from rlft.core.errors import InvalidInputError, OfflineError, RemoteError
from rlft.core.manifest import MANIFEST, folder_files, read_manifest
from rlft.core.net import (
    DeadlineError,
    check_reachable,
    host_port,
    hub_endpoint,
    hub_offline,
    remote_fault,
    within_deadline,
)
from rlft.datasets.layout import CARD_FILENAME, DATA_DIR

# Hidden files and folders at any depth stay local (temporary files, caches): fnmatch's "*" crosses "/",
# so "*/.*" catches "data/.tmp-x", which ".*" alone lets through.
UPLOAD_IGNORE = (".*", "*/.*")


PUSH_TIMEOUT_S = 900.0  # the whole push, default of data push --timeout
READ_TIMEOUT_S = 60.0  # one request's wait for the Hub's next bytes (huggingface_hub's own client waits forever)


def hf_api(token: str | None):
    """The client used to upload, at ``HF_ENDPOINT`` when set (a seam for tests: they pass a fake with the same
    methods), its HTTP requests bounded in time."""
    import huggingface_hub
    from huggingface_hub.utils import _http

    def bounded_client():
        import httpx2

        return httpx2.Client(event_hooks={"request": [_http.hf_request_event_hook]}, follow_redirects=True,
                             timeout=httpx2.Timeout(READ_TIMEOUT_S, connect=10.0))

    if hasattr(huggingface_hub, "set_client_factory") and hasattr(_http, "hf_request_event_hook"):
        huggingface_hub.set_client_factory(bounded_client)
    return huggingface_hub.HfApi(token=token, endpoint=hub_endpoint())


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


def upload_files(folder: Path) -> list[str]:
    """The files a push uploads: those rlft wrote (the folder's manifest lists them), hidden ones left out. A link
    is refused: the Hub client uploads what it points to, anywhere on the machine. A file the manifest does not list
    (a user's notes, a token written down) stays local, named; a folder written before manifests uploads its
    every file."""
    files = [f for f in folder_files(folder) if not any(part.startswith(".") for part in f.split("/"))]
    links = [f for f in files if (folder / f).is_symlink() or not (folder / f).is_file()]
    if links:
        shown = ", ".join(links[:3]) + (f" and {len(links) - 3} more" if len(links) > 3 else "")
        raise InvalidInputError(f"{folder} holds {shown}: a link or something else than a file, which a push would "
                                "follow to what it points to", hint="copy the file in place of the link, or remove "
                                                                    "it; nothing was pushed")
    listed = read_manifest(folder)
    if listed is None:
        err_console.print(f"[yellow]{folder} has no {MANIFEST} (written before rlft kept one): every file in it is "
                          "pushed[/]")
        return files
    left_out = [f for f in files if f not in listed]
    if left_out:
        err_console.print(f"[yellow]not pushed, rlft did not write them: {', '.join(left_out[:5])}"
                          f"{' ...' if len(left_out) > 5 else ''}[/]")
    return [f for f in files if f in listed]


def check_hub_online(timeout: float = 3.0) -> None:
    """Fail in seconds, with a clear message, when the Hub (``HF_ENDPOINT`` when set) cannot be reached or
    offline mode is set."""
    if hub_offline():
        raise OfflineError("HF_HUB_OFFLINE is set", hint="unset it to push to the Hub")
    host, port = host_port(hub_endpoint())
    check_reachable(host, port, timeout, "the Hugging Face Hub",
                    hint="check the network; the dataset folder is unchanged")


def resolve_token(token: str | None) -> str:
    from huggingface_hub import get_token

    token = token or get_token()
    if not token:
        raise InvalidInputError(
            "no Hugging Face token", hint="run `hf auth login`, set HF_TOKEN, or pass --token"
        )
    if not token.isprintable():  # a new line pasted in: the HTTP library's error printed it (hostile pass 19, B2)
        raise InvalidInputError("the Hugging Face token holds a control character (a new line or a tab): a token "
                                "is one word", hint="check the token given (--token, HF_TOKEN or `hf auth login`)")
    return token


def check_branch_name(revision: str | None) -> None:
    """A branch name git would take (``git check-ref-format --branch``'s main rules): no ``..``, no leading ``/`` or
    ``-``, no control characters, spaces or ``~^:?*[\\``, no ``.lock`` ending; a path such as ``../../x`` is not a
    branch."""
    if revision is None:
        return
    bad = (not revision or revision.startswith(("/", "-", ".")) or revision.endswith(("/", ".", ".lock"))
           or ".." in revision or "//" in revision or "@{" in revision
           or any(c in revision for c in " ~^:?*[\\") or any(ord(c) < 32 or ord(c) == 127 for c in revision))
    if bad:
        raise InvalidInputError(f"--revision {revision!r} is not a branch name",
                                hint="use letters, digits, - _ . and / between names, e.g. v1 or exp/run-2")


def push_dataset(
    folder: Path,
    repo_id: str,
    private: bool = False,
    revision: str | None = None,
    token: str | None = None,
    commit_message: str | None = None,
    api=None,
    timeout: float = PUSH_TIMEOUT_S,
) -> str:
    """Create the dataset repo if needed and upload the whole folder within ``timeout`` seconds in all; return the
    repo URL."""
    folder = Path(folder)
    check_dataset_folder(folder)
    files = upload_files(folder)
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise InvalidInputError(f"--repo-id must be USER/NAME, got {repo_id!r}")
    check_branch_name(revision)
    if api is None:
        if hub_offline():  # first: offline mode is the reason a push cannot happen, whatever the token
            raise OfflineError("HF_HUB_OFFLINE is set", hint="unset it to push to the Hub")
        hub_endpoint()  # a bad HF_ENDPOINT is one line here (huggingface_hub parses it on import, as a traceback)
        token = resolve_token(token)
        check_hub_online()
        api = hf_api(token)
    if not timeout > 0:
        raise InvalidInputError(f"--timeout must be > 0 seconds, got {timeout}")

    def push() -> str:
        url = api.create_repo(repo_id=repo_id, repo_type="dataset", private=private, exist_ok=True)
        if revision:
            api.create_branch(repo_id=repo_id, repo_type="dataset", branch=revision, exist_ok=True)
        api.upload_folder(
            folder_path=str(folder),
            repo_id=repo_id,
            repo_type="dataset",
            revision=revision,
            commit_message=commit_message or f"Upload {folder.name} with rlft",
            allow_patterns=[glob.escape(f) for f in files],  # exactly these: the client matches patterns
            ignore_patterns=list(UPLOAD_IGNORE),
        )
        return str(url)

    try:
        return within_deadline(push, timeout)
    except DeadlineError as exc:
        raise OfflineError(f"the push to {repo_id} at {hub_endpoint()} did not finish within {timeout:g} s",
                           hint="a slow or stalled Hub: push again, or raise --timeout; the dataset folder is "
                                "unchanged") from exc
    except Exception as exc:  # the network boundary: any HTTP or connection failure becomes one line
        raise hub_error(exc, repo_id) from exc


# What a Hub status means for the person pushing.
STATUS_HINTS = {
    401: "the token is missing, expired or wrong: run `hf auth login` or pass --token",
    403: "the token cannot write to this repo: use a token with write access, or a repo you own",
    404: "no such repo or branch, or the token cannot see it",
    409: "the repo changed while pushing: push again",
    429: "the Hub is rate-limiting this token: wait and push again",
}


def hub_error(exc: Exception, repo_id: str) -> Exception:
    """One clear line for a failed push: the Hub's HTTP status and what it means, or the connection failure."""
    if isinstance(exc, InvalidInputError):
        return exc
    kind, status = remote_fault(exc)
    if kind == "status":
        hint = STATUS_HINTS.get(status, "the Hub failed: push again later" if status >= 500 else None)
        return RemoteError(f"the Hub at {hub_endpoint()} refused the push to {repo_id}: HTTP {status}",
                           hint=(hint or "") + ("; " if hint else "") + "the dataset folder is unchanged")
    if kind == "transport":
        return OfflineError(f"the push to {repo_id} at {hub_endpoint()} failed: {type(exc).__name__}: {exc}",
                            hint="check the network and push again; the dataset folder is unchanged")
    return RemoteError(f"the Hub at {hub_endpoint()} answered the push to {repo_id} with something that is not a Hub "
                       f"reply ({type(exc).__name__}: {str(exc)[:160]})",
                       hint="is HF_ENDPOINT a Hugging Face Hub? the dataset folder is unchanged")
