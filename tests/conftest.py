"""Test settings: one thread per process (two busy threads on two cores slow TRL 50x), offline Hub, temp data."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import socket  # noqa: E402
import tempfile  # noqa: E402

# `datasets` reads its cache location once, at import: point it at a fresh folder before anything imports it.
# Its cache key for a local folder ignores the folder's absolute path, so a shared cache can serve one test's
# rows to another test whose folder has the same name.
os.environ["HF_DATASETS_CACHE"] = tempfile.mkdtemp(prefix="rlft-test-hf-datasets-")

import pytest  # noqa: E402

_LOCAL_HOSTS = {"localhost", "0.0.0.0", "::1", "::", ""}
_resolve = socket.getaddrinfo
_OFFLINE_LOOKUPS: list[tuple[str, str]] = []  # (test, host): printed at the end of the run


@pytest.fixture(autouse=True)
def _offline_network(request, monkeypatch):
    """Tests run offline: a name that is not this machine's fails to resolve at once, as it does on a machine with no
    DNS. Where DNS answers slowly instead (a CI runner), every stray lookup would wait out its timeout; the lookups
    are listed at the end of the run so a test that reaches for the network is seen. `network` tests are exempt."""
    if request.node.get_closest_marker("network"):
        return

    def offline_getaddrinfo(host, *args, **kwargs):
        name = host.decode() if isinstance(host, bytes) else str(host) if host is not None else ""
        if name in _LOCAL_HOSTS or name.startswith("127."):
            return _resolve(host, *args, **kwargs)
        _OFFLINE_LOOKUPS.append((request.node.nodeid, name))
        raise socket.gaierror(socket.EAI_NONAME, f"tests run offline: {name} is not resolved")

    monkeypatch.setattr(socket, "getaddrinfo", offline_getaddrinfo)


def pytest_terminal_summary(terminalreporter):
    if _OFFLINE_LOOKUPS:
        terminalreporter.section("network lookups refused (tests run offline)")
        for test, host in sorted(set(_OFFLINE_LOOKUPS)):
            terminalreporter.write_line(f"{test}: {host}")


@pytest.fixture(autouse=True)
def _isolated_data_paths(tmp_path_factory, monkeypatch):
    """Minari datasets live in a temp dir per test: tests never read or write the user's data."""
    root = tmp_path_factory.mktemp("data-paths")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(root / "minari"))


@pytest.fixture(scope="module")
def lake_model(tmp_path_factory):
    """A FrozenLake Q dataset and a tiny model on it, made once a module (the audits' bad-input cases read them)."""
    from typer.testing import CliRunner

    from rlft.cli.main import app

    root = tmp_path_factory.mktemp("lake-model")
    for args in (["data", "export-q", "frozenlake", "--out", str(root / "fl"), "--episodes", "5"],
                 ["model", "init", "--dataset", str(root / "fl"), "--out", str(root / "m")]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
    return root / "fl", root / "m"


@pytest.fixture
def cli():
    """Invoke ``rlft`` in-process; returns the click Result (exit_code, output, stderr)."""
    from typer.testing import CliRunner

    from rlft.cli.main import app

    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)

    return invoke

