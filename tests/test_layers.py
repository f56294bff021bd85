"""Data flows one way: a package of rlft imports only from itself and the packages before it in LAYERS
(imports inside functions included: a lazy import is still a dependency)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "toolkit" / "rlft"
LAYERS = ["core", "envs", "sources", "codecs", "records", "hub", "builders", "policy", "train", "evaluate", "results",
          "cli"]


def rlft_imports(path: Path) -> list[tuple[int, str]]:
    """(line, first package under rlft) of every ``rlft.<package>`` import in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "rlft" and len(parts) > 1:
                found.append((node.lineno, parts[1]))
    return found


def upward_imports() -> list[str]:
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        own = path.relative_to(PACKAGE).parts[0]
        if own not in LAYERS:  # rlft/__init__.py
            continue
        for line, target in rlft_imports(path):
            if target in LAYERS and LAYERS.index(target) > LAYERS.index(own):
                wrong.append(f"{path.relative_to(PACKAGE)}:{line} imports rlft.{target}")
    return wrong


def test_every_package_is_a_known_layer():
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert packages <= set(LAYERS), packages - set(LAYERS)


def test_no_import_runs_back_up_the_layers():
    assert upward_imports() == []


def test_the_check_sees_an_upward_import(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from rlft.evaluate.runner import run_evaluation\n", encoding="utf-8")
    assert rlft_imports(module) == [(2, "evaluate")]
