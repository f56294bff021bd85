"""Data flows one way: a package of rlft imports only from itself and the packages before it in LAYERS, and no
module imports itself back through others (imports inside functions included: a lazy import is still a
dependency)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "toolkit" / "rlft"
LAYERS = ["core", "envs", "sources", "codecs", "datasets", "models", "policy", "train", "evaluate", "results",
          "cli"]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the rlft modules it imports (``from rlft.a import b`` names ``rlft.a.b`` when that is a module)."""
    modules = {module_name(p) for p in package.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in package.rglob("*.py"):
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                deps |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                         for a in node.names}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names}
        graph[module_name(path)] = {d for d in deps if d in modules} - {module_name(path)}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = stack[stack.index(v):]
            del stack[stack.index(v):]
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


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


def test_no_import_circles():
    assert circles(import_graph()) == []


def test_the_check_sees_a_circle():
    graph = {"rlft.cli.a": {"rlft.cli.b"}, "rlft.cli.b": {"rlft.cli.c"}, "rlft.cli.c": {"rlft.cli.a"},
             "rlft.cli.d": {"rlft.cli.a"}}
    assert circles(graph) == [["rlft.cli.a", "rlft.cli.b", "rlft.cli.c"]]
