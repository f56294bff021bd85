"""The numeric codecs (raw, discretized, tokenized): round trips, batch == scalar text, persistence, errors."""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa
import pytest
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from rlft.codecs import ActionParseError, codec_from_dict, load_codec, make_codec
from rlft.core.errors import InvalidInputError

FORMATS = ("raw", "discretized", "tokenized")
OBS = spaces.Box(-np.inf, np.inf, (17,), np.float64)  # HalfCheetah-like, unbounded
ACTION_SPACES = {
    "box": spaces.Box(-1.0, 1.0, (6,), np.float32),
    "unbounded": spaces.Box(-np.inf, np.inf, (3,), np.float32),
    "discrete": spaces.Discrete(4, start=1),
}
SPAN = {"box": 1.0, "unbounded": 50.0}  # actions are drawn (and fitted) within +-SPAN
FAST = settings(max_examples=60, deadline=None)


def _actions(kind: str, rng, n: int = 400) -> np.ndarray:
    space = ACTION_SPACES[kind]
    if kind == "discrete":
        return rng.integers(1, 5, n)
    dims = space.shape[0]
    data = rng.uniform(-SPAN[kind], SPAN[kind], (n, dims))
    return np.vstack([data, np.full(dims, -SPAN[kind]), np.full(dims, SPAN[kind])])  # the fit covers +-SPAN


@functools.cache
def codec_for(fmt: str, kind: str = "box", style: str = "plain", edges_from: str = "data"):
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(400, 17)) * 3
    return make_codec(
        fmt, OBS, ACTION_SPACES[kind], observations=obs, actions=_actions(kind, rng), prompt_style=style,
        edges_from=edges_from, env_id="HalfCheetah-v5",
    )


def _box_action(kind: str):
    dims, span = ACTION_SPACES[kind].shape[0], SPAN[kind]
    return arrays(np.float32, dims, elements=st.floats(-span, span, width=32))


def _assert_round_trip(codec, action):
    decoded = codec.decode_action(codec.build_completion(action))
    assert decoded.dtype == np.float32 and decoded.shape == action.shape
    a = action.astype(np.float64)
    if codec.kind == "raw":
        tol = 0.5 * 10.0**-codec.precision
        np.testing.assert_allclose(decoded, a, rtol=0, atol=tol + 1e-5 * max(1.0, np.abs(a).max()))
    elif codec.kind == "tokenized":
        low, high = codec.ranges["action"].T
        half_token = (high - low) / (codec.tokens - 1) / 2
        assert np.all(np.abs(decoded - a) <= half_token + 1e-5 * np.maximum(1.0, np.abs(a)))
    else:
        for value, got, edges in zip(a, decoded, codec.edges["action"], strict=True):
            i = int(np.argmin(np.abs((edges[:-1] + edges[1:]) / 2 - got)))  # the bin decoded
            tol = 1e-5 * max(1.0, abs(value))
            assert edges[i] - tol <= value <= edges[i + 1] + tol, (value, got, edges[i : i + 2])


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kind", ["box", "unbounded"])
@FAST
@given(data=st.data())
def test_box_action_round_trip(fmt, kind, data):
    _assert_round_trip(codec_for(fmt, kind), data.draw(_box_action(kind)))


@pytest.mark.parametrize("fmt", FORMATS)
@FAST
@given(action=_box_action("box"))
def test_round_trip_with_bin_edges_from_bounds(fmt, action):
    _assert_round_trip(codec_for(fmt, "box", edges_from="bounds"), action)


@pytest.mark.parametrize("fmt", FORMATS)
@given(action=st.integers(1, 4))
def test_discrete_action_round_trip_is_exact(fmt, action):
    codec = codec_for(fmt, "discrete")
    assert codec.encode_action(action) == str(action)
    decoded = codec.decode_action(codec.build_completion(action))
    assert decoded == action and isinstance(decoded, int)


_ROW_VALUES = st.one_of(
    st.floats(-1e6, 1e6, allow_nan=False),
    st.sampled_from([0.0, -0.0, -0.0004, 0.0005, -0.0005, 1.9995, -2.5e-7, 999.9999]),
)


@pytest.mark.parametrize("fmt", FORMATS)
@FAST
@given(rows=arrays(np.float64, st.tuples(st.integers(1, 8), st.just(17)), elements=_ROW_VALUES))
def test_batch_and_scalar_paths_write_identical_text(fmt, rows):
    codec = codec_for(fmt)
    batch = codec.encode_observations(rows)
    assert isinstance(batch, pa.StringArray) and len(batch) == len(rows)
    assert batch.to_pylist() == [codec.encode_observation(r) for r in rows]
    actions = np.clip(rows[:, :6], -1, 1)
    assert codec.encode_actions(actions).to_pylist() == [codec.encode_action(a) for a in actions]


def test_raw_text_format():
    codec = make_codec("raw", spaces.Box(-np.inf, np.inf, (6,)), ACTION_SPACES["box"])
    row = [0.123, -1.5, 2, -0.0004, 1234.5678, -10]
    assert codec.encode_observation(row) == "0.123 -1.500 2.000 0.000 1234.568 -10.000"
    assert make_codec("raw", OBS, ACTION_SPACES["box"], precision=0).encode_action([0.4, -0.6, 1, 0, 0, -1]) == (
        "0 -1 1 0 0 -1"
    )


def test_integer_codecs_write_indices():
    disc = codec_for("discretized")
    assert disc.encode_actions(np.array([[-1.0] * 6, [1.0] * 6])).to_pylist() == ["0 0 0 0 0 0", "31 31 31 31 31 31"]
    tok = codec_for("tokenized")
    assert tok.encode_action([-1, 1, 0, -1, 1, 0]) == "0 999 500 0 999 500"  # 499.5 rounds to even


@pytest.mark.parametrize("fmt", FORMATS)
def test_save_and_load_behave_identically(fmt, tmp_path):
    codec = codec_for(fmt, style="chat")
    codec.save(tmp_path)
    loaded = load_codec(tmp_path)
    assert type(loaded) is type(codec) and loaded.to_dict() == codec.to_dict()
    assert codec_from_dict(codec.to_dict()).to_dict() == codec.to_dict()
    rows = np.random.default_rng(1).normal(size=(50, 17)) * 4
    assert loaded.encode_observations(rows).equals(codec.encode_observations(rows))
    actions = np.random.default_rng(2).uniform(-1.2, 1.2, (50, 6))
    assert loaded.encode_actions(actions).equals(codec.encode_actions(actions))
    for action in actions[:10]:
        completion = codec.build_completion(action)  # chat: a list with one assistant message
        np.testing.assert_array_equal(loaded.decode_action(completion), codec.decode_action(completion))
    assert loaded.build_prompt(rows[0]) == codec.build_prompt(rows[0])


@pytest.mark.parametrize(
    "fmt,kind,answer,reason",
    [
        ("raw", "box", "0.1 0.2 0.3 0.4 0.5 0.6", "no answer block"),
        ("raw", "box", "<action></action>", "empty answer"),
        ("raw", "box", "<action>0.1 0.2 0.3 0.4 0.5</action>", "expected 6 values, got 5"),
        ("raw", "box", "<action>0.1 0.2 0.3 0.4 0.5 0.6 0.7</action>", "expected 6 values, got 7"),
        ("raw", "box", "<action>0.1 nan 0.3 0.4 0.5 0.6</action>", "non-finite value 'nan'"),
        ("raw", "box", "<action>0.1 -inf 0.3 0.4 0.5 0.6</action>", "non-finite value '-inf'"),
        ("raw", "box", "<action>0.1 1e999 0.3 0.4 0.5 0.6</action>", "non-finite value '1e999'"),
        ("raw", "box", "<action>0.1 abc 0.3 0.4 0.5 0.6</action>", "'abc' is not a number"),
        ("raw", "box", "<action>0.1 0x1 0.3 0.4 0.5 0.6</action>", "'0x1' is not a number"),
        ("discretized", "box", "<action>1 2 3 4 5 32</action>", "bin index 32 out of range 0..31 .*not clipped"),
        ("discretized", "box", "<action>1 2 -1 4 5 6</action>", "bin index -1 out of range"),
        ("discretized", "box", "<action>1 2 3.5 4 5 6</action>", "'3.5' is not an integer bin index"),
        ("discretized", "box", "<action>1 2 nan 4 5 6</action>", "'nan' is not an integer"),
        ("tokenized", "box", "<action>0 999 1000 1 2 3</action>", "token 1000 out of range 0..999 .*not clipped"),
        ("tokenized", "box", "<action>0 999 1 2 3</action>", "expected 6 values, got 5"),
        ("tokenized", "box", "<action>0 999 x 1 2 3</action>", "'x' is not an integer token"),
        ("raw", "discrete", "<action>5</action>", "action 5 out of range 1..4"),
        ("raw", "discrete", "<action>0</action>", "out of range 1..4"),
        ("tokenized", "discrete", "<action>2 3</action>", "expected 1 value, got 2"),
        ("discretized", "discrete", "<action>2.0</action>", "not an integer"),
    ],
)
def test_malformed_output_raises_with_reason(fmt, kind, answer, reason):
    with pytest.raises(ActionParseError, match=reason):
        codec_for(fmt, kind).decode_action(answer)


def test_lenient_forms_rlft4rl_writes_decode_to_the_same_action():
    codec = codec_for("raw")
    strict = codec.decode_action("<action>0.1 -0.25 0.3 0.4 0.5 0.6</action>")
    for text in ("<action>0.1,-0.25,0.3,0.4,0.5,0.6</action>",  # commas between values
                 "0.1,-0.25,0.3,0.4,0.5,0.6</action>",  # the opening tag was prefilled in the prompt
                 " 0.1, -0.25, 0.3, 0.4, 0.5, 0.6 </action> trailing words"):
        np.testing.assert_array_equal(codec.decode_action(text), strict)
    with pytest.raises(ActionParseError, match="no answer block"):
        codec.decode_action("0.1 -0.25 0.3 0.4 0.5 0.6")  # neither tag: still refused
    with pytest.raises(ActionParseError, match="no answer block"):
        codec.decode_action("<action>0.1 0.2</actio>")  # an opening tag with a broken closing one


def test_raw_decoding_clips_to_action_bounds():
    action = codec_for("raw").decode_action("<action>2.5 -3 0.25 1.0004 -1 0</action>")
    np.testing.assert_array_equal(action, np.array([1, -1, 0.25, 1, -1, 0], dtype=np.float32))
    assert action.dtype == np.float32


def test_shape_and_value_errors():
    rng = np.random.default_rng(0)
    act = rng.uniform(-1, 1, (20, 6))
    with pytest.raises(InvalidInputError, match="codec/shape mismatch: observation space has 17 dims, data has 11"):
        make_codec("tokenized", OBS, ACTION_SPACES["box"], observations=rng.normal(size=(20, 11)), actions=act)
    bad = rng.normal(size=(20, 17))
    bad[3, 4] = np.nan
    with pytest.raises(InvalidInputError, match="NaN or inf"):
        make_codec("discretized", OBS, ACTION_SPACES["box"], observations=bad, actions=act)
    with pytest.raises(InvalidInputError, match="no observations given"):
        make_codec("tokenized", OBS, ACTION_SPACES["box"], actions=act)
    with pytest.raises(InvalidInputError, match="unknown numeric codec format"):
        make_codec("binary", OBS, ACTION_SPACES["box"])
    codec = codec_for("raw")
    with pytest.raises(InvalidInputError, match="observation space has 17 dims, data has 11"):
        codec.encode_observation(np.zeros(11))
    with pytest.raises(InvalidInputError, match="observation space has 17 dims, data has 16"):
        codec.encode_observations(np.zeros((4, 16)))
    with pytest.raises(InvalidInputError, match="action space has 6 dims, data has 1"):
        codec.encode_actions(np.zeros(6))  # one action passed as a batch
    with pytest.raises(InvalidInputError, match="not in Discrete"):
        codec_for("raw", "discrete").encode_actions(np.array([1, 2, 5]))


def test_bin_edges_from_data_and_bounds():
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(300, 17))
    obs[:, 0] = rng.integers(0, 3, 300)  # three distinct values: repeated quantiles merge
    obs[:, 1] = 7.0  # constant
    codec = make_codec("discretized", OBS, ACTION_SPACES["box"], observations=obs, edges_from="bounds", bins=8)
    first, const = codec.edges["observation"][0], codec.edges["observation"][1]
    assert list(first) == [0, 1, 2] and len(codec.edges["observation"][2]) == 9
    assert len(const) == 2 and const[0] < 7 < const[1] and codec.encode_observation(obs[0]).split()[1] == "0"
    np.testing.assert_allclose(codec.edges["action"][0], np.linspace(-1, 1, 9))  # finite bounds: uniform
    assert "bin index 0..7" in codec.encoding_description()


_FIT_SPACES = {
    "unbounded box": spaces.Box(-np.inf, np.inf, (3,)),
    "half-bounded box": spaces.Box(np.array([-1.0, -np.inf]), np.array([1.0, 2.0]), dtype=np.float64),
    "bounded box": spaces.Box(-2, 2, (2,)),
    "discrete": spaces.Discrete(4),
    "dict of bounded boxes": spaces.Dict({"a": spaces.Box(-1, 1, (2,)), "b": spaces.Box(0, 5, (1,))}),
}


@pytest.mark.parametrize("obs_name", list(_FIT_SPACES))
@pytest.mark.parametrize("act_name", ["bounded box", "discrete"])
@pytest.mark.parametrize("fmt,edges_from", [("raw", "data"), ("tokenized", "data"), ("discretized", "data"),
                                            ("discretized", "bounds")])
def test_codec_fits_on_data_says_whether_make_codec_needs_the_data(fmt, edges_from, obs_name, act_name):
    """``rlft data serialize`` reads once when the codec fits on nothing: the declaration must match what
    ``make_codec`` really does without data (builds, or says it is fitted on data)."""
    from rlft.codecs.factory import codec_fits_on_data

    obs, act = _FIT_SPACES[obs_name], _FIT_SPACES[act_name]
    needs = codec_fits_on_data(fmt, obs, act, edges_from=edges_from)
    if needs:
        with pytest.raises(InvalidInputError, match="fitted on data"):
            make_codec(fmt, obs, act, edges_from=edges_from)
    else:
        make_codec(fmt, obs, act, edges_from=edges_from)
    has_box = (obs_name, act_name) != ("discrete", "discrete")
    infinite_bounds = obs_name in ("unbounded box", "half-bounded box")
    expected = {"raw": False, "tokenized": has_box,
                "discretized": has_box and (edges_from == "data" or infinite_bounds)}[fmt]
    assert needs == expected


def test_tokenized_constant_dimension_gets_a_width():
    obs = np.random.default_rng(0).normal(size=(50, 17))
    codec = make_codec("tokenized", OBS, spaces.Box(-1, 1, (2,)), observations=obs, actions=np.full((50, 2), 0.25))
    low, high = codec.ranges["action"].T
    assert np.all(high > low) and np.all(high - low < 1e-3)
    np.testing.assert_allclose(codec.decode_action(codec.build_completion([0.25, 0.25])), 0.25, atol=1e-6)


def test_discrete_observations_and_empty_batches():
    codec = make_codec("tokenized", spaces.Discrete(16), spaces.Discrete(4))
    assert codec.encode_observations(np.array([0, 15, 7])).to_pylist() == ["0", "15", "7"]
    assert codec.encode_observation(np.int64(3)) == "3"
    assert len(codec.encode_observations(np.zeros((0,)))) == 0
    with pytest.raises(InvalidInputError, match="not in Discrete"):
        codec.encode_observation(16)


def test_plain_and_chat_templates():
    plain = codec_for("raw")
    assert plain.template.style == "plain" and plain.template.system == "" and not plain.template.allow_think
    assert plain.build_prompt(np.zeros(17)) == "<observation>" + " ".join(["0.000"] * 17) + "</observation>\n"
    assert plain.build_completion(np.zeros(6)) == "<action>0.000 0.000 0.000 0.000 0.000 0.000</action>"
    chat = codec_for("tokenized", style="chat")
    system = chat.build_prompt(np.zeros(17))[0]["content"]
    for needle in ("HalfCheetah-v5", "Box(17,)", "Box(6,) in [-1, 1]", "token 0..999", "<action>"):
        assert needle in system
    assert "3 digits after the point" in codec_for("raw", style="chat").template.system
    assert "bin index 0..31" in codec_for("discretized", style="chat").template.system
    ctx = make_codec("raw", OBS, ACTION_SPACES["box"], history=2, return_to_go=True, prompt_style="chat")
    assert ctx.template.history == 2 and ctx.template.return_to_go
    assert "previous observations" in ctx.template.system and "return_to_go" in ctx.template.system
    custom = make_codec("raw", OBS, ACTION_SPACES["box"], prompt_style="chat", system="Be brief.")
    assert custom.template.system == "Be brief."


def test_the_raw_codec_writes_what_python_format_writes_on_near_ties():
    """The codec's own fast path (not only core.textfmt): 87.2505 is 87.25050000000000238 in binary, so Python
    writes 87.251; a plain rint of 87.2505 * 1000 = 87250.49999999999 would write 87.250."""
    from gymnasium import spaces

    rng = np.random.default_rng(5)
    ties = (rng.integers(-99999, 99999, 4000) + 0.5) / 1000  # x.xxx5: every value a decimal near-tie
    values = np.concatenate([ties, [87.2505, 5e-6 * 1000, 1.0005, 2.675]]).reshape(-1, 4)
    codec = make_codec("raw", spaces.Box(-np.inf, np.inf, (4,), np.float64), spaces.Discrete(2), precision=3)
    expected = [" ".join(format(float(v), ".3f") for v in row).replace("-0.000", "0.000") for row in values]
    assert codec.encode_observations(values).to_pylist() == expected
