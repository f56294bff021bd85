"""The FrozenLake grid codec: round trip, parsing of model output, persistence."""

from __future__ import annotations

import pytest

from rlft.codecs import ActionParseError, FrozenLakeGridCodec, load_codec
from rlft.envs.frozenlake import load_map


@pytest.fixture(params=["chat", "plain"])
def codec(request):
    return FrozenLakeGridCodec.for_map(load_map("4x4"), slippery=True, style=request.param)


def test_round_trip_every_action(codec):
    for action in range(4):
        assert codec.decode_action(codec.build_completion(action)) == action


@pytest.mark.parametrize(
    "text,action",
    [
        ("<think>the hole is below</think><answer>RIGHT</answer>", 2),
        ("<answer> down </answer>", 1),
        ("<answer>UP.</answer>", 3),
        ("<answer>LEFT</answer> then <answer>UP</answer>", 3),  # the last answer counts
    ],
)
def test_lenient_but_exact_parsing(codec, text, action):
    assert codec.decode_action(text) == action


@pytest.mark.parametrize(
    "text,reason",
    [("RIGHT", "no answer block"), ("<answer>JUMP</answer>", "not one of"), ("<answer></answer>", "empty"),
     ("<answer>RIGHT", "no answer block"), ("<answer>2</answer>", "not one of")],
)
def test_malformed_output_raises_typed_error(codec, text, reason):
    with pytest.raises(ActionParseError, match=reason):
        codec.decode_action(text)


def test_save_and_load(codec, tmp_path):
    codec.save(tmp_path)
    loaded = load_codec(tmp_path)
    assert loaded.to_dict() == codec.to_dict()
    assert loaded.build_prompt(5) == codec.build_prompt(5)
    env = loaded.make_env()
    try:
        assert env.unwrapped.desc.shape == (4, 4)
    finally:
        env.close()


def test_missing_codec_file_is_a_clear_error(tmp_path):
    from rlft.core.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="codec file .*rlft_codec.json does not exist"):
        load_codec(tmp_path)


def test_observation_states_the_position_unless_disabled(codec):
    text = codec.encode_observation(6)
    assert text.endswith("\nYou are at row 1, column 2.") and "F H S H" in text
    plain = type(codec).from_dict({**codec.to_dict(), "params": {**codec.params(), "show_position": False}})
    assert plain.encode_observation(6) == "F F F F\nF H S H\nF F F H\nH F F G"
