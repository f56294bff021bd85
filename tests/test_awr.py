"""A critic guides an LLM on continuous actions. Advantage-weighted SFT (``rlft train sft --critic RUN``): an IQL
critic's advantages decide how often each row is trained on, so a tiny LLM moves from the data's mean action toward
its rewarded one. Critic-ranked decoding (``rlft eval --critic RUN``): the critic picks among the LLM's own bin
draws. Critics that do not fit are refused."""

from __future__ import annotations

import numpy as np
import pytest

from factories import make_bandit_dataset, make_continuous_minari_dataset
from rlft.core.errors import InvalidInputError
from rlft.models.offline import load_critic
from rlft.train.awr import advantage_weights

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def bandit(tmp_path_factory):
    """A binned bandit dataset, an IQL run on it and a tiny model (module-wide: training them is the slow part)."""
    from typer.testing import CliRunner

    from rlft.cli.main import app

    root = tmp_path_factory.mktemp("awr")

    def cli(*args):
        return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)

    import os

    os.environ["MINARI_DATASETS_PATH"] = str(root / "minari")
    data = make_bandit_dataset(cli, root / "data", rows=400, fmt="binned", bins=16)
    iql = root / "iql"
    assert cli("train", "offline", "--dataset", data, "--out", iql, "--algo", "iql", "--steps", "300",
               "--hidden", "32,32", "--learning-rate", "3e-3").exit_code == 0
    model = root / "model"
    assert cli("model", "init", "--dataset", data, "--out", model, "--seed", "0").exit_code == 0
    return cli, data, iql, model, root


def test_weights_favour_the_rewarded_actions(bandit):
    _, _, iql, _, _ = bandit
    critic = load_critic(iql)
    obs = np.random.default_rng(0).uniform(-1, 1, (200, 3)).astype(np.float32)
    actions = np.linspace(-2, 2, 200, dtype=np.float32)[:, None]
    found = advantage_weights(critic, obs, actions, temperature=3.0, max_weight=100.0)
    near, far = np.abs(actions[:, 0] - 1.0) < 0.5, np.abs(actions[:, 0] - 1.0) > 2.0
    assert found.weights[near].mean() > 3 * found.weights[far].mean()
    assert found.weights.max() <= 100.0 and (found.weights >= 0).all()
    summary = found.summary(3.0, 100.0)
    assert 0 < summary["awr_effective_rows_fraction"] < 1
    flat = advantage_weights(critic, obs, actions, temperature=0.0, max_weight=100.0)
    np.testing.assert_allclose(flat.weights, 1.0)  # beta 0: plain SFT


def _mean_action(run, data) -> float:
    from rlft.datasets.loading import load_dataset_codec
    from rlft.models.run import load_policy_model
    from rlft.policy.bins import BinBackend

    codec = load_dataset_codec(str(data))
    model, tokenizer, _ = load_policy_model(str(run))
    prompts = [codec.build_prompt(o) for o in np.random.default_rng(1).uniform(-1, 1, (40, 3))]
    return float(np.mean([codec.decode_action(t)[0] for t in BinBackend(model, tokenizer, codec, "mean")
                          .generate(prompts)]))


def test_awr_sft_moves_the_llm_toward_the_rewarded_action(bandit):
    cli, data, iql, model, root = bandit
    common = ("--dataset", data, "--model", model, "--max-steps", "80", "--learning-rate", "3e-3",
              "--batch-size", "32", "--no-lora", "--seed", "0", "--eval-split", "none", "--save-steps", "1000")
    plain, weighted = root / "plain", root / "weighted"
    assert cli("train", "sft", *common, "--out", plain).exit_code == 0
    result = cli("train", "sft", *common, "--out", weighted, "--critic", iql)
    assert result.exit_code == 0, result.output
    import json

    metrics = json.loads((weighted / "rlft_run.json").read_text())["metrics"]
    assert metrics["awr_temperature"] == 3.0 and 0 < metrics["awr_effective_rows_fraction"] < 1
    plain_mean, weighted_mean = _mean_action(plain, data), _mean_action(weighted, data)
    assert abs(plain_mean) < 0.5  # imitation: the data's mean action
    assert weighted_mean > plain_mean + 0.4  # AWR: toward the rewarded action, 1


def test_critics_that_do_not_fit_are_refused(bandit, tmp_path):
    cli, data, _, model, _ = bandit
    td3 = tmp_path / "td3"
    assert cli("train", "offline", "--dataset", data, "--out", td3, "--algo", "td3bc", "--steps", "5",
               "--hidden", "8").exit_code == 0
    result = cli("train", "sft", "--dataset", data, "--model", model, "--out", tmp_path / "a", "--critic", td3)
    assert result.exit_code == 2 and "need a critic with a V network" in result.output
    assert not (tmp_path / "a").exists()
    make_continuous_minari_dataset("cheetah/awr-v0", episodes=3, steps=20)
    other = tmp_path / "cheetah"
    assert cli("data", "serialize", "cheetah/awr-v0", "--format", "raw", "--out", other).exit_code == 0
    cheetah_iql = tmp_path / "cheetah-iql"
    assert cli("train", "offline", "--dataset", other, "--out", cheetah_iql, "--steps", "5",
               "--hidden", "8").exit_code == 0
    result = cli("train", "sft", "--dataset", data, "--model", model, "--out", tmp_path / "b", "--critic",
                 cheetah_iql)
    assert result.exit_code == 2 and "learned on HalfCheetah-v5, the dataset is Pendulum-v1" in result.output
    with pytest.raises(InvalidInputError, match="no critic"):
        load_critic(tmp_path / "nowhere")


def test_the_critic_reward_scores_answers_by_q_within_the_datas_range(bandit):
    """GRPO's ``critic`` reward: Q(s, a) of the decoded answer, the rewarded action above the data's worst, bounds
    from the data's own rows, garbage at the floor; a GRPO run with it trains."""
    from rlft.datasets.loading import load_dataset_codec, load_dataset_dict
    from rlft.train.grpo.rewards import build_rewards

    cli, data, iql, model, root = bandit
    codec = load_dataset_codec(str(data))
    rows = load_dataset_dict(data)["train"]
    [reward] = build_rewards("critic", codec, rows.column_names, {"critic": {"critic": str(iql)}})
    reward.preflight(rows)
    assert -1e6 < reward.low < reward.high < 1e6
    obs = [rows[0]["observation"]] * 3
    values = reward(completions=[codec.build_completion(np.array([1.0])), codec.build_completion(np.array([-2.0])),
                                 "garbage"], observation=obs)
    assert values[0] > values[1] > values[2] == reward.low
    from test_rewards import GARBAGE

    garbage = reward(completions=GARBAGE, observation=[rows[0]["observation"]] * len(GARBAGE))
    assert all(np.isfinite(v) and reward.low <= v <= reward.high for v in garbage)
    out = root / "grpo-critic"
    result = cli("train", "grpo", "--dataset", data, "--model", model, "--out", out, "--reward", "critic",
                 "--critic", iql, "--max-steps", "2", "--num-generations", "4", "--batch-size", "8", "--no-lora")
    assert result.exit_code == 0, result.output
    import json

    record = json.loads((out / "rlft_run.json").read_text())
    assert record["rewards"] == [{"name": "critic", "low": reward.low, "high": reward.high}]
    # continuous actions, nothing said: sampled within the codec's grammar, with a KL to the start
    assert record["constrained_sampling"] is True and record["config"]["beta"] == 0.05


def _critic_ranked(model, data, iql, candidates: int, seed: int = 0):
    import gymnasium as gym

    from rlft.datasets.loading import load_dataset_codec
    from rlft.models.offline import load_critic
    from rlft.models.run import load_policy_model
    from rlft.policy.bins import BinBackend
    from rlft.policy.critic_rank import CriticRankPolicy
    from rlft.policy.llm_policy import LLMPolicy

    codec = load_dataset_codec(str(data))
    loaded, tokenizer, _ = load_policy_model(str(model))
    space = gym.make("Pendulum-v1").action_space
    base = LLMPolicy(codec, BinBackend(loaded, tokenizer, codec, "mean"), np.zeros(1, np.float32), space)
    return CriticRankPolicy(base, load_critic(iql), str(iql), candidates, seed=seed), base


def test_critic_ranked_decoding_plays_the_llms_draw_the_critic_rates_best(bandit):
    """An untrained LLM spreads its probability over every bin: its mean action sits near the middle, and the
    critic, choosing among 16 of its draws, plays actions near the rewarded one; never one it rates below the
    mean action."""
    _, data, iql, model, _ = bandit
    obs = np.random.default_rng(1).uniform(-1, 1, (40, 3)).astype(np.float32)
    policy, base = _critic_ranked(model, data, iql, candidates=16)
    slots = list(range(len(obs)))
    for slot, o in zip(slots, obs, strict=True):
        policy.begin_episode(slot, 0, 0, o)
    ranked = policy.act(obs, slots)
    mean = base.act(obs, slots)
    critic = load_critic(iql)
    assert (critic.q(obs, ranked) >= critic.q(obs, mean) - 1e-9).all()
    assert np.abs(ranked[:, 0] - 1.0).mean() < np.abs(mean[:, 0] - 1.0).mean() - 0.3
    drawn = base.backend.samples(200, np.random.default_rng(0))  # the draws follow the model's distributions
    assert drawn.shape == (40, 200, 1) and drawn.std() > 0.3
    # BCQ's threshold: only bins within a share of the most likely one's probability are drawn
    probs = np.asarray(base.backend.last_probs[0], dtype=np.float64)
    means = base.backend.bin_means[0].numpy()
    kept = base.backend.samples(200, np.random.default_rng(0), min_prob=0.5)
    for row, values in zip(probs, kept[:, :, 0], strict=True):
        allowed = set(means[row >= 0.5 * row.max()].tolist())
        assert set(values.tolist()) <= allowed
    assert kept.std() < drawn.std()
    info = policy.describe()["critic_rank"]
    assert info["candidates"] == 16 and info["algo"] == "iql" and 0.5 < info["drawn_chosen_rate"] <= 1
    assert info["mean_q_gain"] > 0


def test_eval_with_a_critic_reports_it_and_refuses_what_cannot_be_ranked(bandit, tmp_path):
    import json

    cli, data, iql, model, _ = bandit
    out = tmp_path / "ranked.json"
    result = cli("eval", "--policy", f"llm:{model}", "--codec", data, "--critic", iql, "--critic-candidates", "4",
                 "--episodes", "2", "--num-envs", "2", "--max-episode-steps", "5", "--out", out, "--quiet")
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["policy_info"]["critic_rank"]["critic"] == str(iql)
    assert report["policy_info"]["critic_rank"]["candidates"] == 4 and report["episodes"] == 2
    text = cli("eval", "--policy", f"llm:{model}", "--codec", data, "--critic", iql, "--bin-decoding", "off",
               "--episodes", "1", "--max-episode-steps", "2")
    assert text.exit_code == 2 and "not decoded over bins" in text.output
    missing = cli("eval", "--policy", f"llm:{model}", "--codec", data, "--critic", tmp_path / "nowhere")
    assert missing.exit_code == 2 and "no critic" in missing.output
    both = cli("eval", "--policy", f"llm:{model}", "--codec", data, "--critic", iql, "--search", "4")
    assert both.exit_code == 2 and "pass one of them" in both.output
    with pytest.raises(InvalidInputError, match="at least 2"):
        _critic_ranked(model, data, iql, candidates=1)
