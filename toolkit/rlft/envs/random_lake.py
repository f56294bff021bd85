"""FrozenLake on a new random map every episode (RAGEN / StarPO's FrozenLake setting), with the map in the observation.

Gymnasium's FrozenLake observes the position alone, so a policy for random maps could not see the map. Here the map
of an episode is drawn by ``gymnasium.envs.toy_text.frozen_lake.generate_random_map(size, p, seed)`` from the reset
seed (so episode ``i`` of an evaluation, seeded ``S + i``, always meets the same map, and a GRPO group of episodes
from one seed shares it), the dynamics are gymnasium's own ``FrozenLakeEnv`` on that map, and the observation is
the map's cells followed by the position (with ``maps=N``, seed ``s`` meets the map of seed ``s mod N``: a fixed pool
of training maps whose states repeat across episodes): ``MultiDiscrete([4] * size**2 + [size**2])``, cells coded by
:data:`rlft.envs.frozenlake.CELL_CODES`. The FrozenLake grid codec renders it as the grid with the agent marked,
as for a fixed map.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym  # this module is imported only to make the env (rlft.envs.registry)
from gymnasium import spaces
from gymnasium.envs.toy_text.frozen_lake import FrozenLakeEnv

from rlft.envs.frozenlake import CELL_CODES, MAX_EPISODE_STEPS, RANDOM_LAKE_ID, encode_lake, random_rows


class RandomLakeEnv(gym.Env):
    """FrozenLake on the map of each reset's seed (registered as :data:`RANDOM_LAKE_ID`)."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, size: int = 4, p: float = 0.8, is_slippery: bool = True, maps: int | None = None):
        if size < 2 or not 0.0 < p <= 1.0:
            raise ValueError(f"size must be at least 2 and p in (0, 1], got size={size}, p={p}")
        if maps is not None and maps < 1:
            raise ValueError(f"maps must be at least 1 (or None: every seed its own map), got {maps}")
        self.size, self.p, self.is_slippery = int(size), float(p), bool(is_slippery)
        self.maps = maps  # a pool: seed s meets the map of seed s mod maps (the maps a dataset's rows come from)
        n = self.size * self.size
        self.observation_space = spaces.MultiDiscrete([len(CELL_CODES)] * n + [n])
        self.action_space = spaces.Discrete(4)
        self.rows: tuple[str, ...] | None = None
        self._lake: FrozenLakeEnv | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        # a seeded reset meets the seed's own map; an unseeded one (vector autoreset) the next of its generator
        map_seed = int(seed) if seed is not None else int(self.np_random.integers(2**31))
        if self.maps:
            map_seed %= self.maps
        self.rows = random_rows(self.size, self.p, map_seed)
        self._lake = FrozenLakeEnv(desc=list(self.rows), is_slippery=self.is_slippery)
        state, info = self._lake.reset(seed=map_seed)
        return encode_lake(self.rows, state), {**info, "map_seed": map_seed}

    def step(self, action):
        state, reward, terminated, truncated, info = self._lake.step(int(action))
        return encode_lake(self.rows, state), reward, terminated, truncated, info

    def close(self) -> None:
        self._lake = None


def register_random_lake() -> None:
    """Register :data:`RANDOM_LAKE_ID` with gymnasium once."""
    if RANDOM_LAKE_ID not in gym.registry:
        gym.register(id=RANDOM_LAKE_ID, entry_point="rlft.envs.random_lake:RandomLakeEnv",
                     max_episode_steps=MAX_EPISODE_STEPS)


register_random_lake()
