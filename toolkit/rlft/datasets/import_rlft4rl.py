"""``rlft data import rlft4rl``: RLFT4RL's JSON-lines SFT file -> an rlft dataset folder, so its users can move.

RLFT4RL (``src/rlft4rl/data/d4rl.py``) writes one JSON object per step: ``{"observation": "<observation>v1,v2,..
</observation>", "action": "<action>a1,a2</action>"}`` (older versions: chat ``messages`` with the same texts in
the user and assistant turns, values separated by ", " inside spaced tags). The values are read back, checked
against the environment's spaces, and written with the ``rlft4rl`` profile, so the prompts are RLFT4RL's again
and rlft's trainers, rewards and evaluation read them. The file holds no episode boundaries and no rewards: every
row is one step of episode 0 with reward NaN, rows are split at random, and the card says so.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from rlft.core.console import console, kv_table
from rlft.core.errors import InvalidInputError
from rlft.core.io import check_output_dir
from rlft.core.reading import require_file
from rlft.datasets.import_config import IMPORT_FORMATS, ImportConfig
from rlft.envs.registry import make_env

_OBS = re.compile(r"<observation>(.*?)</observation>", re.S)
_ACT = re.compile(r"<action>(.*?)</action>", re.S)


def _texts(record, line: int) -> tuple[str, str]:
    """The observation and action texts of one JSON line, in either of RLFT4RL's layouts."""
    if isinstance(record, dict) and "observation" in record and "action" in record:
        return str(record["observation"]), str(record["action"])
    if isinstance(record, dict) and isinstance(record.get("messages"), list):
        by_role = {m.get("role"): str(m.get("content", "")) for m in record["messages"]
                   if isinstance(m, dict) and isinstance(m.get("role"), str)}  # a list as role: pass 15, B14
        if "user" in by_role and "assistant" in by_role:
            return by_role["user"], by_role["assistant"]
    raise InvalidInputError(f"line {line}: not an RLFT4RL record (expected observation/action texts or chat "
                            f"messages with a user and an assistant turn)")


def _values(pattern: re.Pattern, text: str, what: str, line: int) -> np.ndarray:
    match = pattern.search(text)
    inner = match.group(1) if match else None
    if inner is None:
        raise InvalidInputError(f"line {line}: no <{what}>...</{what}> in {text[:80]!r}")
    tokens = inner.replace(",", " ").split()
    try:
        values = np.array([float(t) for t in tokens], dtype=np.float64)
    except ValueError as exc:
        raise InvalidInputError(f"line {line}: {what} values are not numbers: {inner[:80]!r}") from exc
    if not len(values) or not np.isfinite(values).all():
        raise InvalidInputError(f"line {line}: {what} is empty or holds NaN/inf")
    return values


MAX_LINE_CHARS = 1_000_000  # one record: an observation and an action as text


def read_rlft4rl(path: Path) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """(observations (N, D), actions (N, A), the file line of each row) of an RLFT4RL JSON-lines file, every line
    checked."""
    path = Path(path)
    require_file(path, "RLFT4RL file")
    observations, actions, lines = [], [], []
    try:
        with path.open(encoding="utf-8") as handle:
            for line, text in enumerate(iter(lambda: handle.readline(MAX_LINE_CHARS + 1), ""), start=1):
                if len(text) > MAX_LINE_CHARS:  # read in full, a 1 GiB line took 2.2 GB first (hostile pass 15)
                    raise InvalidInputError(f"{path} line {line} is longer than {MAX_LINE_CHARS:,} characters",
                                            hint="an RLFT4RL record is one short JSON object a line")
                if not text.strip():
                    continue
                try:
                    record = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise InvalidInputError(f"{path} line {line} is not JSON: {exc.msg}") from exc
                obs_text, act_text = _texts(record, line)
                observations.append(_values(_OBS, obs_text, "observation", line))
                actions.append(_values(_ACT, act_text, "action", line))
                lines.append(line)
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{path} is not UTF-8 text (an RLFT4RL file is JSON lines)") from exc
    if not observations:
        raise InvalidInputError(f"{path} holds no records")
    for name, rows in (("observation", observations), ("action", actions)):
        odd = next((i for i, r in enumerate(rows) if len(r) != len(rows[0])), None)
        if odd is not None:
            raise InvalidInputError(f"{path} line {lines[odd]}: the {name} has {len(rows[odd])} values, line "
                                    f"{lines[0]}'s has {len(rows[0])}")
    return np.stack(observations), np.stack(actions), lines


def _outside(rows: np.ndarray, box) -> np.ndarray:
    """Indices of the ``rows`` with a value outside the Box ``box``."""
    low, high = box.low.reshape(-1), box.high.reshape(-1)
    return np.flatnonzero(np.any((rows < low) | (rows > high), axis=1))


def _check_against_env(env_id: str, obs: np.ndarray, act: np.ndarray, lines: list[int]):
    env = make_env(env_id)
    obs_space, act_space = env.observation_space, env.action_space
    env.close()
    from gymnasium import spaces

    if not isinstance(obs_space, spaces.Box) or int(np.prod(obs_space.shape)) != obs.shape[1]:
        raise InvalidInputError(f"the file's observations have {obs.shape[1]} values; {env_id} observes {obs_space}")
    outside = _outside(obs, obs_space)
    if len(outside):  # such a row was not observed in this environment: the file is of another one, or damaged
        row = int(outside[0])
        raise InvalidInputError(f"{len(outside)} of the file's observations lie outside {env_id}'s observation space "
                                f"(first: line {lines[row]}, {obs[row].tolist()})",
                                hint="check --env and the file")
    if isinstance(act_space, spaces.Discrete):
        ints = act[:, 0]
        if act.shape[1] != 1:
            raise InvalidInputError(f"the file's actions have {act.shape[1]} values; {env_id} acts in {act_space}")
        bad = np.flatnonzero((ints != np.rint(ints)) | (ints < act_space.start) |
                             (ints >= act_space.start + act_space.n))
        if len(bad):
            row = int(bad[0])
            raise InvalidInputError(f"line {lines[row]}: action {act[row, 0]:g} is not an integer of {env_id}'s "
                                    f"{act_space} ({len(bad)} such rows)")
        return obs_space, act_space, ints.astype(np.int64)
    if not isinstance(act_space, spaces.Box) or int(np.prod(act_space.shape)) != act.shape[1]:
        raise InvalidInputError(f"the file's actions have {act.shape[1]} values; {env_id} acts in {act_space}")
    low, high = act_space.low.reshape(-1), act_space.high.reshape(-1)
    outside = _outside(act, act_space)
    if len(outside):
        row = int(outside[0])
        raise InvalidInputError(f"{len(outside)} of the file's actions lie outside {env_id}'s action space "
                                f"[{low.tolist()}, {high.tolist()}] (first: line {lines[row]}, {act[row].tolist()})",
                                hint="an env would clip them: fix the file, or clip the actions before importing")
    return obs_space, act_space, act.astype(np.float32)


def import_rlft4rl(config: ImportConfig) -> dict:
    """Write the dataset folder for an RLFT4RL file; returns its summary."""
    if config.source_format not in IMPORT_FORMATS:
        raise InvalidInputError(f"data import reads {', '.join(IMPORT_FORMATS)}, not {config.source_format!r}")
    from rlft.codecs.factory import make_codec
    from rlft.datasets.card import CardSpec
    from rlft.datasets.folder import write_dataset_folder
    from rlft.datasets.offline import GLOSSARY, EpisodeChunk, build_records

    if not 0.0 <= config.validation < 1.0:
        raise InvalidInputError(f"--validation must be in [0, 1), got {config.validation}")
    check_output_dir(config.out, config.overwrite, inputs=[("file", config.path)])
    obs, act, lines = read_rlft4rl(config.path)
    obs_space, act_space, actions = _check_against_env(config.env_id, obs, act, lines)
    codec = make_codec("raw", obs_space, act_space, profile="rlft4rl", env_id=config.env_id)
    n = len(obs)
    order = np.random.default_rng(config.seed).permutation(n)
    n_val = int(round(config.validation * n)) if n > 1 else 0
    if n_val >= n > 1:  # every row rounded into validation: no train split (pass 17, B8: a KeyError)
        raise InvalidInputError(f"--validation {config.validation:g} of {n} rows leaves none to train on",
                                hint=f"give at most {(n - 1) / n:.2f}, or more rows")
    parts = {"train": np.sort(order[n_val:]), "validation": np.sort(order[:n_val])}
    parts = {k: v for k, v in parts.items() if len(v)}

    def chunk(rows: np.ndarray) -> EpisodeChunk:
        return EpisodeChunk(obs[rows], actions[rows], np.full(len(rows), np.nan), np.zeros(len(rows), bool),
                            np.zeros(len(rows), bool), np.zeros(len(rows), np.int64), rows.astype(np.int64))

    summary = {"kind": "imported", "source": str(config.path), "source_format": "rlft4rl", "env_id": config.env_id,
               "codec": codec.describe(), "profile": "rlft4rl", "rows": n,
               "splits": {k: int(len(v)) for k, v in parts.items()}, "seed": config.seed,
               "episode_boundaries": False, "rewards": False}
    with write_dataset_folder(config.out, config.overwrite) as folder:
        tables = {name: build_records(chunk(rows), codec) for name, rows in parts.items()}
        for name, table in tables.items():
            folder.write_split(name, table)
        folder.save_codec(codec)
        folder.write_info(summary)
        example = tables["train"].slice(0, 1).to_pylist()[0]
        folder.write_card(CardSpec(
            pretty_name=f"{config.env_id} imported from RLFT4RL ({config.path.name})",
            template="imported.md", splits={name: 0 for name in parts},
            tags=[config.env_id.split("-")[0].lower(), "offline-rl", "rlft4rl"],
            context={"summary": summary, "env_id": config.env_id, "source": config.path.name,
                     "codec": codec.describe(), "example_prompt": example["prompt"],
                     # no episodes in the file: no next observation column
                     "glossary": {k: v for k, v in GLOSSARY.items()
                                  if k not in ("next_observation", "executed_action")},
                     "example_completion": example["completion"]},
        ))
    console.print(kv_table("Imported RLFT4RL file", [(k, summary[k]) for k in
                                                     ("source", "env_id", "rows", "splits", "codec")]))
    console.print("[yellow]the file holds no episode boundaries and no rewards: rows are split at random and the "
                  "reward and return_to_go columns are NaN[/]")
    return summary
