"""README tables rendered from ``results/`` files, between markers, by one command (``rlft results render``).

A block ``<!-- results:NAME -->`` ... ``<!-- /results:NAME -->`` is replaced by the markdown of
``results/NAME.json`` (a benchmark table) or ``results/NAME/summary.json`` (an experiment's summary): its tables,
plot, notes, and a line with the seeds, the machine, the package versions, the commits and the command that
reproduces it. ``--check`` reports the blocks that differ from their files instead of writing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from rlft.core.errors import InvalidInputError
from rlft.results.environment import machine_line

BLOCK = re.compile(r"(<!-- results:(?P<name>[\w./-]+) -->\n)(?P<body>.*?)(<!-- /results:(?P=name) -->)", re.S)
VERSION_KEYS = ("torch", "transformers", "trl", "peft", "gymnasium", "stable-baselines3")


def result_file(results_dir: Path, name: str) -> Path:
    for candidate in (results_dir / f"{name}.json", results_dir / name / "summary.json"):
        if candidate.is_file():
            return candidate
    raise InvalidInputError(f"the README block results:{name} has no file: neither {results_dir / name}.json nor "
                            f"{results_dir / name / 'summary.json'}", hint="run the experiment or benchmark first")


def format_value(value: Any, fmt: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if fmt == "x":  # a speed-up ratio
        return f"{value:.1f}x"
    if fmt.endswith("d") and isinstance(value, float):  # a mean of integers: integral when every seed agrees
        return format(round(value), fmt) if value == round(value) else format(value, fmt[:-1] + ".1f")
    return format(value, fmt)


def format_cell(cell: Any, fmt: str) -> str:
    """A value, or an aggregate over seeds: ``mean ± std (min–max)``; counts as ``k/n``."""
    if not isinstance(cell, dict):
        return format_value(cell, fmt)
    if "count" in cell:
        return f"{cell['count']}/{cell['n']}"
    mean = format_value(cell["mean"], fmt)
    if cell["n"] == 1:
        return mean
    low, high = format_value(cell["min"], fmt), format_value(cell["max"], fmt)
    if low == high:
        return f"{mean} (all {cell['n']})"
    return f"{mean} ± {format_value(cell['std'], fmt)} ({low}–{high})"


def table_markdown(table: dict[str, Any]) -> list[str]:
    columns = table["columns"]
    lines = ["| " + " | ".join([table.get("label_header", ""), *(c["label"] for c in columns)]) + " |",
             "|" + "---|" * (len(columns) + 1)]
    for row in table["rows"]:
        cells = [format_cell(row["cells"].get(c["key"]), c.get("format", "")) for c in columns]
        lines.append("| " + " | ".join([str(row["label"]), *cells]) + " |")
    return lines


def _versions_text(versions: dict[str, str]) -> str:
    return ", ".join(f"{k} {versions[k]}" for k in ("python", *VERSION_KEYS) if k in versions)


def provenance(data: dict[str, Any]) -> str:
    """One line: seeds, machine(s), versions, commit(s), the reproducing command."""
    parts = []
    seeds = data.get("seeds")
    if seeds:
        parts.append(f"{len(seeds)} seed{'s' if len(seeds) != 1 else ''} ({', '.join(map(str, seeds))})")
    machines = data.get("machines") or ([data["machine"]] if data.get("machine") else [])
    if machines:
        parts.append("; ".join(machine_line(m) for m in machines if m))
    versions = data.get("versions")
    versions = versions if isinstance(versions, list) else ([versions] if versions else [])
    if versions:
        parts.append(" / ".join(_versions_text(v) for v in versions if v))
    commits = data.get("commits") or ([data["commit"]] if data.get("commit") else [])
    if [c for c in commits if c]:
        parts.append("commit " + ", ".join(c for c in commits if c))
    if data.get("command"):
        parts.append(f"reproduce: `{data['command']}`")
    return " · ".join(parts)


def block_markdown(name: str, data: dict[str, Any], folder: str) -> str:
    """The markdown of one results file (``folder``: its folder relative to the README, for the plot)."""
    lines = []
    if data.get("title"):
        lines.append(f"**{data['title']}**" + (f": {data['description']}" if data.get("description") else ""))
        lines.append("")
    for table in data.get("tables", []):
        lines += table_markdown(table)
        lines.append("")
    for note in data.get("notes", []):
        lines.append(f"- {note}")
    if data.get("notes"):
        lines.append("")
    if data.get("plot"):
        lines.append(f"![{data.get('title', name)}]({folder}/{data['plot']})")
        lines.append("")
    lines.append(f"<sub>{provenance(data)}</sub>")
    return "\n".join(lines) + "\n"


def render_text(text: str, results_dir: Path, base: Path) -> tuple[str, list[str]]:
    """``text`` with every results block re-rendered; also the names of the blocks whose content changed."""
    changed: list[str] = []

    def replace(match: re.Match) -> str:
        name = match.group("name")
        path = result_file(results_dir, name)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"{path} is not valid JSON: {exc}") from exc
        folder = path.parent.resolve().relative_to(base.resolve()).as_posix()
        body = block_markdown(name, data, folder)
        if body != match.group("body"):
            changed.append(name)
        return match.group(1) + body + match.group(4)

    return BLOCK.sub(replace, text), changed


def render_readme(readme: Path, results_dir: Path, check: bool = False) -> list[str]:
    """Re-render ``readme``'s results blocks from ``results_dir`` (written atomically unless ``check``);
    return the names of the blocks that were (or, with ``check``, would be) changed."""
    from rlft.core.io import atomic_write_text

    if not readme.is_file():
        raise InvalidInputError(f"no README at {readme}")
    text = readme.read_text(encoding="utf-8")
    if not BLOCK.search(text):
        raise InvalidInputError(f"{readme} has no <!-- results:NAME --> blocks")
    new, changed = render_text(text, results_dir, readme.parent)
    if changed and not check:
        atomic_write_text(readme, new)
    return changed
