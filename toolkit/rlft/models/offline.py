"""What ``rlft train offline`` (:mod:`rlft.train.offline`) leaves in its RUN folder, and how other stages load it.

RUN/ holds::

    policy.pt          the actor, in the behaviour-cloning file format (:mod:`rlft.models.bc`): an MLP on
                       standardised observations with a tanh output scaled to the action bounds, so ``rlft eval
                       --policy offline:RUN`` plays it exactly as ``bc:FILE`` plays a BC policy
    critic.pt          the critic: the Q networks (their minimum is Q), IQL's V network, the observation
                       standardisation and action scaling they read, the reward scale they were trained on
    rlft_offline.json  settings, dataset, env, training curve, closed-loop checks, timings
    rlft_codec.json    the dataset's codec (its spaces and env)

:class:`Critic` answers in the data's own reward units (the training reward scale divided out), so a critic's
advantage can weight an LLM's SFT rows or score its sampled actions.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlft.core.errors import InvalidInputError
from rlft.models.bc import BCActions, BCFeatures, build_mlp

OFFLINE_POLICY = "policy.pt"
OFFLINE_CRITIC = "critic.pt"
OFFLINE_INFO = "rlft_offline.json"
CRITIC_FORMAT = "rlft-critic-v1"


def q_network(n_obs: int, n_act: int, hidden: list[int]):
    """Q(s, a): an MLP on the standardised observation and the [-1, 1]-scaled action, concatenated."""
    from torch import nn

    class QNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = build_mlp(n_obs + n_act, hidden, 1, box=False)

        def forward(self, observation, action):
            import torch

            return self.net(torch.cat([observation, action], dim=-1))

    return QNetwork()


LOG_STD_RANGE = (-5.0, 2.0)  # IQL's Gaussian actor: state-independent log std, clamped (as CORL's)


def gaussian_head(mean_net, n_act: int):
    """IQL's actor head: loc = the tanh MLP's output, scale = exp(a learned, state-independent log std)."""
    import torch
    from torch import nn

    class GaussianHead(nn.Module):
        def __init__(self):
            super().__init__()
            self.mean_net = mean_net
            self.log_std = nn.Parameter(torch.zeros(n_act))

        def forward(self, observation):
            loc = self.mean_net(observation)
            return loc, self.log_std.clamp(*LOG_STD_RANGE).exp().expand_as(loc)

    return GaussianHead()


def v_network(n_obs: int, hidden: list[int]):
    """V(s): an MLP on the standardised observation."""
    return build_mlp(n_obs, hidden, 1, box=False)


@dataclass
class Critic:
    """A trained critic, batched in numpy: ``q(obs, act)``, ``v(obs)`` (IQL) and ``advantage(obs, act)``."""

    q_nets: list  # torch modules, eval mode
    v_net: Any  # torch module or None (TD3+BC learns no V)
    features: BCFeatures
    actions: BCActions
    reward_scale: float
    discount: float
    observation_space: dict
    action_space: dict
    info: dict

    def _inputs(self, obs, act=None):
        import torch

        x = torch.from_numpy(self.features(obs))
        return x if act is None else (x, torch.from_numpy(self.actions.target(np.asarray(act))))

    def q(self, obs, act) -> np.ndarray:
        """min over the Q networks, in the data's reward units."""
        import torch

        x, a = self._inputs(obs, act)
        with torch.no_grad():
            values = torch.stack([net(x, a).squeeze(-1) for net in self.q_nets]).min(0).values
        return values.numpy().astype(np.float64) / self.reward_scale

    def v(self, obs) -> np.ndarray:
        """V(s) in the data's reward units; a critic without a V network (TD3+BC) refuses."""
        import torch

        if self.v_net is None:
            raise InvalidInputError(f"this critic ({self.info.get('algo')}) has no V network",
                                    hint="train one with rlft train offline --algo iql")
        with torch.no_grad():
            values = self.v_net(self._inputs(obs)).squeeze(-1)
        return values.numpy().astype(np.float64) / self.reward_scale

    def advantage(self, obs, act) -> np.ndarray:
        return self.q(obs, act) - self.v(obs)


def critic_payload(q_nets: list, v_net, hidden: list[int], features: BCFeatures, targets: BCActions,
                   reward_scale: float, discount: float, codec, info: dict) -> dict:
    """What ``critic.pt`` holds: tensors and plain values (loadable with ``weights_only=True``)."""
    import torch

    return {
        "format": CRITIC_FORMAT,
        "q_state_dicts": [net.state_dict() for net in q_nets],
        "v_state_dict": None if v_net is None else v_net.state_dict(),
        "hidden": list(hidden),
        "observation_space": json.dumps(codec.observation_space),
        "action_space": json.dumps(codec.action_space),
        "obs_mean": torch.from_numpy(features.mean),
        "obs_std": torch.from_numpy(features.std),
        "act_center": torch.from_numpy(targets.center),
        "act_scale": torch.from_numpy(targets.scale),
        "reward_scale": float(reward_scale),
        "discount": float(discount),
        "info": json.dumps(info, default=str),
    }


def load_critic(path: str | os.PathLike) -> Critic:
    """The critic of a RUN folder written by ``rlft train offline`` (or its ``critic.pt``), with a clear error for
    anything else."""
    import torch

    path = Path(path)
    file = path / OFFLINE_CRITIC if path.is_dir() else path
    if not file.is_file():
        raise InvalidInputError(f"no critic at {path} ({OFFLINE_CRITIC} missing)",
                                hint="train one with: rlft train offline --algo iql --dataset DIR --out RUN")
    try:
        payload = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - not a torch file, or not ours
        raise InvalidInputError(f"{file} is not a critic file: {exc}") from exc
    if not isinstance(payload, dict) or payload.get("format") != CRITIC_FORMAT:
        raise InvalidInputError(f"{file} is not a critic file (made by rlft train offline)")
    obs_space, act_space = json.loads(payload["observation_space"]), json.loads(payload["action_space"])
    features = BCFeatures(obs_space, payload["obs_mean"].numpy(), payload["obs_std"].numpy())
    actions = BCActions(act_space, payload["act_center"].numpy(), payload["act_scale"].numpy())
    hidden = list(payload["hidden"])
    q_nets = []
    for state in payload["q_state_dicts"]:
        net = q_network(features.n, actions.n, hidden)
        net.load_state_dict(state)
        q_nets.append(net.eval())
    v_net = None
    if payload["v_state_dict"] is not None:
        v_net = v_network(features.n, hidden)
        v_net.load_state_dict(payload["v_state_dict"])
        v_net.eval()
    return Critic(q_nets, v_net, features, actions, float(payload["reward_scale"]), float(payload["discount"]),
                  obs_space, act_space, json.loads(payload["info"]))


def check_critic(critic: Critic, codec, source: str) -> None:
    """A critic learned on another env or other spaces than the dataset's is refused by name."""
    env = critic.info.get("env_id")
    if env != codec.env_id:
        raise InvalidInputError(f"the critic {source} was learned on {env}, the dataset is {codec.env_id}",
                                hint="train one on this dataset: rlft train offline --algo iql --dataset DIR")
    for name, mine, theirs in (("observation", critic.observation_space, codec.observation_space),
                               ("action", critic.action_space, codec.action_space)):
        if (mine.get("type"), mine.get("shape")) != (theirs.get("type"), theirs.get("shape")):
            raise InvalidInputError(f"the critic {source}'s {name} space ({mine.get('type')} {mine.get('shape')}) is "
                                    f"not the dataset's ({theirs.get('type')} {theirs.get('shape')})")


def load_checked_critic(path: str, codec) -> Critic:
    """The critic of ``path``, refused by name when it was learned on another env or other spaces than ``codec``'s."""
    critic = load_critic(path)
    check_critic(critic, codec, path)
    return critic
