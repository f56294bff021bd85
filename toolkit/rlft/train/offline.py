"""``rlft train offline``: TD3+BC and IQL on a dataset's transitions, with TorchRL's own losses (``TD3BCLoss``,
``IQLLoss``), target updates (``SoftUpdate``) and TensorDict batches; the loop is rlft's, one readable function per
algorithm (CleanRL's shape), seeded in one place.

Both read the same rows the LLM and BC-MLP train on: observations standardised with the training rows' mean and
std (TD3+BC's normalisation; BC-MLP's too), actions scaled to [-1, 1] by the space's bounds. Episode ends by
termination stop the bootstrap; truncations do not (a time limit is not a terminal state). IQL's rewards are
scaled by 1000 / (max - min episode return), as IQL does on locomotion. The RUN folder is :mod:`rlft.models.offline`'s.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from rlft.codecs.base import CODEC_FILENAME
from rlft.core.console import console, err_console, kv_table, progress
from rlft.core.errors import InvalidInputError, require
from rlft.core.io import atomic_output_dir, atomic_write_text, check_output_dir
from rlft.core.trackers import Trackers, move_logs, parse_report_to, scratch_logdir
from rlft.datasets.dataset import RlftDataset
from rlft.datasets.row_checks import check_box_actions, check_finite_rows
from rlft.envs.registry import make_env, normalized_score
from rlft.models.bc import BC_FORMAT, BCActions, BCFeatures, build_mlp, check_hidden, save_mlp_policy
from rlft.models.offline import (
    OFFLINE_CRITIC,
    OFFLINE_INFO,
    OFFLINE_POLICY,
    critic_payload,
    gaussian_head,
    q_network,
    v_network,
)
from rlft.sources.experts import EVAL_SEED_OFFSET
from rlft.sources.rollouts import run_episodes
from rlft.train.config_values import refuse_unneeded
from rlft.train.lifecycle import Stage
from rlft.train.offline_config import OfflineConfig

LOG_EVERY = 1000  # steps between curve points (mean losses over the window)


def warn_relabelled_actions(dataset: RlftDataset) -> None:
    """DART data (``data collect --noise N --label-actions clean``) records the policy's clean action while the
    environment was stepped with a noisy one: its rewards and next states do not follow from its actions. A policy
    imitating it is what DART wants; a critic learning Q(s, a) from it does not see how actions change outcomes.
    Measured: the IQL critic of row 11e (Pendulum, such data) ranked the SFT model's own draws into play below
    random, where the same method is row 12e's best on executed-action data."""
    labels = ((dataset.info.get("source_info") or {}).get("rlft") or {}).get("action_labels")
    if labels == "clean" and "executed_action" not in dataset.columns():
        err_console.print(f"[yellow]Warning:[/] {dataset.path}'s actions are the policy's clean labels, not the "
                          "noisy ones the environment was stepped with (DART): a critic learned from them does not "
                          "see what actions do; collect again (rlft records the executed action beside the label "
                          "since then) or with --label-actions executed",
                          highlight=False, soft_wrap=True)


class OfflineStage(Stage):
    """``rlft train offline``: the lifecycle of :mod:`rlft.train.lifecycle` with TorchRL's TD3+BC or IQL losses."""

    name = "offline"

    def check(self) -> None:
        require("torchrl", package="torchrl")
        self.trackers = parse_report_to(self.config.report_to)
        config = self.config  # another algorithm's settings, or checks that are off (hostile pass 17, U6)
        refuse_unneeded(config, {"td3bc": (config.algo == "td3bc", "with --algo td3bc"),
                              "iql": (config.algo == "iql", "with --algo iql"),
                              "checks": (config.check_steps > 0, "with --check-steps N")})
        check_hidden(list(config.hidden))
        check_output_dir(self.config.out, self.config.overwrite, inputs=[("--dataset", self.config.dataset)])

    def load_data(self) -> None:
        config = self.config
        dataset = RlftDataset.open(config.dataset, require_codec=False)
        self.root, codec = dataset.path, dataset.codec
        if codec.action_space.get("type") != "box":
            raise InvalidInputError(f"rlft train offline learns continuous (Box) actions; {config.dataset}'s are "
                                    f"{codec.action_space.get('type')}", hint="for discrete actions use rlft train "
                                    "bc or rlft train grpo")
        warn_relabelled_actions(dataset)
        data = dataset.transitions(config.split, config.max_train_samples)
        if len(data) == 0:
            raise InvalidInputError(f"{config.dataset}: the {config.split} split is empty")
        check_finite_rows(config.dataset, config.split, [("observation", data.observations),
                                                         ("action", data.actions),
                                                         ("next_observation", data.next_observations)])
        check_box_actions(config.dataset, config.split, data.actions, codec.action_space)
        self.features, self.targets = BCFeatures(codec.observation_space), BCActions(codec.action_space)
        self.features.fit(data.observations)
        self.targets.fit(data.actions)
        self.codec, self.data = codec, data
        self.reward_scale = _reward_scale(config, data)

    def build_model(self) -> None:
        """The batch of every transition; the networks are built by the algorithm's loop, seeded already."""
        self.batch = _tensordict(self.features, self.targets, self.data, self.reward_scale)
        self.train_loop = {"td3bc": _train_td3bc, "iql": _train_iql}[self.config.algo]

    def learn(self) -> dict[str, Any]:
        config, codec, data, reward_scale = self.config, self.codec, self.data, self.reward_scale
        logdir = scratch_logdir("offline")
        tracking = Trackers(self.trackers, logdir, Path(config.out).name, asdict(config))
        try:
            start = time.perf_counter()
            actor, q_nets, v_net, curve, checks = self.train_loop(config, self.batch, self.features, self.targets,
                                                                  codec, tracking)
            train_s = time.perf_counter() - start
        finally:
            tracking.close()
        info = {
            "format": BC_FORMAT, "stage": "offline", "algo": config.algo, "dataset": str(config.dataset),
            "env_id": codec.env_id, "env_kwargs": codec.env_kwargs, "rows": len(data),
            "episodes": int(len(np.unique(data.episode_id))), "reward_scale": reward_scale,
            "train_seconds": round(train_s, 2), "steps_per_second": round(config.steps / train_s, 1),
            "curve": curve, "checks": checks, "versions": _versions(),
            "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(config).items()},
        }
        with atomic_output_dir(config.out, config.overwrite) as tmp:
            save_mlp_policy(tmp / OFFLINE_POLICY, actor, config.hidden, codec, self.features, self.targets, info)
            import torch

            torch.save(critic_payload(q_nets, v_net, config.hidden, self.features, self.targets, reward_scale,
                                      config.discount, codec, info), tmp / OFFLINE_CRITIC)
            (tmp / CODEC_FILENAME).write_bytes((self.root / CODEC_FILENAME).read_bytes())
            atomic_write_text(tmp / OFFLINE_INFO, json.dumps(info, indent=2, default=str) + "\n")
            move_logs(logdir, tmp / "logs")
        _print_summary(config, info, len(data), curve, checks)
        return info


def train_offline(config: OfflineConfig) -> dict[str, Any]:
    """Train ``config.algo`` on the dataset's transitions; write the RUN folder; return its summary."""
    return OfflineStage(config).run()


def _print_summary(config: OfflineConfig, info: dict, rows: int, curve: list, checks: list) -> None:
    last = curve[-1] if curve else {}
    table = {"algo": config.algo, "dataset": str(config.dataset), "rows": rows, "steps": config.steps,
             "train seconds": info["train_seconds"], "steps/s": info["steps_per_second"],
             **{k: v for k, v in last.items() if k != "step"}, "run": str(config.out)}
    if checks:
        table["last check (normalized)"] = checks[-1].get("normalized_score", checks[-1]["mean_return"])
    console.print(kv_table(f"offline {config.algo} -> {config.out}", table))


def _reward_scale(config: OfflineConfig, data) -> float:
    if config.algo != "iql" or not config.normalize_rewards:
        return 1.0
    returns = data.episode_returns()
    span = float(returns.max() - returns.min()) if len(returns) > 1 else 0.0
    return 1000.0 / span if span > 0 else 1.0


def _tensordict(features: BCFeatures, targets: BCActions, data, reward_scale: float):
    """The whole split as one TensorDict (TorchRL's keys); a batch is ``td[indices]``."""
    import torch
    from tensordict import TensorDict

    def t(x):
        return torch.as_tensor(np.asarray(x, np.float32))

    n = len(data)
    terminated = torch.as_tensor(data.terminated.reshape(n, 1))
    return TensorDict({
        "observation": t(features(data.observations)),
        "action": t(targets.target(data.actions)),
        ("next", "observation"): t(features(data.next_observations)),
        ("next", "reward"): t(data.rewards.reshape(n, 1) * reward_scale),
        ("next", "done"): terminated,  # rows are independent transitions: only a termination ends the bootstrap
        ("next", "terminated"): terminated,
    }, batch_size=[n])


def _batches(config: OfflineConfig, n: int):
    import torch

    gen = torch.Generator().manual_seed(config.seed)
    for _ in range(config.steps):
        yield torch.randint(n, (config.batch_size,), generator=gen)


def _train_td3bc(config: OfflineConfig, data, features, targets, codec, tracking):
    """TD3+BC (Fujimoto & Gu 2021): TD3's twin critics and delayed actor, the actor's loss -lambda Q + MSE to the
    data's action, lambda = alpha / mean |Q|; targets updated with each actor update."""
    import torch
    from tensordict.nn import TensorDictModule
    from torchrl.modules import ValueOperator
    from torchrl.objectives import SoftUpdate, TD3BCLoss

    n_obs, n_act = features.n, targets.n
    actor_net = build_mlp(n_obs, list(config.hidden), n_act, box=True)
    actor = TensorDictModule(actor_net, in_keys=["observation"], out_keys=["action"])
    qvalue = ValueOperator(q_network(n_obs, n_act, list(config.hidden)), in_keys=["observation", "action"])
    loss = TD3BCLoss(actor, qvalue, bounds=(-1.0, 1.0), num_qvalue_nets=2, policy_noise=config.policy_noise,
                     noise_clip=config.noise_clip, alpha=config.alpha, loss_function="l2")
    loss.make_value_estimator(gamma=config.discount)
    updater = SoftUpdate(loss, tau=config.tau)
    actor_opt = torch.optim.Adam(loss.actor_network_params.values(True, True), lr=config.learning_rate)
    critic_opt = torch.optim.Adam(loss.qvalue_network_params.values(True, True), lr=config.learning_rate)
    log = _Log(config, features, targets, codec, lambda: _actor_state(loss, "actor_network", actor_net), tracking)
    with log.bar():
        for step, idx in enumerate(_batches(config, len(data)), start=1):
            batch = data[idx]
            q_loss, _ = loss.qvalue_loss(batch)
            critic_opt.zero_grad()
            q_loss.backward()
            critic_opt.step()
            values = {"loss_q": q_loss.detach()}
            if step % config.policy_freq == 0:
                actor_loss, extra = loss.actor_loss(batch)
                actor_opt.zero_grad()
                actor_loss.backward()
                actor_opt.step()
                updater.step()
                values.update(loss_actor=actor_loss.detach(), bc_loss=extra["bc_loss"], lmbd=extra["lmbd"])
            log.step(step, values)
    return _actor_state(loss, "actor_network", actor_net), _q_states(loss, qvalue, n_obs, n_act, config), None, \
        log.curve, log.checks


def _train_iql(config: OfflineConfig, data, features, targets, codec, tracking):
    """IQL (Kostrikov et al. 2021): V by expectile regression on the target Q, Q on r + gamma V(s'), the actor by
    advantage-weighted regression (exp(beta (Q - V)), capped at 100) on a Gaussian policy; actor learning rate on a
    cosine schedule, as CORL runs it. The saved actor is the Gaussian's mean."""
    import torch
    from tensordict.nn import TensorDictModule
    from torchrl.modules import IndependentNormal, ProbabilisticActor, ValueOperator
    from torchrl.objectives import IQLLoss, SoftUpdate

    n_obs, n_act = features.n, targets.n
    mean_net = build_mlp(n_obs, list(config.hidden), n_act, box=True)
    head = TensorDictModule(gaussian_head(mean_net, n_act), in_keys=["observation"], out_keys=["loc", "scale"])
    actor = ProbabilisticActor(head, in_keys=["loc", "scale"], distribution_class=IndependentNormal,
                               return_log_prob=False)
    qvalue = ValueOperator(q_network(n_obs, n_act, list(config.hidden)), in_keys=["observation", "action"])
    value = ValueOperator(v_network(n_obs, list(config.hidden)), in_keys=["observation"])
    loss = IQLLoss(actor, qvalue, value, num_qvalue_nets=2, temperature=config.temperature,
                   expectile=config.expectile, loss_function="l2")
    loss.make_value_estimator(gamma=config.discount)
    updater = SoftUpdate(loss, tau=config.tau)
    actor_opt = torch.optim.Adam(loss.actor_network_params.values(True, True), lr=config.learning_rate)
    q_opt = torch.optim.Adam(loss.qvalue_network_params.values(True, True), lr=config.learning_rate)
    v_opt = torch.optim.Adam(loss.value_network_params.values(True, True), lr=config.learning_rate)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(actor_opt, config.steps)
    log = _Log(config, features, targets, codec, lambda: _actor_state(loss, "actor_network", mean_net), tracking)
    with log.bar():
        for step, idx in enumerate(_batches(config, len(data)), start=1):
            batch = data[idx]
            values = {}
            for name, opt, fn in (("loss_value", v_opt, loss.value_loss), ("loss_q", q_opt, loss.qvalue_loss),
                                  ("loss_actor", actor_opt, loss.actor_loss)):
                value_loss, _ = fn(batch)
                opt.zero_grad()
                value_loss.backward()
                opt.step()
                values[name] = value_loss.detach()
            schedule.step()
            updater.step()
            log.step(step, values)
    v_net = v_network(n_obs, list(config.hidden))
    with loss.value_network_params.to_module(loss.value_network):
        v_net.load_state_dict(loss.value_network.module.state_dict())
    return _actor_state(loss, "actor_network", mean_net), _q_states(loss, qvalue, n_obs, n_act, config), v_net, \
        log.curve, log.checks


def _actor_state(loss, name: str, net):
    """A plain copy of the deterministic actor ``net`` with the loss's current parameters (TorchRL keeps the
    trained parameters in the loss module, functionally)."""
    import copy

    params = getattr(loss, f"{name}_params")
    with params.to_module(getattr(loss, name)):
        return copy.deepcopy(net).eval()


def _q_states(loss, qvalue, n_obs: int, n_act: int, config: OfflineConfig) -> list:
    """The Q ensemble (TorchRL stacks its members' parameters) as plain networks."""
    nets = []
    for i in range(loss.num_qvalue_nets):
        net = q_network(n_obs, n_act, list(config.hidden))
        with loss.qvalue_network_params[i].to_module(qvalue):
            net.load_state_dict(qvalue.module.state_dict())
        nets.append(net.eval())
    return nets


class _Log:
    """The progress bar, the curve (mean of each value over ``LOG_EVERY`` steps) and the closed-loop checks."""

    def __init__(self, config: OfflineConfig, features, targets, codec, actor_now, tracking):
        self.config, self.features, self.targets, self.codec, self.actor_now = config, features, targets, codec, \
            actor_now
        self.tracking = tracking
        self.curve: list[dict] = []
        self.checks: list[dict] = []
        self._sums: dict[str, float] = {}
        self._counts: dict[str, int] = {}

    def bar(self):
        import contextlib

        @contextlib.contextmanager
        def managed():
            with progress() as bar:
                self._bar = bar
                self._task = bar.add_task(f"offline {self.config.algo}", total=self.config.steps)
                yield

        return managed()

    def step(self, step: int, values: dict) -> None:
        for key, value in values.items():
            self._sums[key] = self._sums.get(key, 0.0) + float(value)
            self._counts[key] = self._counts.get(key, 0) + 1
        if step % LOG_EVERY == 0 or step == self.config.steps:
            point = {"step": step, **{k: round(self._sums[k] / self._counts[k], 5) for k in self._sums}}
            self.curve.append(point)
            self.tracking.log({f"train/{k}": v for k, v in point.items() if k != "step"}, step)
            self._sums, self._counts = {}, {}
            text = " ".join(f"{k} {v:.3g}" for k, v in point.items() if k != "step")
            self._bar.update(self._task, description=f"offline {self.config.algo} ({text})")
        if self.config.check_steps and (step % self.config.check_steps == 0 or step == self.config.steps):
            self.checks.append({"step": step, **play(self.actor_now(), self.features, self.targets, self.codec,
                                                      self.config.check_episodes, self.config.seed)})
            check = self.checks[-1]
            self.tracking.log({f"check/{k}": v for k, v in check.items() if k != "step"}, step)
            self._bar.console.print(f"step {step}: check return {check['mean_return']:.1f} "
                                    f"(normalized {check.get('normalized_score')})")
        self._bar.update(self._task, completed=step)


def play(actor, features: BCFeatures, targets: BCActions, codec, episodes: int, seed: int) -> dict:
    """Mean return (and normalized score) of the deterministic ``actor`` over ``episodes`` episodes, seeds
    ``EVAL_SEED_OFFSET + 1000 * seed + i`` (apart from rlft eval's), several envs at once."""
    import torch

    envs = [make_env(codec.env_id, **(codec.env_kwargs or {})) for _ in range(min(8, episodes))]

    def act(obs, _indices):
        with torch.no_grad():
            return targets.decode(actor(torch.from_numpy(features(obs))).numpy())

    try:
        stats = run_episodes(envs, act, episodes, EVAL_SEED_OFFSET + 1000 * seed)
    finally:
        for env in envs:
            env.close()
    mean = float(np.mean([s.episode_return for s in stats]))
    score = normalized_score(codec.env_id, mean)
    return {"mean_return": round(mean, 3), "normalized_score": None if score is None else round(score, 3)}


def _versions() -> dict:
    import tensordict
    import torch
    import torchrl

    return {"torchrl": torchrl.__version__, "tensordict": tensordict.__version__, "torch": torch.__version__}
