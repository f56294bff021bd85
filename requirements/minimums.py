"""Pins at the lowest versions pyproject.toml declares, for ``make test-minimums`` (one ``name==version`` a line).

torch is left out: it stays the lock's CPU build, since any other torch release would download CUDA wheels.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path


def minimum_pins(pyproject: Path, extras: tuple[str, ...] = ()) -> list[str]:
    """``name==lowest`` for every dependency (and those of ``extras``) declared with a ``>=`` bound."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    deps = list(project["dependencies"])
    for extra in extras:
        deps += project["optional-dependencies"][extra]
    pins = []
    for dep in deps:
        match = re.fullmatch(r"\s*([A-Za-z0-9_.\-\[\],]+)\s*>=\s*([^,;\s]+).*", dep)
        # torch alone stays the lock's CPU build; torchrl and the like are pinned as any other
        if match and match.group(1) != "torch":
            pins.append(f"{match.group(1)}=={match.group(2)}")
    return pins


if __name__ == "__main__":
    # python requirements/minimums.py pyproject.toml [EXTRA,EXTRA]
    extras = tuple(e for e in (sys.argv[2] if len(sys.argv) > 2 else "").split(",") if e)
    print("\n".join(minimum_pins(Path(sys.argv[1] if len(sys.argv) > 1 else "pyproject.toml"), extras)))
