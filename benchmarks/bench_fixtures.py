"""What several benchmarks build before they measure: small real datasets in a temporary folder."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path


def quiet() -> contextlib.ExitStack:
    """Silence a measured step's tables, progress bars and library prints (a benchmark prints its own table)."""
    from rlft.core.console import console

    stack = contextlib.ExitStack()
    stack.enter_context(console.capture())
    stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
    stack.enter_context(contextlib.redirect_stderr(io.StringIO()))
    return stack


def print_tables(tables: list[dict]) -> None:
    """Each result table on the console as markdown, as the README renders it."""
    from rlft.core.console import console
    from rlft.results.render import table_markdown

    for t in tables:
        console.print("\n".join(table_markdown(t)), markup=False, highlight=False)


def record_random(work: Path, env_id: str, dataset_id: str, episodes: int, max_episode_steps: int | None = None):
    """A random-policy Minari dataset of ``env_id`` under ``work/minari`` (episode i reset with seed i)."""
    import gymnasium as gym
    from minari import DataCollector

    os.environ["MINARI_DATASETS_PATH"] = str(work / "minari")
    env = DataCollector(gym.make(env_id, max_episode_steps=max_episode_steps), record_infos=False)
    env.action_space.seed(0)
    for ep in range(episodes):
        env.reset(seed=ep)
        done = False
        while not done:
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            done = terminated or truncated
    env.create_dataset(dataset_id=dataset_id, algorithm_name="random")
    env.close()


def random_cartpole_dataset(work: Path, episodes: int = 40) -> Path:
    """A random-policy CartPole-v1 Minari dataset, serialized with the raw codec (2 decimals, plain prompts)."""
    from rlft.datasets.serialize import serialize
    from rlft.datasets.serialize_options import SerializeConfig

    record_random(work, "CartPole-v1", "cartpole/bench-v0", episodes)
    dataset = work / "cartpole-raw"
    serialize(SerializeConfig(source="cartpole/bench-v0", out=dataset, format="raw", precision=2))
    return dataset
