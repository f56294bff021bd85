"""``rlft data``: export exact FrozenLake Q-values, collect and serialize datasets, inspect and publish."""

from __future__ import annotations

from pathlib import Path

import typer

from rlft.cli import data_minari, data_serialize
from rlft.cli.common import command, finite
from rlft.core.errors import InvalidInputError

app = typer.Typer(no_args_is_help=True)

EXPORT_Q_ENVS = ("frozenlake",)
IMPORT_FORMATS = ("rlft4rl",)


@command(app, "export-q")
def export_q(
    env: str = typer.Argument(..., help="Environment: frozenlake."),
    map: str = typer.Option("4x4", "--map", help="4x4, 8x8, a text file with one row of S/F/H/G per line, or "
                                                 "randomNxN (a new map every episode, drawn into each prompt)."),
    maps: int = typer.Option(100, help="--map randomNxN: rows from the maps of seeds 0..N-1."),
    p: float = typer.Option(0.8, callback=finite, help="--map randomNxN: probability that a cell is ice."),
    pool: bool = typer.Option(False, "--pool/--no-pool", help="--map randomNxN: the dataset's episodes (training, "
                              "evaluation with its codec) meet only its --maps maps (seed s: map s mod N)."),
    slippery: bool = typer.Option(True, "--slippery/--no-slippery", help="Slippery ice (gymnasium default)."),
    gamma: float = typer.Option(0.99, callback=finite, help="Discount factor in (0, 1]."),
    out: Path = typer.Option(..., "--out", help="Dataset folder to write (Hub layout)."),
    csv: Path | None = typer.Option(None, "--csv", help="Also write the Gemma-experiment CSV here."),
    episodes: int = typer.Option(1000, help="Episodes of the greedy policy run to measure its success rate."),
    seed: int = typer.Option(0, min=0, help="Seed of the first measured episode (episode i uses seed + i)."),
    prompt_style: str = typer.Option("chat", help="chat (system + user messages) or plain (one string)."),
    wording: str = typer.Option("gemma", help="gemma (the Gemma GRPO experiment's prompt), compact (about half "
                                              "the tokens: legend in one system line, the grid alone) or position "
                                              "(the map in the system line, the position alone: for episodes)."),
    completions: str = typer.Option("optimal", help="optimal (one row per state) or all (one row per state and "
                                                    "action: format-only SFT, a task-naive start for GRPO)."),
    think: bool = typer.Option(False, "--think/--no-think", help="Completions <think>REASON</think><answer>A</answer>, "
                                                                  "the reason read from the state's Q-values."),
    card_extra: Path | None = typer.Option(None, help="Markdown file of dataset-specific prose for the card."),
    overwrite: bool = typer.Option(False, help="Replace a non-empty --out (atomically)."),
) -> None:
    """Exact Q*(s,a) of FrozenLake by value iteration, as a Hub-layout dataset with prompts and a card."""

    if env.lower() not in EXPORT_Q_ENVS:
        raise InvalidInputError(f"export-q supports {', '.join(EXPORT_Q_ENVS)}, not {env!r}")
    if episodes < 1:
        raise InvalidInputError(f"--episodes must be at least 1, got {episodes}")
    from rlft.datasets.frozenlake_q.export import ExportQConfig, export_frozenlake_q

    config = ExportQConfig(
        map=map,
        maps=maps,
        p=p,
        pool=pool,
        slippery=slippery,
        gamma=gamma,
        out=out,
        csv=csv,
        episodes=episodes,
        seed=seed,
        prompt_style=prompt_style,
        wording=wording,
        completions=completions,
        think=think,
        card_extra=card_extra,
        overwrite=overwrite,
    )
    export_frozenlake_q(config)


# Commands defined in their own modules (each its own Typer group) join this one, in the order of --help.
for _group in (data_minari.app, data_serialize.app):
    app.registered_commands += _group.registered_commands


@command(app, "import")
def import_(
    source_format: str = typer.Argument(..., metavar="FORMAT", help="rlft4rl (RLFT4RL's JSON-lines SFT file)."),
    path: Path = typer.Argument(..., help="The file to import."),
    env: str = typer.Option(..., "--env", help="Gymnasium id of the environment the file's steps came from."),
    out: Path = typer.Option(..., "--out", help="Dataset folder to write (Hub layout)."),
    validation: float = typer.Option(0.1, callback=finite, help="Share of rows (drawn at random: the file has no "
                                     "episodes) for the validation split."),
    seed: int = typer.Option(0, min=0, help="Seed of the row split."),
    overwrite: bool = typer.Option(False, help="Replace a non-empty --out (atomically)."),
) -> None:
    """Another tool's dataset file -> an rlft dataset folder (codec inferred and saved, card written)."""

    if source_format not in IMPORT_FORMATS:
        raise InvalidInputError(f"data import reads {', '.join(IMPORT_FORMATS)}, not {source_format!r}")
    from rlft.datasets.import_rlft4rl import ImportConfig, import_rlft4rl

    import_rlft4rl(ImportConfig(path=path, env_id=env, out=out, validation=validation, seed=seed,
                                overwrite=overwrite))


@command(app, "improve")
def improve(
    dataset: Path = typer.Argument(..., help="rlft dataset folder with continuous (Box) actions."),
    expert: Path = typer.Option(..., "--expert", help="SB3 checkpoint (.zip) of the data's expert: it continues "
                                                      "after each candidate action (its k-step Q)."),
    out: Path = typer.Option(..., "--out", help="Dataset folder to write (the source's layout and codec)."),
    rows: int = typer.Option(20_000, min=1, help="First rows of --split to relabel (and keep)."),
    split: str = typer.Option("train", help="Split to relabel; the others are copied unchanged."),
    horizon: int = typer.Option(20, min=1, help="Steps each candidate is scored over (the first is its own)."),
    candidates: int = typer.Option(8, min=2, help="Candidates per row: the recorded action and perturbations."),
    noise: float = typer.Option(0.1, callback=finite, help="Perturbation std, as a fraction of each dimension's "
                                                           "half-range."),
    gamma: float = typer.Option(0.99, callback=finite, help="Discount over the horizon."),
    weighting: str = typer.Option("soft", help="soft (candidates weighted by softmax of standardized Q) or best."),
    mirrored: bool = typer.Option(False, help="Draw perturbations in opposite pairs (odd --candidates): the soft "
                                              "label moves only by what the values say."),
    step: float = typer.Option(1.0, callback=finite, help="Move each label this many times the way from the recorded "
                                                          "to the improved action (> 1 extrapolates)."),
    consistency_rows: int = typer.Option(200, min=0, help="Rows relabelled a second time, independently, to measure "
                                                          "the learnable share of the label change (0: skip)."),
    seed: int = typer.Option(0, min=0, help="Seeds the perturbations."),
    overwrite: bool = typer.Option(False, help="Replace a non-empty --out (atomically)."),
) -> None:
    """Q-improved labels: each recorded action moved toward the best of its perturbations under the expert's k-step
    Q, played in the real environment (one step of policy improvement for an imitator to learn)."""

    from rlft.core.console import console, kv_table
    from rlft.datasets.improve import ImproveConfig, improve_dataset

    summary = improve_dataset(ImproveConfig(dataset=dataset, expert=expert, out=out, rows=rows, split=split,
                                            horizon=horizon, candidates=candidates, noise=noise, gamma=gamma,
                                            weighting=weighting, mirrored=mirrored, step=step,
                                            consistency_rows=consistency_rows, seed=seed, overwrite=overwrite))
    console.print(kv_table(f"Improved labels -> {out}", summary))
