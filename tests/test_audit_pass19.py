"""Hostile pass 19's findings (an independent rerun after pass 18's fixes), each the case that found it."""

from __future__ import annotations

import pytest

from factories import one_line


def test_random_maps_are_bounded_together_and_fit_the_time_limit(cli, tmp_path):
    """B1: --maps and the side were bounded one by one (100,000 maps of 64x64: days of work), and a map of 51x51 or
    more was exported as "unreachable" when only the env's 100-step limit stood in the way."""
    out = tmp_path / "q"
    one_line(cli("data", "export-q", "frozenlake", "--out", out, "--map", "random64x64", "--maps", "2"), 2,
              "50x50", "100-step")
    one_line(cli("data", "export-q", "frozenlake", "--out", out, "--map", "random50x50", "--maps", "100000"), 2,
              "at most 64 maps of 50x50")
    assert not out.exists()
    result = cli("data", "export-q", "frozenlake", "--out", out, "--map", "random4x4", "--maps", "3",
                 "--episodes", "2", "--wording", "compact")
    assert result.exit_code == 0, result.output


def test_a_token_holding_a_control_character_is_refused_and_masked_as_escaped():
    """B2: a token with a new line reached the HTTP library, whose error printed it escaped (abc\\ndef), which the
    masking of the raw value missed."""
    from rlft.core.errors import InvalidInputError
    from rlft.core.secrets import known_secrets, redact_text
    from rlft.datasets.push import resolve_token

    token = "abc\ndefSecr3t99"
    with pytest.raises(InvalidInputError, match="control character") as caught:
        resolve_token(token)
    assert "Secr3t" not in str(caught.value)
    with known_secrets([token]):
        assert "Secr3t" not in redact_text("Illegal header value b'Bearer abc\\ndefSecr3t99'")
    assert resolve_token("hf_plainTOKEN1234567890") == "hf_plainTOKEN1234567890"


@pytest.mark.parametrize(("args", "words"), [
    (["train", "offline", "--dataset", "d", "--out", "o", "--batch-size", "100000000000"], ["--batch-size"]),
    (["train", "offline", "--dataset", "d", "--out", "o", "--hidden", "1000000,1000000"], ["--hidden", "65,536"]),
    (["train", "offline", "--dataset", "d", "--out", "o", "--hidden", "20000,20000"], ["400,000,000 weights"]),
    (["train", "bc", "--dataset", "d", "--out", "b.pt", "--hidden", "60000,60000"], ["3,600,000,000 weights"]),
    (["train", "bc", "--dataset", "d", "--out", "b.pt", "--epochs", "100000000000"], ["--epochs"]),
])
def test_the_sizes_of_bc_and_offline_rl_are_bounded_before_work(cli, tmp_path, monkeypatch, args, words):
    """B3: a batch of 1e11 transitions and layers of a million were failed allocations shown as tracebacks, two
    layers of 60,000 filled the host's memory until the kernel killed the process, 1e11 epochs never ended."""
    monkeypatch.chdir(tmp_path)
    if args[1] == "offline":
        pytest.importorskip("torchrl")
    one_line(cli(*args), 2, *words)
    assert not (tmp_path / "o").exists() and not (tmp_path / "b.pt").exists()


def test_eval_overwrite_without_an_output_is_refused(cli, tmp_path):
    """U2: --overwrite with no --out (nor --video) replaced nothing and said nothing."""
    one_line(cli("eval", "--policy", "random", "--env", "CartPole-v1", "--episodes", "1", "--overwrite"), 2,
             "--overwrite does nothing here", "--out")
    out = tmp_path / "r.json"
    for _ in range(2):  # with an output it replaces rlft's own report
        result = cli("eval", "--policy", "random", "--env", "CartPole-v1", "--episodes", "1", "--overwrite",
                     "--out", out, "--quiet")
        assert result.exit_code == 0 and out.is_file(), result.output


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/v1#Secr3tPWxyz", "http://127.0.0.1:8000/v1?key=Secr3tPWxyz"])
def test_an_api_url_with_a_query_or_fragment_is_refused(url):
    """U3: "/v1" was appended after a #fragment, and the report kept the fragment unmasked."""
    from rlft.core.errors import InvalidInputError
    from rlft.policy.openai_backend import api_base

    with pytest.raises(InvalidInputError, match="no \\?query or #fragment") as caught:
        api_base(url)
    assert "Secr3t" not in str(caught.value)
    assert api_base("http://127.0.0.1:8000") == "http://127.0.0.1:8000/v1"
