"""``rlft data serialize`` and ``rlft data push``: prompt/completion Hub datasets from Minari sources."""

from __future__ import annotations

from pathlib import Path

import typer

from rlft.cli.common import command, finite
from rlft.core.console import console
from rlft.core.errors import InvalidInputError

# Its own group, whose commands ``rlft data`` takes in (rlft.cli.data): imports run one way.
app = typer.Typer()


def _fractions(text: str) -> tuple[float, float, float]:
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError as exc:
        raise InvalidInputError(f"--splits {text!r} is not three numbers like 0.8,0.1,0.1") from exc
    if len(values) != 3:
        raise InvalidInputError(f"--splits {text!r} needs three fractions: train,validation,test")
    return values  # type: ignore[return-value]


@command(app, "serialize")
def serialize(
    source: str = typer.Argument(..., help="Minari dataset id (NAMESPACE/NAME-vK) or a dataset folder."),
    out: Path = typer.Option(..., "--out", help="Dataset folder to write (Hub layout)."),
    format: str = typer.Option("raw", "--format", help="raw | discretized | tokenized | binned (one token per "
                                                       "value: quantile bins of both spaces, decoded to their data "
                                                       "means; made for continuous control)."),
    precision: int = typer.Option(3, help="raw: decimals per value."),
    bins: int = typer.Option(32, help="discretized, binned: bins per dimension."),
    edges_from: str = typer.Option("data", help="discretized, binned: bin edges from 'data' quantiles or space "
                                                "'bounds'."),
    tokens: int = typer.Option(1000, help="tokenized: integer tokens per value (0..N-1)."),
    prompt_style: str = typer.Option("plain", help="plain (<observation> tags) or chat (system + user messages)."),
    history: int = typer.Option(0, help="Previous (observation, action) pairs in each prompt."),
    turns: int = typer.Option(0, help="K > 1: each prompt is the episode so far as a conversation of its last K "
                                      "turns (observation, recorded answer), the format episodic GRPO "
                                      "(train grpo --rollout episode --max-turns K) and evaluation play in."),
    return_to_go: bool = typer.Option(False, "--return-to-go/--no-return-to-go", help="Condition on return-to-go."),
    splits: str = typer.Option("0.8,0.1,0.1", help="Fractions of episodes: train,validation,test."),
    seed: int = typer.Option(0, min=0, help="Seed of the episode split."),
    drop_nonfinite: bool = typer.Option(False, help="Drop episodes holding NaN/inf instead of refusing."),
    max_episodes: int | None = typer.Option(None, help="Use only the first N episodes."),
    download: bool = typer.Option(False, help="Download a remote Minari dataset if it is not local."),
    card_extra: Path | None = typer.Option(None, help="Markdown file of dataset-specific prose for the card."),
    plot: bool = typer.Option(False, help="Draw plots/returns.png (return histogram and per episode) for the card; "
                                          "importing matplotlib adds about half a second."),
    allow_large_observations: bool = typer.Option(False, help="Serialize observations of more than 1,024 values "
                                                              "(images) as text anyway."),
    separator: str = typer.Option(" ", help="Between the values of an observation or action: ' ' or ','."),
    prefill: bool = typer.Option(False, "--prefill/--no-prefill",
                                 help="End plain prompts with the answer's opening tag (completions: v1 v2</action>)."),
    profile: str | None = typer.Option(None, help="rlft4rl: RLFT4RL's format (',' between values, 5 decimals, its "
                                                  "prompt layout with <action> prefilled, int() tokens)."),
    system: str | None = typer.Option(None, help="System text of the prompt (chat style and the rlft4rl profile)."),
    overwrite: bool = typer.Option(False, help="Replace a non-empty --out (atomically)."),
) -> None:
    """Serialize a Minari dataset into prompt/completion records with a reversible codec."""
    from rlft.datasets.serialize import serialize as run
    from rlft.datasets.serialize_options import SerializeConfig

    run(
        SerializeConfig(
            source=source, out=out, format=format, precision=precision, bins=bins, edges_from=edges_from,
            tokens=tokens, prompt_style=prompt_style, history=history, turns=turns,
            return_to_go=return_to_go,
            splits=_fractions(splits), seed=seed, drop_nonfinite=drop_nonfinite, max_episodes=max_episodes,
            download=download, card_extra=card_extra, plot=plot, allow_large_observations=allow_large_observations,
            separator=separator, prefill=prefill, profile=profile, system=system, overwrite=overwrite,
        )
    )


@command(app, "push")
def push(
    folder: Path = typer.Argument(..., help="Dataset folder written by rlft."),
    repo_id: str = typer.Option(..., "--repo-id", help="USER/NAME of the Hub dataset repo."),
    private: bool = typer.Option(False, help="Create the repo as private."),
    revision: str | None = typer.Option(None, help="Branch to push to (created if missing)."),
    token: str | None = typer.Option(None, help="Hub token (default: HF_TOKEN or the saved login)."),
    timeout: float = typer.Option(900.0, "--timeout", callback=finite, min=0.001,
                                  help="Seconds the whole push may take (each request waits at most 60 s)."),
) -> None:
    """Upload a dataset folder (Parquet, card, codec, plots) to the Hugging Face Hub."""
    from rlft.datasets.push import push_dataset

    url = push_dataset(folder, repo_id, private=private, revision=revision, token=token, timeout=timeout)
    console.print(f"[green]Pushed[/] {folder} -> {url}")
