"""The rlft4rl profile writes RLFT4RL's format character for character, and rlft reads it back."""

from __future__ import annotations

import glob
import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factories import make_minari_dataset
from rlft.codecs.base import codec_from_dict
from rlft.codecs.factory import make_codec

# --- reference: RLFT4RL's own formatting functions, copied verbatim (github.com/abenechehab/rlft4rl, MIT,
# src/rlft4rl/data/d4rl.py and src/rlft4rl/utils.py at commit 60f3c94), used only as the test oracle ------------


def obs_to_prompt(obs):
    # Convert obs list to a comma-separated string without brackets
    obs_string = ",".join([f"{val:.5f}" for val in obs])
    prompt = f"""<observation>{obs_string}</observation>"""
    return prompt


def action_to_prompt(action):
    # Convert obs list to a comma-separated string without brackets
    if action.shape:  # noqa: SIM108 (kept verbatim)
        action_string = ",".join([f"{val:.5f}" for val in action])
    else:
        action_string = str(action)
    prompt = f"""<action>{action_string}</action>"""
    return prompt


def scale_observation_to_tokens(obs_values, obs_ranges):
    """Scale observation values to 0-999 range for single-token encoding"""
    scaled = []
    for i, val in enumerate(obs_values):
        min_val, max_val = obs_ranges[i]
        # Clamp and scale to 0-999
        clamped = max(min_val, min(max_val, val))
        scaled_val = int(((clamped - min_val) / (max_val - min_val)) * 999)
        scaled.append(str(scaled_val))
    return scaled


# ---------------------------------------------------------------------------------------------------------------

OBS = np.random.default_rng(0).standard_normal((500, 17)) * 2
ACT = np.random.default_rng(1).uniform(-1, 1, (500, 6)).astype(np.float32)


def _codec(fmt: str):
    from gymnasium import spaces

    codec = make_codec(fmt, spaces.Box(-np.inf, np.inf, (17,), np.float64), spaces.Box(-1, 1, (6,), np.float32),
                       observations=OBS, actions=ACT, profile="rlft4rl", env_id="HalfCheetah-v5",
                       system="You control HalfCheetah.")
    return codec_from_dict(json.loads(json.dumps(codec.to_dict())))  # the profile lives in the codec file


values = st.floats(-50, 50, allow_nan=False) | st.sampled_from([-0.0, 0.0, -1e-6, -4.9e-6, 5e-6, -5.1e-6, 1.000005])


@settings(max_examples=200, deadline=None)
@given(obs=st.lists(values, min_size=17, max_size=17))
def test_prompts_are_character_identical_to_rlft4rl(obs):
    codec = _codec("raw")
    obs = np.array(obs)
    expected = f"### Instructions: You control HalfCheetah.\n ### User: {obs_to_prompt(obs)}\n ### Controller: <action>"
    assert codec.build_prompt(obs) == expected
    assert codec.encode_observations(obs[None, :]).to_pylist()[0] == obs_to_prompt(obs)[13:-14]


@settings(max_examples=100, deadline=None)
@given(act=st.lists(st.floats(-1, 1, allow_nan=False), min_size=6, max_size=6))
def test_completions_are_rlft4rl_answers_and_decode_back(act):
    codec = _codec("raw")
    act = np.array(act, dtype=np.float32)
    completion = codec.build_completion(act)
    assert completion == action_to_prompt(act)[len("<action>"):]  # the tag was prefilled in the prompt
    assert np.allclose(codec.decode_action(completion), act, atol=5e-6)
    assert np.allclose(codec.decode_action(action_to_prompt(act)), act, atol=5e-6)  # with the tag, too


def test_tokenized_profile_truncates_as_rlft4rl_does():
    codec = _codec("tokenized")
    ranges = codec.ranges["observation"].tolist()
    texts = codec.encode_observations(OBS).to_pylist()
    expected = [",".join(scale_observation_to_tokens(o, ranges)) for o in OBS]
    assert texts == expected
    plain = make_codec("tokenized", codec.observation_space, codec.action_space, observations=OBS, actions=ACT)
    nearest = plain.encode_observations(OBS).to_pylist()
    assert sum(a != b.replace(" ", ",") for a, b in zip(texts, nearest, strict=True)) > 100  # they do differ


def test_serialize_with_the_profile_and_evaluate_constrained(cli, tmp_path):
    make_minari_dataset("test/cartpole-v0", episodes=4, seed=3)
    out = tmp_path / "data"
    result = cli("data", "serialize", "test/cartpole-v0", "--out", out, "--profile", "rlft4rl")
    assert result.exit_code == 0, result.output
    rows = pq.read_table(sorted(glob.glob(str(out / "data" / "train-*.parquet")))[0]).to_pylist()
    for row in rows[:50]:
        obs = np.asarray(row["observation"], dtype=np.float32)
        assert row["prompt"].endswith(f" ### User: {obs_to_prompt(obs)}\n ### Controller: <action>")
        assert row["completion"] == action_to_prompt(np.int64(row["action"]))[len("<action>"):]
    assert cli("model", "init", "--dataset", out, "--out", tmp_path / "tiny").exit_code == 0
    report = tmp_path / "r.json"
    result = cli("eval", "--policy", f"llm:{tmp_path / 'tiny'}", "--codec", out, "--episodes", "2",
                 "--num-envs", "2", "--constrained", "--out", report)
    assert result.exit_code == 0, result.output
    assert json.loads(report.read_text())["invalid_action_rate"] == 0.0  # the grammar knows the prefilled tag


def test_bad_profile_options_are_refused(cli, tmp_path):
    make_minari_dataset("test/cartpole-v0", episodes=2)
    for args, message in ((["--profile", "rlft5rl"], "unknown --profile"), (["--separator", ";"], "--separator"),
                          (["--prefill", "--prompt-style", "chat"], "--prefill needs")):
        result = cli("data", "serialize", "test/cartpole-v0", "--out", tmp_path / "o", *args)
        assert result.exit_code == 2 and message in result.output, (args, result.output)
    with pytest.raises(ValueError, match="plain, single-turn"):
        from rlft.codecs.template import PromptTemplate

        PromptTemplate(style="chat", prefill=True)


def _write_rlft4rl_file(path, n: int = 30, old_layout: int = 5):
    """A file as RLFT4RL's d4rl.py writes it (and a few lines of its older chat layout, ", " inside spaced tags)."""
    with path.open("w") as f:
        for o, a in zip(OBS[:n], ACT[:n], strict=True):
            f.write(json.dumps({"observation": obs_to_prompt(o), "action": action_to_prompt(a)}) + "\n")
        for o, a in zip(OBS[n: n + old_layout], ACT[n: n + old_layout], strict=True):
            user = "<observation> " + ", ".join(f"{v:.5f}" for v in o) + " </observation>"
            answer = "<action> " + ", ".join(f"{v:.5f}" for v in a) + " </action>"
            f.write(json.dumps({"messages": [{"role": "system", "content": "..."}, {"role": "user", "content": user},
                                             {"role": "assistant", "content": answer}]}) + "\n")


def test_import_reads_rlft4rl_files_into_a_dataset_folder(cli, tmp_path):
    from rlft.codecs.base import load_codec

    source = tmp_path / "halfcheetah_expert_5.json"
    _write_rlft4rl_file(source)
    out = tmp_path / "imported"
    result = cli("data", "import", "rlft4rl", source, "--env", "HalfCheetah-v5", "--out", out, "--validation", "0.2")
    assert result.exit_code == 0, result.output
    codec = load_codec(out)
    assert codec.template.prefill and codec.separator == ","
    rows = []
    for split in ("train", "validation"):
        rows += pq.read_table(glob.glob(str(out / "data" / f"{split}-*.parquet"))[0]).to_pylist()
    assert len(rows) == 35 and sorted(r["step"] for r in rows) == list(range(35))
    for row in rows:
        i = row["step"]
        assert f" ### User: {obs_to_prompt(OBS[i])}\n ### Controller: <action>" in row["prompt"]
        assert row["completion"] == action_to_prompt(ACT[i])[len("<action>"):]
        assert np.allclose(codec.decode_action(row["completion"]), ACT[i], atol=5e-6)
        assert np.isnan(row["reward"])
    card = (out / "README.md").read_text()
    assert "episode boundaries and rewards" in card and "rlft4rl" in card


@pytest.mark.parametrize("content,message", [
    ('{"observation": "<observation>1,2</observation>", "action": "<action>0.1,0.2,0.3,0.4,0.5,0.6</action>"}\n',
     "observations have 2 values"),
    ("not json\n", "line 1 is not JSON"),
    ('{"observation": "<observation>1,x</observation>", "action": "<action>1</action>"}\n', "line 1: observation"),
    ('{"prompt": "p"}\n', "line 1: not an RLFT4RL record"),
    ("", "holds no records"),
    # a bad line among good ones is named by its line in the file (blank lines counted)
    ('{"observation": "<observation>' + ",".join(["0"] * 17) + '</observation>", "action": "<action>'
     + ",".join(["0"] * 6) + '</action>"}\n\n{"observation": "<observation>1,2</observation>", "action": '
     '"<action>0</action>"}\n', "line 3: the observation has 2 values, line 1's has 17"),
])
def test_import_refuses_bad_files_in_one_line(cli, tmp_path, content, message):
    source = tmp_path / "bad.json"
    source.write_text(content)
    result = cli("data", "import", "rlft4rl", source, "--env", "HalfCheetah-v5", "--out", tmp_path / "out")
    assert result.exit_code == 2 and message in result.output, result.output
    assert not (tmp_path / "out").exists()
