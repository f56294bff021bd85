"""Dict and Tuple observations (goal-conditioned mazes and robots) through the same codecs, end to end."""

from __future__ import annotations

import glob
import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factories import STRUCTURED_ENV_IDS, make_minari_dataset, register_structured_envs, structured_space
from rlft.codecs.base import codec_from_dict
from rlft.codecs.factory import make_codec
from rlft.core.errors import InvalidInputError

FORMATS = ("raw", "discretized", "tokenized")


def _batch(space, n: int, seed: int):
    from rlft.envs.observations import stack

    space.seed(seed)
    return stack([space.sample() for _ in range(n)])


def _codec(kind: str, fmt: str):
    from gymnasium import spaces

    space = structured_space(kind)
    codec = make_codec(fmt, space, spaces.Box(-1, 1, (2,)), observations=_batch(space, 200, 0),
                       actions=np.zeros((200, 2)), precision=3, bins=64, tokens=1000)
    return codec_from_dict(json.loads(json.dumps(codec.to_dict())))  # as trainers and evaluation load it


def _leaves(obs, path=()):
    if isinstance(obs, dict):
        for k, v in obs.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(obs, tuple):
        for i, v in enumerate(obs):
            yield from _leaves(v, (*path, i))
    else:
        yield path, np.asarray(obs)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kind", ["dict", "tuple", "nested"])
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_structured_observations_round_trip_per_field(kind, fmt, seed):
    codec = _codec(kind, fmt)
    space = structured_space(kind)
    space.seed(seed)
    obs = space.sample()
    text = codec.encode_observation(obs)
    back = codec.decode_observation(text)
    assert codec.encode_observation(back) == text  # decoding then encoding is the identity on texts
    from rlft.codecs.structured import flatten

    before, after = (flatten(codec.observation_space, o, single=True)[0] for o in (obs, back))
    for leaf in codec.structure:
        cols = slice(leaf.start, leaf.start + leaf.size)
        if leaf.integer:  # integer fields are written as they are
            assert np.array_equal(before[cols], after[cols]), leaf.tag
        elif fmt == "raw":
            assert np.max(np.abs(before[cols] - after[cols])) <= 0.5e-3 + 1e-6, leaf.tag
        elif fmt == "tokenized":  # values are clipped to the range fitted on the data, then within half a step
            lo, hi = codec.ranges["observation"][cols, 0], codec.ranges["observation"][cols, 1]
            step = (hi - lo) / 999
            assert np.all(np.abs(np.clip(before[cols], lo, hi) - after[cols]) <= step / 2 + 1e-6), leaf.tag
        else:  # the centre of the value's bin
            for j in range(cols.start, cols.stop):
                edges = codec.edges["observation"][j]
                i = np.clip(np.searchsorted(edges[1:-1], before[j], side="right"), 0, len(edges) - 2)
                assert after[j] == pytest.approx((edges[i] + edges[i + 1]) / 2, abs=1e-6), leaf.tag
    for path, _ in _leaves(obs):  # every field is named by its key path, in the space's order
        tag = ".".join(p if isinstance(p, str) else f"item{p}" for p in path)
        assert f"<{tag}>" in text and f"</{tag}>" in text


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_batch_encodes_as_its_single_observations(fmt):
    codec = _codec("nested", fmt)
    batch = _batch(structured_space("nested"), 16, 3)
    from rlft.envs.observations import unbatch

    singles = [codec.encode_observation(o) for o in unbatch(batch, 16)]
    assert codec.encode_observations(batch).to_pylist() == singles
    first = singles[0]
    assert first.startswith("<goal.item0>") and "<goal.item1>" in first and "<mode>" in first and "<pos>" in first
    assert "<observation>" in codec.build_prompt(unbatch(batch, 1)[0])


def test_a_space_without_a_text_form_is_named_by_its_key_path():
    from gymnasium import spaces

    with pytest.raises(InvalidInputError, match=r"observation\.note: Text"):
        make_codec("raw", structured_space("text"), spaces.Discrete(2))
    seq = spaces.Tuple((spaces.Box(0, 1, (1,)), spaces.Sequence(spaces.Discrete(2))))
    with pytest.raises(InvalidInputError, match=r"observation\.1: Sequence"):
        make_codec("raw", seq, spaces.Discrete(2))
    graph = spaces.Dict({"g": spaces.Graph(spaces.Box(0, 1, (2,)), None)})
    with pytest.raises(InvalidInputError, match=r"observation\.g: Graph"):
        make_codec("raw", graph, spaces.Discrete(2))
    with pytest.raises(InvalidInputError, match="actions must be a Box or Discrete"):
        make_codec("raw", spaces.Box(0, 1, (2,)), spaces.Dict({"a": spaces.Discrete(2)}))


def test_wrong_structured_observations_are_clear_errors():
    codec = _codec("dict", "raw")
    with pytest.raises(InvalidInputError, match="no 'b'"):
        codec.encode_observation({"a": np.zeros(3)})
    with pytest.raises(InvalidInputError, match="field b value 7 is not an integer in 0..2"):
        codec.encode_observation({"a": np.zeros(3), "b": 7})
    with pytest.raises(InvalidInputError, match="NaN"):
        codec.encode_observation({"a": np.array([0.0, np.nan, 0.0]), "b": 1})


@pytest.mark.parametrize("kind", ["dict", "tuple"])
def test_minari_datasets_with_dict_and_tuple_observations_serialize(cli, tmp_path, kind):
    """The two crashes of the issue: datasets recorded by Minari's own DataCollector."""
    from rlft.codecs.base import load_codec

    register_structured_envs()
    make_minari_dataset(f"test/{kind}-v0", env_id=STRUCTURED_ENV_IDS[kind], episodes=5)
    out = tmp_path / kind
    result = cli("data", "serialize", f"test/{kind}-v0", "--out", out, "--format", "raw", "--precision", "3")
    assert result.exit_code == 0, result.output
    codec = load_codec(out)
    rows = pq.read_table(sorted(glob.glob(str(out / "data" / "train-*.parquet")))[0]).to_pylist()
    assert len(rows) > 10
    for row in rows[:20]:
        inner = row["prompt"][len("<observation>"): row["prompt"].rindex("</observation>")]
        back = codec.decode_observation(inner)
        flat = np.concatenate([np.atleast_1d(v).ravel() for _, v in _leaves(back)])
        # the observation column is the flat row of values in the codec's field order
        assert np.allclose(flat, row["observation"], atol=6e-4)
    tag = "a" if kind == "dict" else "item0"
    assert rows[0]["prompt"].startswith(f"<observation><{tag}>")


def test_serialize_refuses_a_text_field_before_reading(cli, tmp_path):
    register_structured_envs()
    make_minari_dataset("test/text-v0", env_id=STRUCTURED_ENV_IDS["text"], episodes=2)
    result = cli("data", "serialize", "test/text-v0", "--out", tmp_path / "out")
    assert result.exit_code == 2
    assert "observation.note: Text" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_evaluation_names_the_field_that_differs():
    from rlft.envs.vector_envs import spaces_mismatch

    codec = _codec("nested", "raw")
    other = structured_space("nested")
    other.spaces["goal"] = type(other.spaces["goal"])((other.spaces["goal"].spaces[0],
                                                         other.spaces["goal"].spaces[0]))
    assert spaces_mismatch(codec.observation_space, structured_space("nested")) is None
    assert spaces_mismatch(codec.observation_space, other).startswith("goal.1: MultiBinary")


@pytest.mark.slow
def test_pointmaze_collect_serialize_train_evaluate(cli, tmp_path):
    """A real goal-conditioned environment (gymnasium-robotics PointMaze, Dict observations) end to end."""
    pytest.importorskip("gymnasium_robotics")
    env = "PointMaze_UMaze-v3"
    assert cli("data", "collect", "--env", env, "--policy", "random", "--episodes", "4", "--num-envs", "2",
               "--max-episode-steps", "50", "--dataset-id", "test/pointmaze-v0").exit_code == 0
    data = tmp_path / "data"
    assert cli("data", "serialize", "test/pointmaze-v0", "--out", data, "--precision", "2",
               "--prompt-style", "chat").exit_code == 0
    rows = pq.read_table(sorted(glob.glob(str(data / "data" / "train-*.parquet")))[0]).to_pylist()
    user = rows[0]["prompt"][-1]["content"]
    assert "<achieved_goal>" in user and "<desired_goal>" in user and "<observation>" in user
    assert cli("model", "init", "--dataset", data, "--out", tmp_path / "tiny").exit_code == 0
    assert cli("train", "sft", "--dataset", data, "--model", tmp_path / "tiny", "--out", tmp_path / "sft",
               "--no-lora", "--max-steps", "3", "--eval-split", "none").exit_code == 0
    report = tmp_path / "llm.json"
    result = cli("eval", "--policy", f"llm:{tmp_path / 'sft'}", "--episodes", "2", "--num-envs", "2",
                 "--max-episode-steps", "5", "--constrained", "--out", report)
    assert result.exit_code == 0, result.output
    llm = json.loads(report.read_text())
    assert llm["episodes"] == 2 and llm["invalid_action_rate"] == 0.0  # the grammar makes every answer valid
    assert cli("train", "bc", "--dataset", data, "--out", tmp_path / "bc.pt").exit_code == 0
    result = cli("eval", "--env", env, "--policy", f"bc:{tmp_path / 'bc.pt'}", "--episodes", "2", "--num-envs",
                 "2", "--max-episode-steps", "5", "--out", tmp_path / "bc.json")
    assert result.exit_code == 0, result.output

    # the env reward restores a recorded Dict state into the real maze and scores the action there
    from rlft.codecs.base import load_codec
    from rlft.train.grpo.rewards import EnvReward

    codec = load_codec(data)
    reward = EnvReward(codec, seed=0)
    row = rows[5]
    scores = reward(prompts=[row["prompt"]] * 2, completions=[row["completion"], "nonsense"],
                    observation=[row["observation"]] * 2)
    reward.close()
    assert 0.0 <= scores[0] <= 1.0 and scores[1] == reward.low


@settings(max_examples=100, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(list("ab <>&;lgtamp")), min_size=1, max_size=30))
def test_text_observations_are_escaped_and_read_back(text):
    from gymnasium import spaces

    codec = make_codec("raw", spaces.Text(40), spaces.Discrete(2))
    written = codec.encode_observation(text)
    assert "<" not in written and ">" not in written  # no observation can open or close a tag
    assert codec.decode_observation(written) == text
    assert codec.encode_observations((text, "x")).to_pylist()[0] == written


def test_text_observation_datasets_serialize_train_and_evaluate(cli, tmp_path):
    """A Text-observation env recorded by Minari's DataCollector, through serialize, SFT and evaluation."""
    register_structured_envs()
    make_minari_dataset("test/words-v0", env_id=STRUCTURED_ENV_IDS["words"], episodes=4)
    data = tmp_path / "data"
    assert cli("data", "serialize", "test/words-v0", "--out", data).exit_code == 0
    rows = pq.read_table(sorted(glob.glob(str(data / "data" / "train-*.parquet")))[0]).to_pylist()
    assert rows[1]["prompt"] == "<observation>step 1 &lt;odd&gt; &amp; go</observation>\n"
    assert rows[1]["observation"] == "step 1 <odd> & go"  # the observation column keeps the text itself
    assert cli("model", "init", "--dataset", data, "--out", tmp_path / "tiny").exit_code == 0
    assert cli("train", "sft", "--dataset", data, "--model", tmp_path / "tiny", "--out", tmp_path / "sft",
               "--no-lora", "--max-steps", "2", "--eval-split", "none").exit_code == 0
    report = tmp_path / "llm.json"
    result = cli("eval", "--policy", f"llm:{tmp_path / 'sft'}", "--episodes", "3", "--num-envs", "2",
                 "--constrained", "--out", report)
    assert result.exit_code == 0, result.output
    assert json.loads(report.read_text())["episodes"] == 3
    result = cli("train", "bc", "--dataset", data, "--out", tmp_path / "bc.pt")
    assert result.exit_code == 2 and "numeric observations" in result.output
