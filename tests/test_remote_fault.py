"""One classification of a failed Hub call (core/net.remote_fault), shared by downloads, pushes and Minari: the
same failure reads the same whichever client version raised it (requests under huggingface_hub 0.x, httpx under 1.x)."""

from __future__ import annotations

import json

import httpx
import pytest
import requests

from rlft.core.errors import InvalidInputError, OfflineError, RemoteError
from rlft.core.net import remote_fault
from rlft.datasets.loading import download_error
from rlft.datasets.push import hub_error
from rlft.sources.minari_source import remote_download_error


def _http_error(status: int) -> requests.HTTPError:
    response = requests.Response()
    response.status_code = status
    return requests.HTTPError(f"{status} Client Error", response=response)


def _requests_json_error() -> Exception:
    try:
        json.loads("<html>")
    except json.JSONDecodeError as exc:
        return requests.exceptions.JSONDecodeError(exc.msg, exc.doc, exc.pos)
    raise AssertionError("json.loads accepted HTML")


@pytest.mark.parametrize(("exc", "expected"), [
    (_http_error(404), ("status", 404)),
    (_http_error(503), ("status", 503)),
    (_requests_json_error(), ("reply", None)),  # an OSError too: must not read as a dropped connection
    (json.JSONDecodeError("Expecting value", "<html>", 0), ("reply", None)),
    (KeyError("siblings"), ("reply", None)),  # JSON without the fields the client needs
    (requests.ConnectionError("refused"), ("transport", None)),
    (httpx.ConnectError("refused"), ("transport", None)),
    (ConnectionResetError(104, "reset by peer"), ("transport", None)),
])
def test_every_failure_is_read_one_way(exc, expected):
    assert remote_fault(exc) == expected


@pytest.mark.parametrize(("exc", "download", "push", "minari"), [
    (_http_error(404), InvalidInputError, RemoteError, InvalidInputError),
    (_http_error(502), RemoteError, RemoteError, RemoteError),
    (_requests_json_error(), RemoteError, RemoteError, RemoteError),
    (requests.ConnectionError("refused"), OfflineError, OfflineError, OfflineError),
])
def test_downloads_pushes_and_minari_agree_on_whose_fault_it_is(exc, download, push, minari):
    """A refused push is the Hub's answer to the pusher (exit 1 with the status's meaning), a refused download names
    a wrong id (exit 2); otherwise the three callers give one kind of error for one kind of failure."""
    assert type(download_error(exc, "dataset", "a/b", "http://hub")) is download
    assert type(hub_error(exc, "a/b")) is push
    assert type(remote_download_error(exc, "a/b-v0")) is minari
