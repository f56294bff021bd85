"""rlft's reader of Minari's HDF5 episodes gives exactly Minari's own arrays, and leaves every dataset it does not
cover (other storages, structured spaces) to Minari."""

from __future__ import annotations

import numpy as np
import pytest

from factories import STRUCTURED_ENV_IDS, make_continuous_minari_dataset, make_minari_dataset, register_structured_envs
from rlft.core.errors import InvalidInputError
from rlft.sources import minari_hdf5
from rlft.sources.minari_source import iterate_episodes

KEYS = ("observations", "actions", "rewards", "terminations", "truncations")


def _equal(x, y) -> bool:
    if isinstance(x, dict):
        return isinstance(y, dict) and x.keys() == y.keys() and all(_equal(x[k], y[k]) for k in x)
    if isinstance(x, tuple | list):
        return type(x) is type(y) and len(x) == len(y) and all(_equal(a, b) for a, b in zip(x, y, strict=True))
    return x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y)


def _same_episodes(dataset, indices=None):
    ours = list(iterate_episodes(dataset, "test", indices))
    theirs = list(dataset.iterate_episodes(indices))
    assert [e.id for e in ours] == [e.id for e in theirs] and ours
    for a, b in zip(ours, theirs, strict=True):
        for key in KEYS:
            assert _equal(getattr(a, key), getattr(b, key)), (a.id, key)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "FrozenLake-v1", "Pendulum-v1"])
def test_flat_datasets_read_as_minari_reads_them(env_id):
    """Box and Discrete observations and actions (CartPole: Box/Discrete, FrozenLake: Discrete/Discrete,
    Pendulum: Box/Box), all episodes and a subset in another order."""
    dataset = make_minari_dataset(f"test/{env_id.lower()}-v0", env_id=env_id, episodes=4, max_steps=40)
    assert minari_hdf5.flat_hdf5_file(dataset) is not None
    _same_episodes(dataset)
    _same_episodes(dataset, [3, 0, 2])


def test_halfcheetah_shaped_buffers_read_as_minari_reads_them():
    _same_episodes(make_continuous_minari_dataset("test/cheetah-v0", episodes=3, steps=25))


def test_other_storages_and_structured_spaces_are_left_to_minari():
    register_structured_envs()
    arrow = make_minari_dataset("test/arrow-v0", episodes=2, data_format="arrow")
    structured = make_minari_dataset("test/dict-v0", env_id=STRUCTURED_ENV_IDS["dict"], episodes=2)
    for dataset in (arrow, structured):
        assert minari_hdf5.flat_hdf5_file(dataset) is None
        _same_episodes(dataset)


def test_a_missing_episode_is_one_clear_error():
    dataset = make_minari_dataset("test/cartpole-v0", episodes=2)
    with pytest.raises(InvalidInputError, match="cannot read Minari dataset test/x-v0"):
        list(iterate_episodes(dataset, "test/x-v0", [0, 5]))
