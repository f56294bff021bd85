"""FrozenLake maps: named or from a file, validated, rendered as text the same way everywhere."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlft.core.errors import InvalidInputError
from rlft.core.reading import read_text_file

ENV_ID = "FrozenLake-v1"
CELLS = frozenset("SFHG")
ACTION_NAMES = ("LEFT", "DOWN", "RIGHT", "UP")  # gymnasium's order: 0=LEFT 1=DOWN 2=RIGHT 3=UP
# The agent's cell is marked with "S", as in the Gemma FrozenLake GRPO experiment's CSV; the start cell shows
# as "F" when the agent is elsewhere, so the marker is never ambiguous.
AGENT_MARKER = "S"


@dataclass(frozen=True)
class LakeMap:
    """A validated FrozenLake grid: ``rows`` are strings of S/F/H/G, ``name`` says where it came from."""

    name: str
    rows: tuple[str, ...]

    @property
    def nrow(self) -> int:
        return len(self.rows)

    @property
    def ncol(self) -> int:
        return len(self.rows[0])

    @property
    def n_states(self) -> int:
        return self.nrow * self.ncol

    @property
    def start_state(self) -> int:
        flat = "".join(self.rows)
        return flat.index("S")

    def cell(self, state: int) -> str:
        return self.rows[state // self.ncol][state % self.ncol]

    def is_terminal(self, state: int) -> bool:
        return self.cell(state) in "HG"

    def make_env(self, slippery: bool = True, max_episode_steps: int | None = None, **kwargs):
        """Create the real gymnasium FrozenLake-v1 on this map."""
        import gymnasium as gym

        extra = {"max_episode_steps": max_episode_steps} if max_episode_steps else {}
        return gym.make(ENV_ID, desc=list(self.rows), is_slippery=slippery, **extra, **kwargs)


MAX_MAP_CELLS = 64 * 64  # value iteration, the Q-table and every prompt hold the whole grid (random maps: 64x64)


def validate_rows(rows: list[str], source: str) -> tuple[str, ...]:
    """Check a grid: non-empty, at most :data:`MAX_MAP_CELLS` cells, rectangular, only S/F/H/G, exactly one S and
    at least one G."""
    rows = [r.strip() for r in rows if r.strip()]
    if not rows:
        raise InvalidInputError(f"map {source} is empty", hint="one grid row per line of S/F/H/G")
    cells = sum(len(r) for r in rows)
    if cells > MAX_MAP_CELLS:
        raise InvalidInputError(f"map {source} has {cells:,} cells; rlft solves maps of at most {MAX_MAP_CELLS:,} "
                                "(64x64): the Q-table and every prompt hold the whole grid")
    widths = {len(r) for r in rows}
    if len(widths) != 1:
        raise InvalidInputError(
            f"map {source} has ragged rows (lengths {sorted(widths)})", hint="every row needs the same length"
        )
    bad = sorted({c for r in rows for c in r} - CELLS)
    if bad:
        raise InvalidInputError(f"map {source} has letters {bad} outside S/F/H/G", hint="use only S, F, H, G")
    flat = "".join(rows)
    if flat.count("S") != 1:
        raise InvalidInputError(f"map {source} needs exactly one S (start), found {flat.count('S')}")
    if "G" not in flat:
        raise InvalidInputError(f"map {source} has no G (goal)")
    return tuple(rows)


def load_map(spec: str) -> LakeMap:
    """Resolve ``4x4``, ``8x8`` (gymnasium's named maps) or a path to a text file with one row per line."""
    from gymnasium.envs.toy_text.frozen_lake import MAPS

    if spec in MAPS:
        return LakeMap(spec, tuple(MAPS[spec]))
    path = Path(spec)
    if path.exists() or path.is_symlink():  # a folder, a pipe or a device is named as such by the reader
        return LakeMap(path.name, validate_rows(read_text_file(path, "map file").splitlines(), str(path)))
    raise InvalidInputError(
        f"unknown map {spec!r}", hint=f"use one of {sorted(MAPS)} or the path of a text file of S/F/H/G rows"
    )


def map_rows(env_kwargs: dict | None) -> tuple[str, ...]:
    """The grid FrozenLake is made with for ``env_kwargs``: ``desc`` rows, else the named ``map_name``
    (gymnasium's default 4x4)."""
    from gymnasium.envs.toy_text.frozen_lake import MAPS

    kwargs = env_kwargs or {}
    if kwargs.get("desc"):
        return tuple("".join(row) if not isinstance(row, str) else row for row in kwargs["desc"])
    return tuple(MAPS[kwargs.get("map_name") or "4x4"])


def render_grid(lake: LakeMap, state: int, sep: str = " ", row_sep: str = "\n") -> str:
    """The grid as text with the agent's cell marked: the one rendering prompts, CSVs and cards share."""
    r, c = divmod(state, lake.ncol)
    lines = []
    for i, row in enumerate(lake.rows):
        cells = ["F" if ch == "S" else ch for ch in row]
        if i == r:
            cells[c] = AGENT_MARKER
        lines.append(sep.join(cells))
    return row_sep.join(lines)


# --------------------------------------------------------------------------------------------------------
# random maps (rlft.envs.random_lake): the map travels in the observation
# --------------------------------------------------------------------------------------------------------
RANDOM_LAKE_ID = "rlft/FrozenLakeRandom-v0"
CELL_CODES = "FHGS"  # observation code of each cell letter: F=0, H=1, G=2, S=3
MAX_EPISODE_STEPS = 100  # FrozenLake-v1's limit (the random-map env registers with it)


def is_frozenlake(env_id: str) -> bool:
    """Whether ``env_id`` is a FrozenLake (a fixed map or random maps): its return is 1 at the goal and 0 otherwise,
    so reports count successes."""
    return env_id.startswith("FrozenLake") or env_id == RANDOM_LAKE_ID


def random_rows(size: int, p: float, seed: int) -> tuple[str, ...]:
    """Gymnasium's random map for ``seed`` (a path from S to G is guaranteed; ``p``: probability of ice)."""
    from gymnasium.envs.toy_text.frozen_lake import generate_random_map

    return tuple(generate_random_map(size=size, p=p, seed=int(seed)))


def encode_lake(rows: tuple[str, ...], state: int) -> np.ndarray:
    """The observation of ``state`` on the map ``rows``: cell codes, then the position."""
    return np.array([CELL_CODES.index(c) for c in "".join(rows)] + [int(state)], dtype=np.int64)


def decode_lake(obs) -> tuple[LakeMap, int]:
    """(map, position) of an observation written by :func:`encode_lake`."""
    values = np.asarray(obs, dtype=np.int64).ravel()
    n = len(values) - 1
    size = int(round(n ** 0.5))
    if size * size != n or values[:-1].min() < 0 or values[:-1].max() >= len(CELL_CODES):
        raise ValueError(f"not a random-lake observation: {values.tolist()}")
    cells = "".join(CELL_CODES[v] for v in values[:-1])
    return LakeMap("random", tuple(cells[r * size:(r + 1) * size] for r in range(size))), int(values[-1])
