"""Factories for test inputs (LeRobot style): small maps and files built on demand."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write_map(tmp_path: Path, rows: list[str], name: str = "map.txt") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(rows) + "\n")
    return path


CORRIDOR = ["SFFFG"]  # deterministic: from the start, RIGHT x4 reaches the goal
SMALL_5x3 = ["SFF", "FHF", "FFF", "HFF", "FFG"]


def make_minari_dataset(
    dataset_id: str,
    env_id: str = "CartPole-v1",
    episodes: int = 6,
    max_steps: int | None = None,
    data_format: str = "hdf5",
    seed: int = 0,
    ref_scores: tuple[float, float] | None = None,
    corrupt: tuple[int, int] | None = None,
):
    """A real Minari dataset of a random policy, recorded with ``DataCollector`` (the real format).

    ``corrupt=(episode, step)`` writes a NaN into that observation after collection (for NaN handling tests).
    """
    import gymnasium as gym
    import minari
    from minari import DataCollector

    env = gym.make(env_id, max_episode_steps=max_steps) if max_steps else gym.make(env_id)
    env = DataCollector(env, data_format=data_format, record_infos=False)
    env.action_space.seed(seed)
    for ep in range(episodes):
        env.reset(seed=seed + ep)
        done = False
        while not done:
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            done = terminated or truncated
    kwargs = {"ref_min_score": ref_scores[0], "ref_max_score": ref_scores[1]} if ref_scores else {}
    dataset = env.create_dataset(dataset_id=dataset_id, algorithm_name="random", **kwargs)
    env.close()
    if corrupt is not None:
        _corrupt(dataset, *corrupt)
        dataset = minari.load_dataset(dataset_id)
    return dataset


def _corrupt(dataset, episode: int, step: int) -> None:
    import h5py

    path = Path(dataset.storage.data_path) / "main_data.hdf5"
    with h5py.File(path, "r+") as f:
        obs = f[f"episode_{episode}"]["observations"]
        values = obs[...]
        values[step, 0] = float("nan")
        obs[...] = values


def make_continuous_minari_dataset(dataset_id: str, episodes: int = 4, steps: int = 30, seed: int = 0):
    """A HalfCheetah-v5-shaped Minari dataset from buffers (random numbers, D4RL reference scores)."""
    import gymnasium as gym
    import minari
    import numpy as np
    from minari.data_collector.episode_buffer import EpisodeBuffer

    rng = np.random.default_rng(seed)
    buffers = [
        EpisodeBuffer(
            id=e,
            seed=seed + e,
            observations=rng.standard_normal((steps + 1, 17)),
            actions=rng.uniform(-1, 1, (steps, 6)).astype(np.float32),
            rewards=rng.standard_normal(steps) + e,
            terminations=np.zeros(steps, bool),
            truncations=np.r_[np.zeros(steps - 1, bool), True],
        )
        for e in range(episodes)
    ]
    return minari.create_dataset_from_buffers(
        dataset_id, buffers, env=gym.make("HalfCheetah-v5"), algorithm_name="random",
        ref_min_score=-280.178953, ref_max_score=12135.0,
    )


def make_cartpole_text_model(root: Path, max_positions: int | None = 512) -> tuple[Path, Path]:
    """A random-play CartPole Minari dataset serialized with the raw codec (2 decimals, plain prompts), and a
    tiny from-scratch model whose tokenizer reads it: (dataset folder, model folder)."""
    import os

    from rlft.datasets.serialize import serialize
    from rlft.datasets.serialize_options import SerializeConfig
    from rlft.models.tiny import ModelInitConfig, init_model

    previous = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = str(root / "minari")
    try:
        make_minari_dataset("cartpole/random-v0", episodes=6, seed=1)
        data, model = root / "cartpole", root / "tiny"
        serialize(SerializeConfig(source="cartpole/random-v0", out=data, format="raw", precision=2,
                                  prompt_style="plain"))
    finally:
        if previous is None:
            os.environ.pop("MINARI_DATASETS_PATH", None)
        else:
            os.environ["MINARI_DATASETS_PATH"] = previous
    init_model(ModelInitConfig(dataset=str(data), out=model, max_positions=max_positions))
    return data, model


def make_lake_q_model(root: Path, rows: tuple[str, ...] = ("SF", "FG"), max_positions: int = 512) -> tuple[Path, Path]:
    """A FrozenLake Q-value dataset on a small written map (compact wording, 10 episodes) and a tiny from-scratch
    model whose tokenizer reads it, through the CLI as a user makes them: (dataset folder, model folder)."""
    from typer.testing import CliRunner

    from rlft.cli.main import app

    data, model = root / "q", root / "tiny"
    lake_map = write_map(root, list(rows))
    for args in (["data", "export-q", "frozenlake", "--map", lake_map, "--out", data, "--episodes", "10",
                  "--wording", "compact"],
                 ["model", "init", "--dataset", data, "--out", model, "--max-positions", str(max_positions)]):
        result = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
        assert result.exit_code == 0, result.output
    return data, model


def lake_episode_config(data: Path, model: Path, out: Path, **overrides):
    """A two-step episodic GRPO config on :func:`make_lake_q_model`'s lake: 8 samples a step in groups of 4, episodes
    of at most 4 turns, logged every step; ``overrides`` set the credit and anything else."""
    from rlft.train.grpo.config import GRPOStageConfig

    settings = dict(dataset=str(data), model=str(model), out=out, rollout="episode", rewards=["return"],
                    max_turns=4, episode_starts=4, num_generations=4, per_device_train_batch_size=8,
                    learning_rate=5e-3, max_steps=2, logging_steps=1, lora=False, seed=3)
    return GRPOStageConfig.of(**{**settings, **overrides})


def greedy_success(env, actions, episodes: int = 200, max_steps: int = 100) -> float:
    """Success rate of the table policy ``actions[state]`` over ``episodes`` seeded FrozenLake episodes of ``env``."""
    wins = 0.0
    for k in range(episodes):
        state, _ = env.reset(seed=10**6 + k)
        for _ in range(max_steps):
            state, reward, terminated, truncated, _ = env.step(int(actions[state]))
            if terminated or truncated:
                break
        wins += reward
    return wins / episodes


STRUCTURED_ENV_IDS = {"dict": "rlft-test/DictObs-v0", "tuple": "rlft-test/TupleObs-v0",
                      "text": "rlft-test/TextObs-v0", "words": "rlft-test/WordsObs-v0"}


def structured_space(kind: str):
    """The observation spaces of the issue's reports: Dict, Tuple, nested Dict-of-Tuple, and a Text leaf."""
    from gymnasium import spaces

    if kind == "dict":
        return spaces.Dict({"a": spaces.Box(-1, 1, (3,)), "b": spaces.Discrete(3)})
    if kind == "tuple":
        return spaces.Tuple((spaces.Box(-1, 1, (2,)), spaces.Discrete(4)))
    if kind == "nested":
        return spaces.Dict({"goal": spaces.Tuple((spaces.Box(-5, 5, (2,)), spaces.MultiBinary(3))),
                            "pos": spaces.Box(-2, 2, (2, 2)), "mode": spaces.MultiDiscrete([2, 3])})
    if kind == "text":
        return spaces.Dict({"a": spaces.Box(-1, 1, (2,)), "note": spaces.Text(5)})
    if kind == "words":  # a Text observation: what a text game says
        return spaces.Text(40, charset="abcdefghijklmnopqrstuvwxyz0123456789 <>&")
    raise ValueError(kind)


def _structured_env_class():
    import gymnasium as gym

    class StructuredObsEnv(gym.Env):
        """Dict, Tuple or Text-leaf observations, 10 steps, reward 1 a step."""

        def __init__(self, kind: str = "dict"):
            self.observation_space = structured_space(kind)
            self.action_space = gym.spaces.Discrete(2) if kind in ("dict", "words") else gym.spaces.Box(-1, 1, (2,))
            self.kind, self.t = kind, 0

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.observation_space.seed(seed)
            self.t = 0
            return self._observe(), {}

        def step(self, action):
            self.t += 1
            reward = float(np.all(np.asarray(action) == self.t % 2))
            return self._observe(), reward, False, self.t >= 10, {}

        def _observe(self):
            if self.kind == "words":  # the right action is the step's parity, said in words (with markup chars)
                return f"step {self.t} <{'odd' if self.t % 2 else 'even'}> & go"
            return self.observation_space.sample()

    return StructuredObsEnv


def __getattr__(name: str):  # the env class is built on first use: gymnasium is imported only then
    if name == "StructuredObsEnv":
        return _structured_env_class()
    raise AttributeError(name)


def register_structured_envs() -> None:
    """Register the small structured-observation envs (a string entry point: Minari saves the env spec)."""
    import gymnasium as gym

    for kind, env_id in STRUCTURED_ENV_IDS.items():
        if env_id not in gym.registry:
            gym.register(env_id, entry_point="factories:StructuredObsEnv", kwargs={"kind": kind})


BANDIT_BEST = 1.0  # the bandit dataset's best action


def make_bandit_dataset(cli, out: Path, rows: int = 600, fmt: str = "raw", bins: int = 16,
                        dataset_id: str = "pendulum/bandit-v0") -> Path:
    """One-step episodes on Pendulum's spaces: random actions in [-2, 2], reward -(a - 1)^2, every episode
    terminated; serialized into ``out``. Behaviour cloning learns the data's mean action (about 0); offline RL and
    advantage-weighted SFT must move towards 1."""
    import gymnasium as gym
    import minari
    import numpy as np
    from minari.data_collector.episode_buffer import EpisodeBuffer

    rng = np.random.default_rng(0)
    buffers = []
    for i in range(rows):
        action = rng.uniform(-2, 2, (1, 1)).astype(np.float32)
        buffers.append(EpisodeBuffer(id=i, observations=rng.uniform(-1, 1, (2, 3)).astype(np.float32),
                                     actions=action, rewards=-((action[:, 0] - BANDIT_BEST) ** 2).astype(np.float64),
                                     terminations=np.array([True]), truncations=np.array([False])))
    minari.create_dataset_from_buffers(dataset_id, buffers, env=gym.make("Pendulum-v1"))
    result = cli("data", "serialize", dataset_id, "--format", fmt, "--bins", str(bins), "--out", out)
    assert result.exit_code == 0, result.output
    return out


def one_line(result, code: int, *words: str, max_lines: int | None = None) -> None:
    """A CLI result that exited ``code`` saying ``words`` (whitespace-folded), with no traceback or usage text and,
    given ``max_lines``, at most that many lines (an error and its hint, wrapped)."""
    text = " ".join(result.output.split())
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output and "usage:" not in result.output, result.output
    if max_lines is not None:
        assert len(result.output.strip().splitlines()) <= max_lines, result.output
    for word in words:
        assert word in text, (word, result.output)
