"""`rlft data push`: what is uploaded, to which repo, with which card (a fake HfApi at the network boundary)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlft.core.errors import InvalidInputError, OfflineError
from rlft.datasets import push as push_mod


class FakeHfApi:
    """Records calls; captures the files that would be uploaded."""

    def __init__(self):
        self.calls = []
        self.uploaded: dict[str, bytes] = {}

    def create_repo(self, **kwargs):
        self.calls.append(("create_repo", kwargs))
        return f"https://huggingface.co/datasets/{kwargs['repo_id']}"

    def create_branch(self, **kwargs):
        self.calls.append(("create_branch", kwargs))

    def upload_folder(self, **kwargs):
        self.calls.append(("upload_folder", kwargs))
        from huggingface_hub.utils import filter_repo_objects  # the real client's own filtering

        root = Path(kwargs["folder_path"])
        files = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()]
        for name in filter_repo_objects(files, allow_patterns=kwargs.get("allow_patterns"),
                                        ignore_patterns=kwargs.get("ignore_patterns")):
            self.uploaded[name] = (root / name).read_bytes()


@pytest.fixture
def dataset_dir(tmp_path):
    from rlft.datasets.frozenlake_q.export import ExportQConfig, export_frozenlake_q

    out = tmp_path / "fl"
    export_frozenlake_q(ExportQConfig(out=out, episodes=10))
    return out


def test_push_uploads_folder_with_card(cli, dataset_dir, monkeypatch):
    fake = FakeHfApi()
    monkeypatch.setattr(push_mod, "hf_api", lambda token: fake)
    monkeypatch.setattr(push_mod, "check_hub_online", lambda *a, **k: None)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # the Hub is the fake above
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    (dataset_dir / "data" / ".partial-shard.tmp").write_text("left by an editor or a killed run")
    (dataset_dir / ".cache").mkdir()
    (dataset_dir / ".cache" / "x").write_text("local")
    result = cli("data", "push", dataset_dir, "--repo-id", "alice/frozenlake-q", "--private", "--revision", "v1")
    assert result.exit_code == 0, result.output
    assert not [name for name in fake.uploaded if "/." in f"/{name}"], sorted(fake.uploaded)
    names = [c[0] for c in fake.calls]
    assert names == ["create_repo", "create_branch", "upload_folder"]
    assert fake.calls[0][1] == {"repo_id": "alice/frozenlake-q", "repo_type": "dataset", "private": True,
                                "exist_ok": True}
    assert fake.calls[2][1]["revision"] == "v1" and fake.calls[2][1]["repo_type"] == "dataset"
    assert {"README.md", "rlft_codec.json", "data/train-00000-of-00001.parquet"} <= set(fake.uploaded)
    assert b"configs:" in fake.uploaded["README.md"] and b"V*(start)" in fake.uploaded["README.md"]


def test_push_without_token_is_a_clear_error(cli, dataset_dir, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr("huggingface_hub.get_token", lambda: None)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # offline is said first: no token would not make it push
    result = cli("data", "push", dataset_dir, "--repo-id", "alice/x")
    assert result.exit_code == 1 and "HF_HUB_OFFLINE is set" in result.output
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    result = cli("data", "push", dataset_dir, "--repo-id", "alice/x")
    assert result.exit_code == 2 and "no Hugging Face token" in result.output


def test_push_offline_fails_fast(dataset_dir, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OfflineError, match="HF_HUB_OFFLINE"):
        push_mod.push_dataset(dataset_dir, "alice/x", token="hf_test")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    port = _closed_port()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")  # a closed loopback port stands for the Hub
    with pytest.raises(OfflineError, match=f"cannot reach the Hugging Face Hub 127.0.0.1:{port}"):
        push_mod.check_hub_online(timeout=1.0)


@pytest.fixture
def local_hub(monkeypatch):
    """A local HTTP server as HF_ENDPOINT that answers every request with HTTP 401, recording the paths asked:
    the real HfApi talks to it (the network boundary is the socket, nothing in rlft is replaced)."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen = []

    class Refuse(BaseHTTPRequestHandler):
        def _answer(self):
            seen.append((self.command, self.path))
            body = json.dumps({"error": "Invalid credentials in Authorization header"}).encode()
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_HEAD = _answer  # noqa: N815 - http.server's handler names

        def log_message(self, *args):  # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    # the test session sets HF_HUB_OFFLINE before huggingface_hub is imported, which reads it once into a constant
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    yield seen, server.server_port
    server.shutdown()
    server.server_close()


def test_push_goes_to_hf_endpoint_and_a_refusal_is_one_line(cli, dataset_dir, local_hub):
    seen, port = local_hub
    before = sorted(p.relative_to(dataset_dir) for p in dataset_dir.rglob("*"))
    result = cli("data", "push", dataset_dir, "--repo-id", "alice/x", "--token", "hf_wrong")
    assert seen and seen[0] == ("POST", "/api/repos/create")  # the mirror, not huggingface.co, was asked
    assert result.exit_code == 1  # a fault of the remote, not of the command
    text = " ".join(result.output.split())
    assert f"the Hub at http://127.0.0.1:{port} refused the push to alice/x: HTTP 401" in text
    assert "hf auth login" in text and "Traceback" not in result.output
    assert sorted(p.relative_to(dataset_dir) for p in dataset_dir.rglob("*")) == before


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_push_refuses_non_dataset_folder_and_bad_repo_id(dataset_dir, tmp_path):
    with pytest.raises(InvalidInputError, match="not an rlft dataset folder"):
        push_mod.push_dataset(tmp_path / "nothing", "alice/x", api=FakeHfApi())
    with pytest.raises(InvalidInputError, match="USER/NAME"):
        push_mod.push_dataset(dataset_dir, "no-slash", api=FakeHfApi())


def test_cards_render_exactly_as_the_hub_client_renders_them(cli, tmp_path, monkeypatch):
    """rlft renders cards with jinja2 and DatasetCardData (no Hub client import); the text must equal
    ``huggingface_hub.DatasetCard.from_template``'s, for both card templates."""
    from factories import make_minari_dataset
    from rlft.datasets import card, folder
    from rlft.sources.minari_source import minari_root

    rendered = []

    def checked(spec):
        text = card.render_card(spec)
        assert text == card.render_card_with_hub_client(spec)
        rendered.append(spec.template)
        return text

    monkeypatch.setattr(folder, "render_card", checked)
    result = cli("data", "export-q", "frozenlake", "--out", tmp_path / "fl", "--episodes", "5")
    assert result.exit_code == 0, result.output
    with minari_root(tmp_path / "minari"):
        make_minari_dataset("test/card-v0", env_id="CartPole-v1", episodes=3)
        result = cli("data", "serialize", "test/card-v0", "--out", tmp_path / "cp")
    assert result.exit_code == 0, result.output
    assert rendered == ["frozenlake_q.md", "offline_rl.md"]


@pytest.fixture
def mute_hub(monkeypatch):
    """A local HF_ENDPOINT that accepts every connection and never answers (the audit's hung push)."""
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held = []

    def accept():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            held.append(conn)  # read nothing, answer nothing

    threading.Thread(target=accept, daemon=True).start()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    yield
    server.close()
    for conn in held:
        conn.close()


def test_a_push_to_a_hub_that_never_answers_ends_within_its_timeout(cli, dataset_dir, mute_hub):
    import time

    start = time.monotonic()
    result = cli("data", "push", dataset_dir, "--repo-id", "alice/x", "--token", "hf_x", "--timeout", "2")
    elapsed = time.monotonic() - start
    assert result.exit_code == 1 and "did not finish within 2 s" in " ".join(result.output.split())
    assert elapsed < 10


@pytest.mark.parametrize("body", [b"<html>a proxy's login page</html>", b"{}"])
def test_a_hub_that_answers_something_else_is_one_line(cli, dataset_dir, monkeypatch, body):
    """HF_ENDPOINT pointing at something that answers 200 with a page that is not a Hub reply (or JSON without the
    fields huggingface_hub needs): one line, exit 1."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Other(BaseHTTPRequestHandler):
        def _answer(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_HEAD = _answer  # noqa: N815 - http.server's handler names

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Other)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    try:
        result = cli("data", "push", dataset_dir, "--repo-id", "alice/x", "--token", "hf_x", "--timeout", "20")
    finally:
        server.shutdown()
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert len(result.output.strip().splitlines()) <= 3
