"""`rlft data serialize`: Minari in, Hub-layout prompt/completion records out, one codec for both ways."""

from __future__ import annotations

import numpy as np
import pytest

from factories import make_continuous_minari_dataset, make_minari_dataset
from rlft.codecs import load_codec


def _load(out):
    import datasets

    return datasets.load_dataset(str(out), cache_dir=str(out) + "-hf-cache")


@pytest.fixture
def cartpole():
    return make_minari_dataset("cartpole/random-v0", episodes=12, seed=3)


def test_raw_cartpole_with_history_and_rtg(cli, tmp_path, cartpole):
    out = tmp_path / "cp"
    result = cli("data", "serialize", "cartpole/random-v0", "--out", out, "--history", "2", "--return-to-go",
                 "--splits", "0.5,0.25,0.25", "--seed", "1", "--plot")
    assert result.exit_code == 0, result.output
    ds = _load(out)
    assert set(ds) == {"train", "validation", "test"}
    assert sum(len(s) for s in ds.values()) == cartpole.total_steps  # one row per step
    episodes = [set(s["episode_id"]) for s in ds.values()]
    assert not (episodes[0] & episodes[1] or episodes[0] & episodes[2] or episodes[1] & episodes[2])
    assert set().union(*episodes) == set(range(12))

    codec = load_codec(out)
    train = ds["train"].to_pandas()
    for _, row in train.iterrows():
        assert codec.decode_action(row["completion"]) == row["action"]
    # The per-step path (used by evaluation) gives exactly the serialized prompt.
    ep = train[train.episode_id == train.episode_id.iloc[0]].sort_values("step")
    obs_texts = [codec.encode_observation(np.asarray(o)) for o in ep.observation]
    act_texts = [codec.encode_action(a) for a in ep.action]
    for t, (_, row) in enumerate(ep.iterrows()):
        history = list(zip(obs_texts[:t], act_texts[:t], strict=True))
        context = codec.template.context(history, rtg=row["return_to_go"])
        assert codec.template.build_prompt(obs_texts[t], context) == row["prompt"]
    # Return-to-go is the undiscounted remaining return of the episode.
    np.testing.assert_allclose(ep.return_to_go.to_numpy(), np.cumsum(ep.reward.to_numpy()[::-1])[::-1])
    assert ep.terminated.iloc[-1] or ep.truncated.iloc[-1]

    card = (out / "README.md").read_text()
    for needle in ("Splits are by episode", "episode return", "plots/returns.png", "return_to_go"):
        assert needle in card
    assert (out / "plots" / "returns.png").stat().st_size > 1000


@pytest.mark.parametrize("style", ["chat", "plain"])
def test_turns_write_each_step_as_the_conversation_evaluation_builds(cli, tmp_path, cartpole, style):
    """--turns K: a row's prompt is its episode so far (the last K turns), exactly as the per-step path builds
    it for episodic GRPO and evaluation, the recorded answers in place of the model's."""
    out = tmp_path / style
    result = cli("data", "serialize", "cartpole/random-v0", "--out", out, "--turns", "4", "--prompt-style", style,
                 "--history", "1", "--splits", "1,0,0")
    assert result.exit_code == 0, result.output
    codec = load_codec(out)
    assert codec.template.turns == 4  # saved with the codec: an SFT run and its evaluation read it back
    train = _load(out)["train"].to_pandas()
    checked = 0
    for _, ep in train.groupby("episode_id"):
        ep = ep.sort_values("step")
        obs_texts = [codec.encode_observation(np.asarray(o)) for o in ep.observation]
        act_texts = [codec.encode_action(a) for a in ep.action]
        past = []
        for t, (_, row) in enumerate(ep.iterrows()):
            context = codec.template.context(list(zip(obs_texts[:t], act_texts[:t], strict=True)))
            prompt = codec.template.build_conversation(past, obs_texts[t], context)
            got = row["prompt"] if style == "plain" else [dict(m) for m in row["prompt"]]
            assert got == prompt
            answer = codec.template.answer_text(act_texts[t])
            assert (row["completion"] if style == "plain" else row["completion"][0]["content"]) == answer
            past.append((codec.template.user_text(obs_texts[t], context), answer))
            checked += 1
    assert checked == len(train)
    if style == "chat":  # the window: system + 3 earlier turns + the current observation at most
        assert max(len(p) for p in train.prompt) == 1 + 2 * 3 + 1
    assert "conversation of its last 4 turns" in (out / "README.md").read_text()


@pytest.mark.slow
def test_sft_on_turns_data_is_evaluated_as_a_conversation(cli, tmp_path, cartpole):
    """The SFT run keeps the dataset's turns, so rlft eval plays it in the format it was trained on."""
    import json

    data, tiny, run = tmp_path / "ds", tmp_path / "tiny", tmp_path / "run"
    assert cli("data", "serialize", "cartpole/random-v0", "--out", data, "--turns", "3",
               "--prompt-style", "chat").exit_code == 0
    assert cli("model", "init", "--dataset", data, "--out", tiny).exit_code == 0
    result = cli("train", "sft", "--dataset", data, "--model", tiny, "--out", run, "--max-steps", "2",
                 "--batch-size", "4", "--eval-split", "none", "--no-lora")
    assert result.exit_code == 0, result.output
    assert load_codec(run).template.turns == 3
    result = cli("eval", "--policy", f"llm:{run}", "--episodes", "2", "--num-envs", "2", "--constrained",
                 "--out", tmp_path / "report.json")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["episodes"] == 2 and report["invalid_action_rate"] == 0.0
    assert json.loads((run / "rlft_run.json").read_text())["metrics"]["train_rows_dropped"] == 0
    # A --max-length that cuts the answers off: TRL drops those rows; rlft says how many, or refuses when none is left.
    short = cli("train", "sft", "--dataset", data, "--model", tiny, "--out", tmp_path / "short", "--max-steps", "1",
                "--batch-size", "4", "--eval-split", "none", "--no-lora", "--max-length", "200")
    assert short.exit_code == 0, short.output
    dropped = json.loads((tmp_path / "short" / "rlft_run.json").read_text())["metrics"]["train_rows_dropped"]
    assert dropped > 0 and f"{dropped:,} of" in " ".join(short.output.split())
    none_left = cli("train", "sft", "--dataset", data, "--model", tiny, "--out", tmp_path / "none", "--max-steps",
                    "1", "--eval-split", "none", "--no-lora", "--max-length", "16")
    assert none_left.exit_code == 2 and "every training row is longer than --max-length 16" in none_left.output


def test_turns_with_a_prefilled_answer_tag_is_refused(cli, tmp_path, cartpole):
    result = cli("data", "serialize", "cartpole/random-v0", "--out", tmp_path / "x", "--turns", "3", "--prefill")
    assert result.exit_code == 2 and "--turns writes conversations" in result.output
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("fmt", ["raw", "discretized", "tokenized"])
def test_continuous_formats_round_trip_and_normalized_score(cli, tmp_path, fmt):
    make_continuous_minari_dataset("mujoco/fake-v0", episodes=5, steps=40)
    out = tmp_path / fmt
    result = cli("data", "serialize", "mujoco/fake-v0", "--out", out, "--format", fmt, "--prompt-style", "chat",
                 "--bins", "16", "--tokens", "100")
    assert result.exit_code == 0, result.output
    ds = _load(out)
    codec = load_codec(out)
    assert codec.env_id == "HalfCheetah-v5"
    rows = ds["train"].to_list()
    assert rows[0]["prompt"][0]["role"] == "system" and rows[0]["completion"][0]["role"] == "assistant"
    for row in rows:
        decoded = codec.decode_action(row["completion"])
        assert decoded.shape == (6,)
        # the decoded action falls in the recorded action's own cell (bin, token, last printed digit): it
        # encodes to the same text; raw: within half the last printed digit (3 decimals)
        assert codec.encode_action(decoded) == codec.encode_action(np.asarray(row["action"]))
        if fmt == "raw":
            assert np.all(np.abs(decoded - np.asarray(row["action"])) <= 0.5e-3 + 1e-6)
    card = (out / "README.md").read_text()
    assert "normalized score (D4RL, x100)" in card
    # Without --plot no figure is drawn and the card links none (no broken image on the Hub).
    assert not (out / "plots").exists() and "plots/returns.png" not in card


@pytest.mark.parametrize("fmt", ["raw", "tokenized"])
def test_nonfinite_is_refused_with_episode_and_step(cli, tmp_path, fmt):
    """raw finds the NaN while writing (one pass), tokenized before (its scan): the same error either way, and
    an existing folder is kept as it was."""
    make_minari_dataset("cartpole/nan-v0", episodes=4, corrupt=(2, 3))
    out = tmp_path / "o"
    result = cli("data", "serialize", "cartpole/nan-v0", "--out", out, "--format", fmt)
    assert result.exit_code == 2
    assert "episode 2 step 3" in result.output and "--drop-nonfinite" in result.output
    assert not out.exists()

    result = cli("data", "serialize", "cartpole/nan-v0", "--out", out, "--format", fmt, "--drop-nonfinite")
    assert result.exit_code == 0, result.output
    ds = _load(out)
    assert 2 not in set().union(*(set(s["episode_id"]) for s in ds.values()))
    before = _digest(out)
    result = cli("data", "serialize", "cartpole/nan-v0", "--out", out, "--format", fmt, "--overwrite")
    assert result.exit_code == 2 and "episode 2 step 3" in result.output
    assert _digest(out) == before and sorted(p.name for p in tmp_path.iterdir()) == ["o", "o-hf-cache"]


def _digest(folder) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("env_id,options", [
    ("CartPole-v1", {"format": "raw", "history": 2, "return_to_go": True}),
    ("Pendulum-v1", {"format": "discretized", "edges_from": "bounds", "bins": 8}),
    ("FrozenLake-v1", {"format": "tokenized", "prompt_style": "chat"}),
])
def test_a_codec_fitted_on_nothing_is_written_in_one_pass_as_two_passes_write_it(tmp_path, monkeypatch, env_id,
                                                                                  options):
    """raw, edges over finite bounds, tokens of Discrete spaces: one read of the source (no scan first), and the
    same folder, byte for byte, as the two passes write with the episodes in memory or read again."""
    from rlft.codecs import factory
    from rlft.datasets import serialize as mod
    from rlft.datasets.serialize_options import SerializeConfig

    dataset_id = f"{env_id.split('-')[0].lower()}/passes-v0"
    make_minari_dataset(dataset_id, env_id=env_id, episodes=10, max_steps=40)

    def run(name: str, **extra):
        config = SerializeConfig(source=dataset_id, out=tmp_path / name, chunk_steps=50, **options, **extra)
        return mod.serialize(config), _digest(tmp_path / name)

    def no_scan(*args):
        raise AssertionError("a codec fitted on nothing reads the source once")

    with monkeypatch.context() as patch:
        patch.setattr(mod, "_scan_pass", no_scan)
        summary, one = run("one")
    monkeypatch.setattr(factory, "codec_fits_on_data", lambda *args, **kwargs: True)
    assert run("two") == (summary, one)
    assert run("read-twice", in_memory_steps=0) == (summary, one)
    assert summary["episodes"] == 10 and len(summary["splits"]) == 3
    assert sum(name.startswith("data/") for name in one) == 3  # a shard per split


def test_bad_options_and_existing_output(cli, tmp_path, cartpole, monkeypatch):
    import rlft.sources.minari_source as source

    def never(*args, **kwargs):
        raise AssertionError("a bad option must be refused before the source is read")

    real = source.load_minari
    monkeypatch.setattr(source, "load_minari", never)
    for args, message in [(["--format", "json"], "--format"), (["--splits", "0.5,0.5"], "three"),
                          (["--splits", "0.9,0.2,0.1"], "sum"), (["--bins", "0"], "--bins must be from 2 to 100,000"),
                          (["--tokens", "1", "--format", "tokenized"], "--tokens must be from 2 to 100,000"),
                          (["--edges-from", "bogus"], "--edges-from must be one of"),
                          (["--max-episodes", "0"], "--max-episodes must be at least 1"),
                          (["--max-episodes", "-1"], "--max-episodes must be at least 1")]:
        result = cli("data", "serialize", "cartpole/random-v0", "--out", tmp_path / "x", *args)
        assert result.exit_code == 2 and message in result.output, (args, result.output)
        assert not (tmp_path / "x").exists()
    monkeypatch.setattr(source, "load_minari", real)  # not undo(): that would drop the isolated data path
    out = tmp_path / "taken"
    out.mkdir()
    (out / "f").write_text("keep")
    result = cli("data", "serialize", "cartpole/random-v0", "--out", out)
    assert result.exit_code == 2 and "--overwrite" in result.output
    assert (out / "f").read_text() == "keep"


def test_interrupted_serialize_leaves_old_output(tmp_path, cartpole, monkeypatch):
    from rlft.datasets import serialize as mod
    from rlft.datasets.serialize_options import SerializeConfig

    out = tmp_path / "o"
    mod.serialize(SerializeConfig(source="cartpole/random-v0", out=out, chunk_steps=20))
    before = sorted(p.name for p in (out / "data").iterdir())
    calls = {"n": 0}
    real = mod.build_records

    def failing(chunk, codec):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(chunk, codec)

    monkeypatch.setattr(mod, "build_records", failing)
    with pytest.raises(KeyboardInterrupt):
        mod.serialize(SerializeConfig(source="cartpole/random-v0", out=out, chunk_steps=20, format="tokenized",
                                      overwrite=True))
    assert sorted(p.name for p in (out / "data").iterdir()) == before
    assert load_codec(out).kind == "raw"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o"]


def test_split_episodes_is_seeded_and_disjoint():
    from rlft.datasets.serialize import split_episodes

    ids = np.arange(50)
    a, b = split_episodes(ids, (0.8, 0.1, 0.1), 0), split_episodes(ids, (0.8, 0.1, 0.1), 0)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert [len(a[k]) for k in ("train", "validation", "test")] == [40, 5, 5]
    assert len(np.unique(np.concatenate(list(a.values())))) == 50
    small = split_episodes(np.arange(3), (0.8, 0.1, 0.1), 0)
    assert [len(v) for v in small.values()] == [1, 1, 1]
    assert list(split_episodes(np.arange(5), (1.0, 0.0, 0.0), 0)) == ["train"]


def test_local_folder_loader_never_serves_stale_rows(tmp_path, cartpole):
    from rlft.datasets import serialize as mod
    from rlft.datasets.folder import load_dataset_folder
    from rlft.datasets.serialize_options import SerializeConfig

    out = tmp_path / "o"
    mod.serialize(SerializeConfig(source="cartpole/random-v0", out=out, splits=(1.0, 0.0, 0.0)))
    assert list(load_dataset_folder(out)) == ["train"] and len(load_dataset_folder(out)["train"]) == 238
    mod.serialize(SerializeConfig(source="cartpole/random-v0", out=out, max_episodes=3, overwrite=True,
                                  splits=(1.0, 0.0, 0.0)))
    ds = load_dataset_folder(out)["train"]
    assert len(ds) == sum(len(e.rewards) for e in list(cartpole.iterate_episodes())[:3])


def test_arrow_storage_source(cli, tmp_path):
    """Minari's Arrow storage serializes exactly like HDF5 (same seeds, same rows)."""
    make_minari_dataset("cartpole/h5-v0", episodes=4, seed=7)
    make_minari_dataset("cartpole/arrow-v0", episodes=4, seed=7, data_format="arrow")
    rows = {}
    for source in ("cartpole/h5-v0", "cartpole/arrow-v0"):
        out = tmp_path / source.split("/")[1]
        assert cli("data", "serialize", source, "--out", out, "--splits", "1,0,0").exit_code == 0
        rows[source] = _load(out)["train"].to_pandas()[["prompt", "completion", "episode_id", "step"]]
    assert rows["cartpole/h5-v0"].equals(rows["cartpole/arrow-v0"])


def test_card_states_the_behaviour_policys_own_evaluation():
    from rlft.datasets.card import CardSpec, render_card

    policy = {"algo": "sac", "timesteps": 130000, "normalized_score": 39.4,
              "eval": {"mean_return": 4607.3, "std_return": 69.3, "episodes": 10}}
    summary = {"source_info": {"rlft": {"policy": "experts/hc.zip", "policy_metadata": policy}}, "episodes": 2,
               "steps": 20, "return_mean": 1.0, "return_std": 0.0, "return_min": 1.0, "return_max": 1.0,
               "prompt_style": "plain", "history": 0, "return_to_go": False, "dropped_episodes": [], "seed": 0}
    context = {"summary": summary, "source": "ns/x-v0", "env_id": "HalfCheetah-v5", "observation_space": "Box(17,)",
               "action_space": "Box(6,)", "codec": "raw", "glossary": {}, "example_prompt": "",
               "example_completion": "", "split_stats": {}}
    card = render_card(CardSpec(pretty_name="x", template="offline_rl.md", splits={"train": 20}, context=context))
    assert "| behaviour policy | `experts/hc.zip`: sac trained 130000 steps; its own evaluation 4607.3 +- 69.3" in card
    assert "(normalized 39.4) |\n| environment |" in card


def test_serialize_imports_neither_pandas_nor_matplotlib(tmp_path, cartpole):
    """Start-up is most of a small serialize: pyarrow's pandas check and the plot's matplotlib stay out."""
    import os
    import subprocess
    import sys

    script = ("import sys\nfrom rlft.cli.main import app\n"
              "try:\n    app(sys.argv[1:])\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
              "print(sorted(m for m in ('pandas', 'matplotlib') if m in sys.modules))")
    for extra in ([], ["--format", "discretized", "--prompt-style", "chat", "--history", "2", "--return-to-go"]):
        out = subprocess.run([sys.executable, "-c", script, "data", "serialize", "cartpole/random-v0", "--out",
                              str(tmp_path / "out"), "--overwrite", *extra], capture_output=True, text=True,
                             env=os.environ.copy(), check=True)
        assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout[-500:]


def _shaped_dataset(dataset_id: str, obs_space, steps: int = 10, episodes: int = 3):
    """A Minari dataset from buffers with any observation space (no env: spaces given)."""
    import gymnasium as gym
    import minari
    from minari.data_collector.episode_buffer import EpisodeBuffer

    act_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    rng = np.random.default_rng(0)
    buffers = [
        EpisodeBuffer(id=e, observations=np.stack([obs_space.sample() for _ in range(steps + 1)]),
                      actions=rng.uniform(-1, 1, (steps, 2)).astype(np.float32), rewards=rng.standard_normal(steps),
                      terminations=np.zeros(steps, bool), truncations=np.r_[np.zeros(steps - 1, bool), True])
        for e in range(episodes)
    ]
    return minari.create_dataset_from_buffers(dataset_id, buffers, action_space=act_space,
                                              observation_space=obs_space, algorithm_name="random")


def test_multidimensional_box_observations_are_flattened_row_major(cli, tmp_path):
    import gymnasium as gym
    import minari

    space = gym.spaces.Box(-1.0, 1.0, (3, 3, 3), np.float32)
    space.seed(0)
    _shaped_dataset("shapes/cube-v0", space)
    out = tmp_path / "cube"
    result = cli("data", "serialize", "shapes/cube-v0", "--out", out, "--precision", "2")
    assert result.exit_code == 0, result.output
    train = _load(out)["train"]
    codec = load_codec(out)
    source = minari.load_dataset("shapes/cube-v0")
    first = next(iter(source.iterate_episodes(episode_indices=[int(train[0]["episode_id"])])))
    step = int(train[0]["step"])
    flat = np.asarray(first.observations[step], dtype=np.float32).reshape(-1)  # row-major
    np.testing.assert_allclose(np.asarray(train[0]["observation"], dtype=np.float32), flat)
    assert len(codec.encode_observation(first.observations[step]).split()) == 27
    assert train[0]["prompt"].count(" ") >= 26


def test_image_observations_are_refused_in_one_line(cli, tmp_path):
    import gymnasium as gym

    space = gym.spaces.Box(0, 255, (64, 72, 3), np.uint8)
    space.seed(0)
    _shaped_dataset("shapes/image-v0", space, steps=3, episodes=1)
    result = cli("data", "serialize", "shapes/image-v0", "--out", tmp_path / "img")
    assert result.exit_code == 2 and "(64, 72, 3)" in result.output and "13,824 values" in result.output
    assert "--allow-large-observations" in result.output and not (tmp_path / "img").exists()
