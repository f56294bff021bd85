"""`make setup` installs exactly requirements/lock.txt: every pinned distribution at its locked version."""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements" / "lock.txt"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)")


def locked_pins(text: str) -> dict[str, str]:
    """``{normalized name: version}`` of every ``name==version`` line of a pip-compile file."""
    pins = {}
    for line in text.splitlines():
        match = PIN.match(line.strip())
        if match:
            pins[re.sub(r"[-_.]+", "-", match.group(1)).lower()] = match.group(2)
    return pins


def test_lock_parses_and_pins_the_cpu_torch():
    pins = locked_pins(LOCK.read_text(encoding="utf-8"))
    assert pins["torch"] == "2.13.0+cpu"  # the CPU build on this machine kind's disk, never a CUDA one
    assert not [name for name in pins if name.startswith("nvidia-")]
    for name in ("transformers", "trl", "peft", "datasets", "minari", "gymnasium", "stable-baselines3", "pytest"):
        assert name in pins, name


@pytest.mark.skipif(Path(sys.prefix).resolve() != (ROOT / ".venv").resolve(),
                    reason="checks the environment `make setup` builds (.venv), not another one")
def test_make_setup_installed_exactly_the_locked_versions():
    pins = locked_pins(LOCK.read_text(encoding="utf-8"))
    installed = {re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower(): d.version for d in metadata.distributions()}
    wrong = {name: (version, installed.get(name)) for name, version in pins.items() if installed.get(name) != version}
    assert not wrong, f"locked vs installed: {wrong}"
