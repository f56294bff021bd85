"""README and docs tables rendered from ``results/`` files, between markers, by one command (``rlft results render``).

A block ``<!-- results:NAME -->`` ... ``<!-- /results:NAME -->`` is replaced by the markdown of
``results/NAME.json`` (a benchmark table) or ``results/NAME/summary.json`` (an experiment's summary): its tables,
plot, notes, and a line with the seeds, the machine, the package versions, the commits and the command that
reproduces it. ``--check`` reports the blocks that differ from their files instead of writing. The pages that
hold blocks are the README and every ``docs/*.md``; a page's plots link the results folder it sees beside it
(``docs/results`` is a link to ``../results``, so the docs site carries the plots).
"""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath
from typing import Any

from rlft.core.errors import InvalidInputError
from rlft.core.io import atomic_write_text
from rlft.core.reading import read_json_mapping, read_yaml_mapping, require_file
from rlft.results.environment import machine_line
from rlft.results.reproduce import HEADLINES, expected_range, headline_key

OPEN_TAG = r"<!-- results:(?P<name>[\w./-]+) -->"
BLOCK = re.compile(rf"({OPEN_TAG}\n)(?P<body>.*?)(<!-- /results:(?P=name) -->)", re.S)
VERSION_KEYS = ("torch", "transformers", "trl", "peft", "gymnasium", "stable-baselines3")


OVERVIEW = "overview"
HEADLINE_BLOCK = "headlines"  # the README's few rows: those marked ``headline: true`` in rows.yaml
ROWS_FILENAME = "rows.yaml"


def result_file(results_dir: Path, name: str) -> Path:
    if PurePosixPath(name).is_absolute() or ".." in PurePosixPath(name).parts:
        # a page renders results/ only: "results:../secrets" would read (and publish) a file outside it (B6)
        raise InvalidInputError(f"the block results:{name} names a file outside {results_dir}",
                                hint="a block names a results file by its path under the results folder")
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
    return f"{mean} ± {format_value(cell['std'], fmt.lstrip('+'))} ({low}–{high})"  # a spread has no sign


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
    expected = expected_line(name, data)
    lines.append(f"<sub>{provenance(data)}</sub>")
    if expected:
        lines += ["", f"<sub>{expected}</sub>"]
    return "\n".join(lines) + "\n"


def _cell(summary: dict[str, Any], kind: str, label: str, key: str) -> Any:
    for table in summary.get("tables", []):
        if table.get("kind") != kind:
            continue
        for row in table["rows"]:
            if row["label"] == label:
                return row["cells"].get(key)
    return None


def _headline(summary: dict[str, Any]) -> tuple[str, str] | None:
    """The metric a row is judged by (success, else the reference-normalized score, else the score between random
    and the expert on the same episodes, else return) and its format."""
    reports = next((t for t in summary.get("tables", []) if t.get("kind") == "reports"), None)
    return headline_key(c["key"] for c in reports["columns"]) if reports else None


def expected_line(name: str, data: dict[str, Any]) -> str | None:
    """The range each policy's headline metric of a new seed is expected in (reproduce.py), or None."""
    headline = _headline(data) if data.get("kind") == "experiment" else None
    if headline is None:
        return None
    key, fmt = headline
    reports = next(t for t in data["tables"] if t.get("kind") == "reports")
    ranges = []
    for row in reports["rows"]:
        cell = row["cells"].get(key)
        interval = expected_range(cell["values"], key) if isinstance(cell, dict) and "mean" in cell else None
        if interval:
            ranges.append(f"{row['label']} {format_value(interval[0], fmt)} to {format_value(interval[1], fmt)}")
    if not ranges:
        return None
    label = dict((k, lab) for k, lab, _ in HEADLINES)[key]
    return (f"a new seed reproduces this when its {label} lands in (95% prediction interval of the "
            f"{len(data['seeds'])} seeds): {'; '.join(ranges)}; check one with `rlft results check {name} "
            f"--record seed-S.json`")


def _method(row: dict[str, Any]) -> str:
    """The row's method, a miss marked as one with what it missed (rows.yaml ``miss:``)."""
    return f"**miss**: {row['miss']}. {row['method']}" if row.get("miss") else str(row["method"])


def _metrics(summary: dict[str, Any]) -> tuple[str, str]:
    """(the LLM policies' headline metric, the baselines' on the same episodes) of a summary."""
    headline = _headline(summary)
    if not headline:
        return "-", "-"
    reports = next((t for t in summary["tables"] if t.get("kind") == "reports"), {"rows": []})
    llm = [r["label"] for r in reports["rows"] if r["label"].startswith("llm")]
    base = [r["label"] for r in reports["rows"] if not r["label"].startswith("llm")]
    key, fmt = headline
    llm_text = "; ".join(f"{lab} {format_cell(_cell(summary, 'reports', lab, key), fmt)}" for lab in llm)
    base_text = "; ".join(f"{lab} {format_cell(_cell(summary, 'reports', lab, key), fmt)}" for lab in base)
    agreement = [format_cell(_cell(summary, "reports", lab, "expert_agreement"), ".3f") for lab in llm]
    if any(a != "-" for a in agreement):
        llm_text += f" (agreement {', '.join(agreement)})"
    return f"{dict((k, lab) for k, lab, _ in HEADLINES)[key]}: {llm_text or 'no LLM in this row'}", base_text


def headlines_markdown(results_dir: Path) -> str:
    """The README's rows (``headline: true`` in rows.yaml): the LLM against the baselines, and where the whole row
    lives (docs/results.md)."""
    plan = read_yaml_mapping(results_dir / ROWS_FILENAME, "a mapping with a 'rows' list")
    lines = ["| row | task | what | LLM | baselines (same episodes) | seeds |", "|---|---|---|---|---|---|"]
    for row in plan.get("rows", []):
        path = results_dir / str(row.get("recipe")) / "summary.json"
        if not row.get("headline") or not path.is_file():
            continue
        summary = read_json_mapping(path, "an experiment summary")
        llm_text, base_text = _metrics(summary)
        short = f"**miss**: {row['short']}" if row.get("miss") and row.get("short") else row.get("short")
        lines.append(f"| {row['id']} | {row['task']} | {short or _method(row)} | {llm_text} | {base_text} | "
                     f"{len(summary.get('seeds', []))} |")
    return "\n".join(lines) + "\n"


def overview_markdown(results_dir: Path) -> str:
    """One line per planned row of ``results/rows.yaml``: the LLM's headline metric next to the baselines', the
    seeds and training cost from the row's summary, or why the row was not run."""

    plan = read_yaml_mapping(results_dir / ROWS_FILENAME, "a mapping with a 'rows' list")
    lines = ["| row | task | method | LLM | baselines (same episodes) | seeds | training | recipe |",
             "|---|---|---|---|---|---|---|---|"]
    for row in plan.get("rows", []):
        recipe = row.get("recipe")
        path = results_dir / str(recipe) / "summary.json" if recipe else None
        head = f"| {row['id']} | {row['task']} | {_method(row)} |"
        if path is None or not path.is_file():
            lines.append(f"{head} not run: {row.get('not_run', 'no results yet')} | | | | |")
            continue
        summary = read_json_mapping(path, "an experiment summary")
        llm_text, base_text = _metrics(summary)
        runs = next((t for t in summary["tables"] if t.get("kind") == "runs"), {"rows": []})
        training = "; ".join(
            f"{r['label']} {format_cell(r['cells'].get('global_step'), '.0f')} steps, "
            f"{format_cell(r['cells'].get('train_runtime_s'), '.0f')} s" for r in runs["rows"]
            if r["cells"].get("global_step") is not None)
        seeds = len(summary.get("seeds", []))
        note = f" {row['note']}" if row.get("note") else ""
        lines.append(f"{head} {llm_text}{note} | {base_text} | {seeds} | {training or '-'} | "
                     f"`make experiment NAME={recipe}` |")
    return "\n".join(lines) + "\n"


def _link(folder: Path, results_dir: Path, base: Path) -> str:
    """``folder`` (inside ``results_dir``) as a link from a page in ``base``: through ``base/<results_dir name>``
    when that is the same folder (a docs page's link to the results), else the plain relative path."""
    import os

    inside = folder.resolve().relative_to(results_dir.resolve())
    beside = base / results_dir.name
    root = Path(results_dir.name) if beside.is_dir() and beside.samefile(results_dir) else Path(
        os.path.relpath(results_dir.resolve(), base.resolve()))
    return (root / inside).as_posix()


def pages(root: Path) -> list[Path]:
    """The pages of a checkout that hold results blocks: its README and its docs pages."""
    candidates = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    return [p for p in candidates if p.is_file() and BLOCK.search(p.read_text(encoding="utf-8"))]


def render_text(text: str, results_dir: Path, base: Path) -> tuple[str, list[str]]:
    """``text`` with every results block re-rendered; also the names of the blocks whose content changed."""
    changed: list[str] = []

    def replace(match: re.Match) -> str:
        name = match.group("name")
        if name in (OVERVIEW, HEADLINE_BLOCK):
            body = (overview_markdown if name == OVERVIEW else headlines_markdown)(results_dir)
            if body != match.group("body"):
                changed.append(name)
            return match.group(1) + body + match.group(4)
        path = result_file(results_dir, name)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"{path} is not valid JSON: {exc}") from exc
        body = block_markdown(name, data, _link(path.parent, results_dir, base))
        if body != match.group("body"):
            changed.append(name)
        return match.group(1) + body + match.group(4)

    return BLOCK.sub(replace, text), changed


def check_block_tags(page: Path, text: str) -> None:
    """Every ``<!-- results:NAME -->`` needs its ``<!-- /results:NAME -->`` after it: an unclosed block would
    otherwise be skipped without a word (and a page of only unclosed ones called "no blocks")."""
    for match in re.finditer(OPEN_TAG, text):
        name = match.group("name")
        if f"<!-- /results:{name} -->" not in text[match.end():]:
            line = text.count("\n", 0, match.start()) + 1
            raise InvalidInputError(f"{page}: the block results:{name} opened at line {line} has no "
                                    f"<!-- /results:{name} --> after it",
                                    hint=f"add <!-- /results:{name} --> where the rendered block should end")


def render_readme(readme: Path, results_dir: Path, check: bool = False) -> list[str]:
    """Re-render ``readme``'s results blocks from ``results_dir`` (written atomically unless ``check``);
    return the names of the blocks that were (or, with ``check``, would be) changed."""

    if not readme.is_file():
        require_file(readme, "page", hint="pass a README or docs page holding <!-- results:NAME --> blocks")
    text = readme.read_text(encoding="utf-8")
    check_block_tags(readme, text)
    if not BLOCK.search(text):
        raise InvalidInputError(f"{readme} has no <!-- results:NAME --> blocks")
    new, changed = render_text(text, results_dir, readme.parent)
    if changed and not check:
        # a page that is a link (docs kept elsewhere) is updated where it lives; the link stays a link (B8)
        atomic_write_text(readme.resolve() if readme.is_symlink() else readme, new)
    return changed
