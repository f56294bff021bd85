"""Map parsing and rendering."""

from __future__ import annotations

import pytest

from factories import SMALL_5x3, write_map
from rlft.core.errors import InvalidInputError
from rlft.envs.frozenlake import load_map, render_grid


def test_named_maps():
    assert load_map("4x4").rows[0] == "SFFF"
    assert load_map("8x8").nrow == 8


def test_map_file(tmp_path):
    lake = load_map(str(write_map(tmp_path, SMALL_5x3)))
    assert (lake.nrow, lake.ncol, lake.start_state) == (5, 3, 0)


@pytest.mark.parametrize(
    "rows,message",
    [
        (["SFX", "FFG"], "outside S/F/H/G"),
        (["SFF", "FG"], "ragged"),
        (["FFF", "FFG"], "exactly one S"),
        (["SFS", "FFG"], "exactly one S"),
        (["SFF", "FFF"], "no G"),
        ([], "empty"),
    ],
)
def test_bad_map_files(tmp_path, rows, message):
    with pytest.raises(InvalidInputError, match=message):
        load_map(str(write_map(tmp_path, rows)))


def test_unknown_map_name():
    with pytest.raises(InvalidInputError, match="unknown map"):
        load_map("5x5")


def test_render_marks_agent_and_hides_start():
    lake = load_map("4x4")
    assert render_grid(lake, 0).splitlines()[0] == "S F F F"
    text = render_grid(lake, 6)
    assert text.splitlines()[0] == "F F F F"  # the start shows as ice when the agent is elsewhere
    assert text.splitlines()[1] == "F H S H"
    assert text.count("S") == 1
