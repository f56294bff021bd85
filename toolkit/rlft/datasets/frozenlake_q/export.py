"""``rlft data export-q frozenlake``: solve, measure, and write the FrozenLake Q dataset folder."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlft.codecs.grid import FrozenLakeGridCodec
from rlft.core.console import console, kv_table, progress
from rlft.core.errors import InvalidInputError
from rlft.core.io import check_output_dir, staged_text
from rlft.core.output_file import check_output_file, starts_with
from rlft.datasets.card import CardSpec, message_text, read_extra_markdown
from rlft.datasets.folder import write_dataset_folder
from rlft.datasets.frozenlake_q.config import EXPORT_Q_ENVS, ExportQConfig
from rlft.datasets.frozenlake_q.records import (
    GEMMA_CSV_COLUMNS,
    GLOSSARY,
    build_q_records,
    to_gemma_csv,
)
from rlft.datasets.frozenlake_q.solve import (
    QSolution,
    TabularModel,
    check_gamma,
    measure_success_rate,
    solve_q,
    success_probability,
)
from rlft.envs.frozenlake import ENV_ID, MAX_EPISODE_STEPS, RANDOM_LAKE_ID, LakeMap, load_map, random_rows

# a random map's side: its shortest path (2 x (side - 1) steps) must fit in the env's 100-step episodes; a 51x51 or
# larger map was exported as "unreachable" when only the time limit stood in the way (hostile pass 19, B1)
MAX_RANDOM_SIZE = (MAX_EPISODE_STEPS - 1) // 2 + 1  # 50: its shortest path, 98 steps, fits
# the text the maps make, rows (about side^2 a map) x cells in each prompt (side^2): 10 maps of 64x64 (1.7e8) held
# 1.4 GB; --maps 100000 of them would have run for days (hostile pass 19, B1)
MAX_RANDOM_TEXT = 400_000_000
RANDOM_MAPS = re.compile(r"random(\d+)x(\d+)")  # --map random4x4: a new map every episode (rlft.envs.random_lake)


@dataclass
class ExportQResult:
    lake: LakeMap
    solution: QSolution
    summary: dict


def random_map_size(spec: str) -> int | None:
    """N of ``randomNxN`` (square only), None for any other map spec."""
    match = RANDOM_MAPS.fullmatch(spec)
    if not match:
        return None
    if match.group(1) != match.group(2) or not 2 <= int(match.group(1)) <= MAX_RANDOM_SIZE:
        side = MAX_RANDOM_SIZE
        raise InvalidInputError(f"--map {spec}: random maps are square, from 2x2 to {side}x{side} (a larger map's "
                                f"shortest path does not fit in the env's {MAX_EPISODE_STEPS}-step episodes)",
                                hint="e.g. --map random4x4")
    return int(match.group(1))


def _validate_random(config: ExportQConfig) -> None:
    side = random_map_size(config.map)
    if config.maps * side ** 4 > MAX_RANDOM_TEXT:
        most = max(1, MAX_RANDOM_TEXT // side ** 4)
        raise InvalidInputError(f"--maps {config.maps} of {side}x{side} would write about "
                                f"{config.maps * side ** 4:,} prompt cells (rows x cells a prompt), more than "
                                f"{MAX_RANDOM_TEXT:,}", hint=f"at most {most:,} maps of {side}x{side}")
    if not 0.0 < config.p <= 1.0:
        raise InvalidInputError(f"--p must be in (0, 1], got {config.p}")
    if config.wording == "position":
        raise InvalidInputError("--map random: the map changes every episode, so the prompt must show the grid",
                                hint="use --wording compact or gemma")
    if config.csv is not None:
        raise InvalidInputError("--csv writes the Gemma experiment's one-map table; random maps have many")


def _validate(config: ExportQConfig) -> LakeMap:
    """Every check runs before anything is computed or written."""
    if config.env.lower() not in EXPORT_Q_ENVS:
        raise InvalidInputError(f"export-q supports {', '.join(EXPORT_Q_ENVS)}, not {config.env!r}")
    size = random_map_size(config.map)
    if size is not None:
        _validate_random(config)
    lake = load_map(config.map) if size is None else LakeMap(config.map, random_rows(size, config.p, 0))
    check_gamma(config.gamma)
    inputs = [("--card-extra", config.card_extra), ("--map", config.map)]  # a named map (4x4) is no path: skipped
    check_output_dir(config.out, config.overwrite, inputs=inputs)
    if config.csv is not None:
        out, csv = Path(config.out).absolute().resolve(), Path(config.csv).absolute().resolve()
        if out == csv or out in csv.parents:
            raise InvalidInputError(f"--csv {config.csv} lies inside --out {config.out}, which is written as a whole",
                                    hint="write the CSV next to the dataset folder, not inside it")
        check_output_file(config.csv, config.overwrite, "--csv", inputs=inputs,
                          ours=starts_with(",".join(GEMMA_CSV_COLUMNS)))
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
    if random_map_size(config.map) is not None:
        return _export_random_maps(config, lake)
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


def _write(config, lake, solution, codec, frame, measured, exact_success, max_steps, extra=None) -> None:
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
        **(extra or {}),
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


def _export_random_maps(config: ExportQConfig, first: LakeMap) -> ExportQResult:
    """``--map randomNxN``: the rows of the maps of seeds ``0..maps-1`` (each map solved exactly), prompts with the
    grid drawn from the observation, and the codec of :data:`RANDOM_LAKE_ID`, whose episodes each meet the map of
    their seed. Its exact optimal success is the mean over these maps; there is no one Q-table to measure."""
    import pandas as pd

    size = first.nrow
    codec = FrozenLakeGridCodec.for_random_maps(size, config.p, config.slippery, config.prompt_style, config.wording,
                                                pool=config.maps if config.pool else None)
    frames, successes, starts = [], [], []
    with progress() as bar:
        task = bar.add_task("random maps solved", total=config.maps)
        for map_seed in range(config.maps):
            lake = LakeMap(f"random seed {map_seed}", random_rows(size, config.p, map_seed))
            model, solution, max_steps = solve_frozenlake(lake, config.slippery, config.gamma)
            frame = build_q_records(lake, solution, codec, completions=config.completions, think=config.think)
            frame.insert(0, "map_seed", map_seed)
            frames.append(frame)
            goal = np.array([c == "G" for c in "".join(lake.rows)])
            successes.append(success_probability(model, solution.greedy_policy(), lake.start_state, goal, max_steps))
            starts.append(float(solution.v[lake.start_state]))
            if map_seed == 0:
                first_solution = solution  # the card's example map is seed 0's
            bar.advance(task)
    frame = pd.concat(frames, ignore_index=True)
    exact_success = float(np.mean(successes))
    summary = {
        "env_id": RANDOM_LAKE_ID,
        "map": f"random {size}x{size}, p={config.p}, seeds 0..{config.maps - 1}",
        "slippery": config.slippery,
        "gamma": config.gamma,
        "rows": len(frame),
        "maps": config.maps,
        "decision states": int(frame[["map_seed", "state"]].drop_duplicates().shape[0]),
        "V*(start), mean over maps": float(np.mean(starts)),
        f"optimal success, exact (<= {max_steps} steps), mean over maps": exact_success,
        "maps the goal cannot be reached on": int(sum(s <= 0 for s in successes)),
    }
    measured = {"success_rate": None, "success_rate_stderr": None, "episodes": 0, "seed": config.seed}
    _write(config, first, first_solution, codec, frame, measured, exact_success, max_steps,
           extra={"env_id": RANDOM_LAKE_ID, "maps": config.maps, "p": config.p, "random_maps": True,
                  "pool": config.pool})
    console.print(kv_table(f"FrozenLake Q* (random {size}x{size} maps) -> {config.out}", summary))
    return ExportQResult(first, first_solution, summary)
