"""Dataset cards: the Hub YAML header (via ``huggingface_hub.DatasetCardData``) + a markdown template."""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from rlft.core.reading import read_text_file
from rlft.core.secrets import redact_text
from rlft.datasets.layout import data_files_config

TEMPLATES = resources.files("rlft.datasets") / "templates"


def size_category(n: int) -> str:
    """The Hub's size_categories bucket for ``n`` rows."""
    for limit, name in [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")]:
        if n < limit:
            return name
    return "1M<n<10M" if n < 10_000_000 else "10M<n<100M"


@dataclass
class CardSpec:
    """What a card says. ``template`` names a file in ``rlft/datasets/templates``; ``context`` fills it."""

    pretty_name: str
    template: str
    splits: dict[str, int]  # split -> rows
    tags: list[str] = field(default_factory=list)
    task_categories: list[str] = field(default_factory=lambda: ["reinforcement-learning", "text-generation"])
    license: str = "apache-2.0"
    context: dict[str, Any] = field(default_factory=dict)
    extra_markdown: str = ""  # dataset-specific prose, e.g. from datasets_cards/<name>.md


def card_data(spec: CardSpec):
    """The Hub's YAML header of a card (``huggingface_hub``'s own ``DatasetCardData``)."""
    from huggingface_hub.repocard_data import DatasetCardData

    return DatasetCardData(
        license=spec.license,
        pretty_name=spec.pretty_name,
        task_categories=spec.task_categories,
        tags=sorted(set(["rlft", *spec.tags])),
        size_categories=[size_category(sum(spec.splits.values()))],
        configs=data_files_config(list(spec.splits)),
    )


def render_card(spec: CardSpec) -> str:
    """The README.md text: YAML header the Hub reads + the rendered markdown body.

    This is what ``DatasetCard.from_template`` does (jinja2 with ``card_data`` as YAML), without importing
    ``huggingface_hub``'s Hub client, which costs a third of a second in every ``rlft data`` command.
    """
    import jinja2

    data = card_data(spec)
    template = jinja2.Template((TEMPLATES / spec.template).read_text(encoding="utf-8"))
    return template.render(card_data=data.to_yaml(), **{
        **data.to_dict(), "pretty_name": spec.pretty_name, "splits": spec.splits,
        "extra_markdown": spec.extra_markdown.strip(), **spec.context,
    })


def render_card_with_hub_client(spec: CardSpec) -> str:
    """The card as ``huggingface_hub.DatasetCard`` renders it (tests hold :func:`render_card` to it)."""
    from huggingface_hub import DatasetCard

    template = (TEMPLATES / spec.template).read_text(encoding="utf-8")
    card = DatasetCard.from_template(
        card_data(spec),
        template_str=template,
        pretty_name=spec.pretty_name,
        splits=spec.splits,
        extra_markdown=spec.extra_markdown.strip(),
        **spec.context,
    )
    return str(card)


def read_extra_markdown(path: str | Path | None) -> str:
    """Dataset-specific prose for a card (a file under ``datasets_cards/``); empty when not given."""
    if not path:
        return ""

    # the card is published (data push): a password in a URL or a token typed in the notes is masked there
    return redact_text(read_text_file(path, "--card-extra file"))


def message_text(value) -> str:
    """A prompt or completion as card text: a string as is, chat messages as ``[role]`` blocks."""
    if isinstance(value, list):
        return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in value)
    return str(value)
