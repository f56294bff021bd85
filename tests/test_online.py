"""``rlft train online``: PPO / TRPO whose policy network is a tiny transformer reading codec text, the MLP
baseline against SB3's own PPO, saving, loading, evaluating, and bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from factories import make_cartpole_text_model
from rlft.core.errors import InvalidInputError
from rlft.train.online_config import OnlineConfig

SMALL_TRPO = """CartPole-v1:
  n_envs: 2
  n_timesteps: 256
  policy: MlpPolicy
  n_steps: 128
  batch_size: 128
  learning_rate: !!float 1e-3
  n_critic_updates: 2
  policy_kwargs: {activation_fn: relu, net_arch: {pi: [16], vf: [16]}}
"""


def _invoke(*args):
    from typer.testing import CliRunner

    from rlft.cli.main import app

    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def pole(tmp_path_factory):
    """CartPole random-play data (raw codec, plain prompts) and a tiny model whose tokenizer reads it."""
    return make_cartpole_text_model(tmp_path_factory.mktemp("online"))


def _backbone_weights(path):
    from transformers import AutoModel

    return {n: p.detach().clone() for n, p in AutoModel.from_pretrained(path).named_parameters()}


@pytest.mark.parametrize("algo,mode", [("ppo", "frozen"), ("trpo", "full")])
def test_llm_backbone_trains_saves_loads_and_evaluates(pole, tmp_path, algo, mode):
    from rlft.policy.backbone import TransformerFeatures, load_online
    from rlft.train.online import train_online

    data, model_dir = pole
    hyper = tmp_path / "trpo.yaml"
    hyper.write_text(SMALL_TRPO)
    out = tmp_path / f"run-{algo}"
    info = train_online(OnlineConfig(env="CartPole-v1", out=out, algo=algo, backbone=str(model_dir),
                                     backbone_mode=mode, codec=str(data), timesteps=256, eval_episodes=2,
                                     hyperparams=hyper if algo == "trpo" else None, seed=1))
    assert info["timesteps"] >= 256 and info["steps_per_second"] > 0 and info["curve"]
    assert (out / "curve.png").stat().st_size > 1000
    model, meta = load_online(out)
    extractor = model.policy.features_extractor
    assert isinstance(extractor, TransformerFeatures) and meta["algo"] == algo
    if algo == "trpo":  # an activation from the hyperparameter file is saved by name and comes back as its class
        from torch import nn

        assert meta["policy_kwargs"]["activation_fn"] == "relu" and model.policy.activation_fn is nn.ReLU
    before = _backbone_weights(model_dir)
    after = {n: p.detach() for n, p in extractor.backbone.named_parameters()}
    changed = [n for n in before if not np.allclose(before[n].numpy(), after[n].numpy())]
    if mode == "full":
        assert changed, "training the full backbone changed none of its weights"
    else:
        assert not changed, f"a frozen backbone changed: {changed[:3]}"
    # the same observation gives the same action before and after loading (the weights came back)
    obs = np.array([[0.01, -0.02, 0.03, 0.04], [0.1, 0.2, -0.1, -0.3]], dtype=np.float32)
    actions, _ = model.predict(obs, deterministic=True)
    assert actions.shape == (2,) and set(actions.tolist()) <= {0, 1}
    result = _invoke("eval", "--policy", f"online:{out}", "--episodes", "3", "--out", tmp_path / f"{algo}.json")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / f"{algo}.json").read_text())
    assert report["policy_kind"] == "online" and report["episodes"] == 3 and report["env_id"] == "CartPole-v1"
    # an online RUN is a results run too: steps, seconds, throughput and its learning curve
    results = tmp_path / "results"
    result = _invoke("results", "record", "online-test", "--seed", "1", "--run", f"llm={out}",
                     "--report", f"llm={tmp_path / f'{algo}.json'}", "--results-dir", results, "--reproduce", "-")
    assert result.exit_code == 0, result.output
    run = json.loads((results / "online-test" / "seed-1.json").read_text())["runs"]["llm"]
    assert run["stage"] == f"online {algo}" and run["global_step"] == info["timesteps"]
    assert run["train_steps_per_second"] == pytest.approx(info["steps_per_second"])
    assert run["curve"] == info["curve"] and run["final_eval_return"] == info["eval"]["mean"]
    # and SB3's per-update diagnostics: how far the updates moved the policy, how well the value head fit
    assert info["update_signals"] and all(row["step"] >= 1 for row in info["update_signals"])
    kl = "approx_kl" if algo == "ppo" else "kl_divergence_loss"
    assert run[f"{kl}_mean"] == pytest.approx(np.mean([row[kl] for row in info["update_signals"]]))


def test_mlp_baseline_is_sb3_ppo_exactly(tmp_path):
    """--backbone mlp: the same algorithm, hyperparameters and seeds as SB3's own PPO, so the same weights."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    from rlft.policy.backbone import load_online
    from rlft.sources.hyperparams import load_hyperparams
    from rlft.train.online import train_online

    out = tmp_path / "mlp"
    train_online(OnlineConfig(env="CartPole-v1", out=out, algo="ppo", backbone="mlp", timesteps=512,
                              eval_episodes=1, seed=3))
    ours, _ = load_online(out)
    hp = load_hyperparams("ppo", "CartPole-v1")
    venv = make_vec_env("CartPole-v1", n_envs=hp.n_envs, seed=3)
    plain = PPO(hp.policy, venv, seed=3, verbose=0, device="cpu", **hp.algo_kwargs())
    plain.learn(total_timesteps=512)
    mine, theirs = ours.policy.state_dict(), plain.policy.state_dict()
    assert mine.keys() == theirs.keys()
    assert all(torch.equal(mine[k], theirs[k]) for k in mine)  # reading SB3's diagnostics changes nothing
    signals = json.loads((out / "rlft_online.json").read_text())["update_signals"]
    assert [row["step"] for row in signals] == [256, 512]  # one row per update: 8 envs x 32 steps each
    assert all({"approx_kl", "clip_fraction", "explained_variance", "value_loss"} <= row.keys() for row in signals)


def test_lora_backbone_trains_only_the_adapter(pole, tmp_path):
    from rlft.train.online import train_online

    data, model_dir = pole
    info = train_online(OnlineConfig(env="CartPole-v1", out=tmp_path / "lora", algo="ppo", backbone=str(model_dir),
                                     backbone_mode="lora", codec=str(data), timesteps=256, eval_episodes=1))
    full = train_online(OnlineConfig(env="CartPole-v1", out=tmp_path / "full", algo="ppo", backbone=str(model_dir),
                                     codec=str(data), timesteps=256, eval_episodes=1))
    assert 0 < info["trainable_parameters"] < full["trainable_parameters"]


def test_bad_online_settings_fail_before_anything_is_written(pole, tmp_path):
    from rlft.train.online import train_online

    data, model_dir = pole
    out = tmp_path / "bad"

    def run(**kw):
        train_online(OnlineConfig(**{"env": "CartPole-v1", "out": out, "backbone": str(model_dir),
                                     "codec": str(data), "timesteps": 64, **kw}))

    with pytest.raises(InvalidInputError, match="--algo must be one of"):
        run(algo="sac")
    with pytest.raises(InvalidInputError, match="CartPole-v9"):
        run(env="CartPole-v9")
    with pytest.raises(InvalidInputError, match="not a model folder"):
        run(backbone=str(tmp_path / "nowhere"))
    with pytest.raises(InvalidInputError, match="--backbone-mode"):
        run(backbone_mode="half")
    with pytest.raises(InvalidInputError, match="needs --codec"):
        run(codec=None, format="discretized")
    with pytest.raises(InvalidInputError, match="--backbone mlp reads the observations as numbers"):
        run(backbone="mlp")  # a codec given to the MLP was dropped silently
    with pytest.raises(InvalidInputError, match="does not match|HalfCheetah"):
        run(env="HalfCheetah-v5")  # a CartPole codec cannot write HalfCheetah observations
    (tmp_path / "notamodel").mkdir()
    with pytest.raises(InvalidInputError, match="cannot be loaded"):
        run(backbone=str(tmp_path / "notamodel"))
    assert not out.exists()


def test_the_hyperparameters_may_give_the_value_head_its_own_backbone(pole, tmp_path):
    from rlft.codecs import load_codec
    from rlft.train.online import policy_kwargs
    from rlft.train.online_config import OnlineConfig

    data, model = pole
    config = OnlineConfig(env="CartPole-v1", out=tmp_path / "r", backbone=str(model), codec=str(data))
    codec = load_codec(data)
    assert policy_kwargs(config, codec, None)["share_features_extractor"] is True
    assert policy_kwargs(config, codec, {"share_features_extractor": False})["share_features_extractor"] is False


def test_backbone_scaled_adam_steps_the_transformer_at_a_fraction_of_the_rate():
    """Adam's first step moves every weight by the rate: the tagged (backbone) weight by rate x scale."""
    import torch

    from rlft.policy.backbone import BackboneScaledAdam

    trunk, head = torch.nn.Parameter(torch.zeros(3)), torch.nn.Parameter(torch.zeros(3))
    trunk.rlft_backbone = True
    optimizer = BackboneScaledAdam([trunk, head], lr=0.5, backbone_lr_scale=0.1)
    (trunk.sum() + head.sum()).backward()
    optimizer.step()
    assert torch.allclose(trunk.detach(), torch.full((3,), -0.05), atol=1e-6)
    assert torch.allclose(head.detach(), torch.full((3,), -0.5), atol=1e-6)
    assert [g["lr"] for g in optimizer.param_groups] == [0.5, 0.5]  # SB3's schedule sets these; the scale stays


def test_backbone_lr_scale_is_trained_saved_and_loaded(pole, tmp_path):
    from rlft.policy.backbone import BackboneScaledAdam, load_online
    from rlft.train.online import train_online

    data, model_dir = pole
    out = tmp_path / "scaled"
    info = train_online(OnlineConfig(env="CartPole-v1", out=out, backbone=str(model_dir), codec=str(data),
                                     timesteps=256, eval_episodes=1, backbone_lr_scale=0.1, seed=2))
    assert info["backbone_lr_scale"] == 0.1
    model, _ = load_online(out)
    optimizer = model.policy.optimizer
    assert isinstance(optimizer, BackboneScaledAdam)
    trunk = {id(p) for p in model.policy.features_extractor.backbone.parameters()}
    assert [g["lr_scale"] for g in optimizer.param_groups] == [0.1, 1.0]
    assert {id(p) for p in optimizer.param_groups[0]["params"]} == trunk
    default = train_online(OnlineConfig(env="CartPole-v1", out=tmp_path / "default", backbone=str(model_dir),
                                        codec=str(data), timesteps=256, eval_episodes=1, seed=2))
    assert default["backbone_lr_scale"] == 0.1  # PPO's default for a transformer (row 10e)
    with pytest.raises(InvalidInputError, match="--backbone-lr-scale must be > 0"):
        train_online(OnlineConfig(env="CartPole-v1", out=tmp_path / "bad", backbone=str(model_dir),
                                  codec=str(data), backbone_lr_scale=0.0))


def test_check_freq_keeps_the_best_checked_policy(tmp_path):
    """--check-freq: seeded check episodes along the way; the run keeps the best policy checked, and rlft eval on
    the check's seeds plays it to the recorded best return."""
    from rlft.sources.experts import EVAL_SEED_OFFSET
    from rlft.train.online import train_online

    out = tmp_path / "run"
    info = train_online(OnlineConfig(env="CartPole-v1", out=out, timesteps=3000, check_freq=1000, check_episodes=3,
                                     eval_episodes=2, seed=2))
    checks = info["checks"]
    assert checks["seed"] == 2 + EVAL_SEED_OFFSET // 2 and checks["check_episodes"] == 3
    # every 1,000 steps (8 envs step together) and at the end, after the last rollout of 8 x 32 steps
    assert [s for s, _ in checks["history"]] == [1000, 2000, 3000, 3072] and info["timesteps"] == 3072
    best = max(r for _, r in checks["history"])
    assert checks["best_return"] == pytest.approx(best, abs=1e-3)
    assert checks["best_step"] == max(s for s, r in checks["history"] if r == pytest.approx(best, abs=1e-3))
    report = tmp_path / "check.json"
    result = _invoke("eval", "--policy", f"online:{out}", "--episodes", "3", "--seed", checks["seed"],
                     "--out", report)
    assert result.exit_code == 0, result.output
    assert json.loads(report.read_text())["return_mean"] == pytest.approx(checks["best_return"], abs=1e-6)
    from rlft.results.record import read_run_record

    kept = read_run_record(out)  # what results record keeps: the step kept and how far the last check was from it
    assert kept["kept_step"] == checks["best_step"] and kept["kept_check_return"] == checks["best_return"]
    assert kept["last_check_return"] == checks["history"][-1][1]
