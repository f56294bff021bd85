"""``rlft data export-q frozenlake``: solve, measure, and write the FrozenLake Q dataset folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlft.codecs.grid import WORDINGS, FrozenLakeGridCodec
from rlft.codecs.template import PROMPT_STYLES
from rlft.core.console import console, kv_table, progress
from rlft.core.errors import InvalidInputError
from rlft.core.io import check_output_dir, check_output_file, staged_text
from rlft.datasets.card import CardSpec, message_text, read_extra_markdown
from rlft.datasets.folder import write_dataset_folder
from rlft.datasets.frozenlake_q.records import COMPLETIONS, GLOSSARY, build_q_records, to_gemma_csv
from rlft.datasets.frozenlake_q.solve import (
    QSolution,
    TabularModel,
    check_gamma,
    measure_success_rate,
    solve_q,
    success_probability,
)
from rlft.envs.frozenlake import ENV_ID, LakeMap, load_map


@dataclass
class ExportQConfig:
    map: str = "4x4"
    slippery: bool = True
    gamma: float = 0.99
    out: Path = Path("datasets/frozenlake-q")
    csv: Path | None = None
    episodes: int = 1000
    seed: int = 0
    prompt_style: str = "chat"
    wording: str = "gemma"
    completions: str = "optimal"
    think: bool = False
    card_extra: Path | None = None
    overwrite: bool = False


@dataclass
class ExportQResult:
    lake: LakeMap
    solution: QSolution
    summary: dict


def _validate(config: ExportQConfig) -> LakeMap:
    """Every check runs before anything is computed or written."""
    lake = load_map(config.map)
    check_gamma(config.gamma)
    if config.prompt_style not in PROMPT_STYLES:
        raise InvalidInputError(f"--prompt-style must be one of {PROMPT_STYLES}, got {config.prompt_style!r}")
    if config.wording not in WORDINGS:
        raise InvalidInputError(f"--wording must be one of {', '.join(WORDINGS)}, got {config.wording!r}")
    if config.completions not in COMPLETIONS:
        raise InvalidInputError(f"--completions must be one of {', '.join(COMPLETIONS)}, got {config.completions!r}")
    inputs = [("--card-extra", config.card_extra), ("--map", config.map)]  # a named map (4x4) is no path: skipped
    check_output_dir(config.out, config.overwrite, inputs=inputs)
    if config.csv is not None:
        out, csv = Path(config.out).absolute().resolve(), Path(config.csv).absolute().resolve()
        if out == csv or out in csv.parents:
            raise InvalidInputError(f"--csv {config.csv} lies inside --out {config.out}, which is written as a whole",
                                    hint="write the CSV next to the dataset folder, not inside it")
        check_output_file(config.csv, config.overwrite, "--csv", inputs=inputs)
    read_extra_markdown(config.card_extra)  # a missing or unreadable file is refused before any work
    return lake


def solve_frozenlake(lake: LakeMap, slippery: bool, gamma: float) -> tuple[TabularModel, QSolution, int]:
    """Q* for ``lake`` read from the real environment's transition tables; also return its step limit."""
    env = lake.make_env(slippery)
    try:
        model = TabularModel.from_env(env)
        max_steps = env.spec.max_episode_steps
    finally:
        env.close()
    return model, solve_q(model, gamma), max_steps


def export_frozenlake_q(config: ExportQConfig) -> ExportQResult:
    """Build the dataset folder at ``config.out`` (atomically) and print a summary table."""
    lake = _validate(config)
    model, solution, max_steps = solve_frozenlake(lake, config.slippery, config.gamma)
    if not solution.v[lake.start_state] > 0:
        raise InvalidInputError("the goal cannot be reached from the start on this map: every action is optimal "
                                "everywhere, so the dataset would teach nothing",
                                hint="give a map with a path of ice (F) from S to G")
    codec = FrozenLakeGridCodec.for_map(lake, config.slippery, config.prompt_style, config.wording)
    frame = build_q_records(lake, solution, codec, completions=config.completions, think=config.think)

    policy = solution.greedy_policy()
    goal = np.array([c == "G" for c in "".join(lake.rows)])
    exact_success = success_probability(model, policy, lake.start_state, goal, max_steps)
    with progress() as bar:
        task = bar.add_task("greedy policy episodes", total=config.episodes)
        measured = measure_success_rate(
            lambda: lake.make_env(config.slippery), policy, config.episodes, config.seed, lambda: bar.advance(task)
        )

    summary = {
        "env_id": ENV_ID,
        "map": lake.name,
        "size": f"{lake.nrow}x{lake.ncol}",
        "slippery": config.slippery,
        "gamma": config.gamma,
        "rows": len(frame),
        "decision states": int(frame["state"].nunique()),
        "V*(start)": float(solution.v[lake.start_state]),
        "Bellman residual": solution.residual,
        "solver sweeps": solution.iterations,
        f"optimal success, exact (<= {max_steps} steps)": exact_success,
        "optimal success, measured": measured["success_rate"],
        "measured stderr": measured["success_rate_stderr"],
        "episodes measured": config.episodes,
    }
    csv_text = to_gemma_csv(frame).to_csv(index=False) if config.csv is not None else ""
    with staged_text(config.csv, csv_text, "--csv"):  # the CSV and the dataset land together, or neither does
        _write(config, lake, solution, codec, frame, measured, exact_success, max_steps)
    console.print(kv_table(f"FrozenLake Q* ({lake.name}) -> {config.out}", summary))
    return ExportQResult(lake, solution, summary)


def _write(config, lake, solution, codec, frame, measured, exact_success, max_steps) -> None:
    import gymnasium
    import pyarrow as pa

    example = frame.iloc[0]
    prompt_text = message_text(example["prompt"])
    completion_text = example["completion"]
    if isinstance(completion_text, list):
        completion_text = completion_text[-1]["content"]
    context = {
        "env_id": ENV_ID,
        "gymnasium_version": gymnasium.__version__,
        "map_name": lake.name,
        "map_text": "\n".join(lake.rows),
        "nrow": lake.nrow,
        "ncol": lake.ncol,
        "slippery": config.slippery,
        "gamma": config.gamma,
        "method": solution.method,
        "iterations": solution.iterations,
        "residual": solution.residual,
        "v_start": float(solution.v[lake.start_state]),
        "exact_success": exact_success,
        "success_rate": measured["success_rate"],
        "success_stderr": measured["success_rate_stderr"],
        "episodes": measured["episodes"],
        "seed": measured["seed"],
        "max_episode_steps": max_steps,
        "n_tied": int(frame.drop_duplicates("state")["optimal_actions"].map(len).gt(1).sum()),
        "n_rows": len(frame),
        "n_states": int(frame["state"].nunique()),
        "glossary": GLOSSARY,
        "prompt_style": config.prompt_style,
        "wording": config.wording,
        "completions": config.completions,
        "think": config.think,
        "example_state": int(example["state"]),
        "example_prompt": prompt_text,
        "example_completion": completion_text,
    }
    with write_dataset_folder(config.out, config.overwrite) as folder:
        folder.write_split("train", pa.Table.from_pandas(frame, preserve_index=False))
        folder.save_codec(codec)
        folder.write_info({"kind": "frozenlake-q", **{k: v for k, v in context.items() if k != "glossary"}})
        folder.write_card(
            CardSpec(
                pretty_name=f"FrozenLake {lake.nrow}x{lake.ncol} exact Q-values",
                template="frozenlake_q.md",
                splits={"train": len(frame)},
                tags=["frozenlake", "q-values", "gymnasium", "grpo"],
                context=context,
                extra_markdown=read_extra_markdown(config.card_extra),
            )
        )
