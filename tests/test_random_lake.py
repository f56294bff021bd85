"""Random FrozenLake maps (RAGEN's setting): the env, the codec that draws each observation's map, the export of
their exact Q-values and q-greedy on maps met for the first time."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rlft.core.errors import InvalidInputError
from rlft.envs.frozenlake import RANDOM_LAKE_ID, decode_lake, encode_lake, random_rows


def _codec():
    from rlft.codecs.grid import FrozenLakeGridCodec

    return FrozenLakeGridCodec.for_random_maps(4, 0.8, True, "chat", "compact")


def test_each_seed_meets_its_own_map_and_the_dynamics_are_gymnasiums():
    import gymnasium as gym

    from rlft.envs.registry import ensure_registered

    ensure_registered(RANDOM_LAKE_ID)
    env = gym.make(RANDOM_LAKE_ID)
    obs, info = env.reset(seed=7)
    lake, state = decode_lake(obs)
    assert lake.rows == random_rows(4, 0.8, 7) and state == 0 and info["map_seed"] == 7
    assert env.reset(seed=8)[0][:-1].tolist() != obs[:-1].tolist() or random_rows(4, 0.8, 8) == lake.rows
    # the same seed, the same map and the same slips as gymnasium's FrozenLake on that map
    reference = gym.make("FrozenLake-v1", desc=list(lake.rows), is_slippery=True)
    env.reset(seed=7)
    reference.reset(seed=7)
    for action in [2, 1, 1, 2, 1, 2] * 3:
        ours, reward, done, _, _ = env.step(action)
        theirs, reward_ref, done_ref, _, _ = reference.step(action)
        assert decode_lake(ours) == (lake, theirs) and (reward, done) == (reward_ref, done_ref)
        if done:
            break
    assert env.spec.max_episode_steps == 100


def test_observation_round_trip_and_bad_observations():
    rows = random_rows(4, 0.8, 3)
    lake, state = decode_lake(encode_lake(rows, 9))
    assert lake.rows == rows and state == 9
    with pytest.raises(ValueError, match="not a random-lake observation"):
        decode_lake(np.array([0, 1, 5, 0]))  # a cell code out of range


def test_the_codec_draws_each_observations_map_and_round_trips_as_data():
    from rlft.codecs import codec_from_dict
    from rlft.envs.frozenlake import render_grid

    codec = _codec()
    env = codec.make_env()
    for seed in (0, 1, 2):
        obs, _ = env.reset(seed=seed)
        lake, state = decode_lake(obs)
        text = codec.encode_observation(obs)
        assert text == f"{render_grid(lake, state)}\nYou are at row 0, column 0."
    again = codec_from_dict(json.loads(json.dumps(codec.to_dict())))
    assert again.encode_observation(obs) == codec.encode_observation(obs) and again.lake is None
    assert again.parse_action_text("DOWN") == 1
    from rlft.codecs.grid import FrozenLakeGridCodec

    with pytest.raises(ValueError, match="grid in every prompt"):
        FrozenLakeGridCodec.for_random_maps(4, 0.8, True, "chat", "position")


def test_export_random_maps_and_q_greedy_solves_maps_it_meets(tmp_path):
    from rlft.core.console import console
    from rlft.datasets.frozenlake_q.export import ExportQConfig, export_frozenlake_q
    from rlft.datasets.loading import load_dataset_codec, load_dataset_dict
    from rlft.policy.policies import LakeSolverPolicy

    with console.capture():
        result = export_frozenlake_q(ExportQConfig(map="random4x4", maps=5, wording="compact", out=tmp_path / "d",
                                                   completions="all"))
    rows = load_dataset_dict(str(tmp_path / "d"))["train"]
    assert sorted(set(rows["map_seed"])) == [0, 1, 2, 3, 4] and result.summary["maps"] == 5
    first = rows[0]
    lake = random_rows(4, 0.8, first["map_seed"])
    assert " ".join(lake[-1]) in first["prompt"][-1]["content"]  # the row's own map is drawn (its goal row)
    codec = load_dataset_codec(str(tmp_path / "d"))
    assert codec.env_id == RANDOM_LAKE_ID and codec.lake is None
    info = json.loads((tmp_path / "d" / "rlft_info.json").read_text())
    assert info["random_maps"] and 0.5 < info["exact_success"] <= 1.0

    policy = LakeSolverPolicy(codec)
    env = codec.make_env()
    wins, met = 0, set()
    for seed in range(1000, 1040):  # maps the dataset never held
        obs, _ = env.reset(seed=seed)
        met.add(decode_lake(obs)[0].rows)
        done = False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(int(policy.act(obs[None], [0])[0]))
            done = terminated or truncated
        wins += reward > 0
    assert wins / 40 > 0.7 and policy.describe()["maps_solved"] == len(met)  # each map solved once


def test_export_random_maps_refusals(tmp_path):
    from rlft.datasets.frozenlake_q.export import ExportQConfig, export_frozenlake_q

    # --maps is declared (at least 1): refused when the config is made, the others when it is run
    for settings, match in (({"map": "random4x5", "out": tmp_path / "a"}, "square"),
                            ({"map": "random4x4", "maps": 0, "out": tmp_path / "b"}, "--maps"),
                            ({"map": "random4x4", "wording": "position", "out": tmp_path / "c"}, "show the grid"),
                            ({"map": "random4x4", "csv": tmp_path / "x.csv", "out": tmp_path / "d"}, "--csv")):
        with pytest.raises(InvalidInputError, match=match):
            export_frozenlake_q(ExportQConfig(**settings))
    assert not list(tmp_path.iterdir())


def test_reports_on_random_maps_count_successes():
    # the return is 1 at the goal and 0 otherwise, so the success rate is the mean return, as on a fixed map
    from rlft.evaluate.config import EvalConfig
    from rlft.evaluate.runner import run_evaluation

    report = run_evaluation(EvalConfig(quiet=True, policy="random", env_id=RANDOM_LAKE_ID, episodes=40, num_envs=4,
                                       seed=0))
    assert report["success_rate"] is not None and report["success_rate"] == pytest.approx(report["return_mean"])
    assert report["policy_map"] is None  # a map per episode: no single map to draw
