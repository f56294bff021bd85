"""The behaviour-cloning MLP: its input features (one-hot or standardised observations), its action scaling, the
network, and loading the file that ``rlft train bc`` (:mod:`rlft.train.bc`) writes.

The file is a torch file of tensors and plain values, loadable with ``weights_only=True``: the weights, the
spaces, the normalisation and the dataset's env id.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlft.codecs.structured import flat_box, flatten, is_structured, leaves
from rlft.core.errors import InvalidInputError
from rlft.core.io import atomic_write_file
from rlft.core.options import MAX_HIDDEN, MAX_HIDDEN_WEIGHTS, layer_weights
from rlft.core.reading import require_file

BC_FORMAT = "rlft-bc-v1"


# weights between its hidden layers: 50 million are 200 MB, 800 MB with Adam's moments and gradients, per network
# (offline RL trains six); two layers of 60,000 (3.6 billion) were a failed allocation or the kernel's OOM kill


def check_hidden(hidden: list[int]) -> None:
    """``--hidden`` of an MLP: layer sizes from 1 to :data:`MAX_HIDDEN` whose weights between them stay under
    :data:`MAX_HIDDEN_WEIGHTS` (hostile pass 19, B3: a traceback or the host's memory, before a step)."""
    if not hidden or any(h < 1 or h > MAX_HIDDEN for h in hidden):
        raise InvalidInputError(f"--hidden must be layer sizes from 1 to {MAX_HIDDEN:,}, got {hidden}")
    weights = layer_weights(hidden)
    if weights > MAX_HIDDEN_WEIGHTS:
        raise InvalidInputError(f"--hidden {','.join(map(str, hidden))} holds {weights:,} weights between its "
                                f"layers, more than {MAX_HIDDEN_WEIGHTS:,}", hint="use narrower layers: the "
                                "recipes' 256,256 hold 65,536")


class BCFeatures:
    """Observation -> network input (one-hot or standardised), from the spaces and training data."""

    def __init__(self, obs_space: dict, mean=None, std=None):
        if obs_space["type"] == "text":

            raise InvalidInputError("behaviour cloning needs numeric observations; this dataset's are text",
                                    hint="compare the LLM with random or an expert instead")
        self.space = obs_space
        # a structured observation (Dict, Tuple...) is its flat row of values, laid out as the codec writes it
        self.structure = obs_space if is_structured(obs_space) else None
        self.parts = leaves(obs_space) if self.structure else None
        flat = flat_box(obs_space) if self.structure else obs_space
        self.discrete = flat["type"] == "discrete"
        self.start = int(flat.get("start", 0)) if self.discrete else 0
        self.n = int(flat["n"]) if self.discrete else int(np.prod(flat["shape"]))
        self.mean = None if mean is None else np.asarray(mean, np.float32)
        self.std = None if std is None else np.asarray(std, np.float32)

    def fit(self, obs: np.ndarray) -> None:
        if not self.discrete:
            x = obs.reshape(len(obs), -1).astype(np.float64)
            self.mean = x.mean(axis=0).astype(np.float32)
            self.std = np.maximum(x.std(axis=0), 1e-6).astype(np.float32)

    def __call__(self, obs) -> np.ndarray:
        if self.structure:

            obs = flatten(self.structure, obs, single=False, parts=self.parts)
        obs = np.asarray(obs)
        if self.discrete:
            idx = obs.reshape(-1).astype(np.int64) - self.start
            out = np.zeros((len(idx), self.n), np.float32)
            out[np.arange(len(idx)), np.clip(idx, 0, self.n - 1)] = 1.0
            return out
        x = obs.reshape(len(obs), -1).astype(np.float32)
        return (x - self.mean) / self.std


class BCActions:
    """Action <-> network target: class index for Discrete; [-1, 1] scaling for a Box."""

    def __init__(self, act_space: dict, center=None, scale=None):
        self.space = act_space
        self.discrete = act_space["type"] == "discrete"
        self.start = int(act_space.get("start", 0)) if self.discrete else 0
        self.n = int(act_space["n"]) if self.discrete else int(np.prod(act_space["shape"]))
        self.center = None if center is None else np.asarray(center, np.float32)
        self.scale = None if scale is None else np.asarray(scale, np.float32)

    def fit(self, actions: np.ndarray) -> None:
        if self.discrete:
            return
        low, high = np.asarray(self.space["low"], np.float64), np.asarray(self.space["high"], np.float64)
        a = actions.reshape(len(actions), -1).astype(np.float64)
        finite = np.isfinite(low) & np.isfinite(high)
        center = np.where(finite, (low + high) / 2, a.mean(axis=0))
        scale = np.where(finite, (high - low) / 2, np.maximum(np.abs(a - center).max(axis=0), 1e-6))
        self.center, self.scale = center.astype(np.float32), np.maximum(scale, 1e-6).astype(np.float32)

    def target(self, actions: np.ndarray) -> np.ndarray:
        if self.discrete:
            return actions.reshape(-1).astype(np.int64) - self.start
        return (actions.reshape(len(actions), -1).astype(np.float32) - self.center) / self.scale

    def decode(self, out: np.ndarray) -> np.ndarray:
        if self.discrete:
            return out.argmax(axis=1).astype(np.int64) + self.start
        a = np.clip(out, -1.0, 1.0) * self.scale + self.center
        low, high = np.asarray(self.space["low"]), np.asarray(self.space["high"])
        a = np.clip(a, low, high).reshape((len(out), *self.space["shape"]))
        return a.astype(np.dtype(self.space.get("dtype", "float32")))


def build_mlp(n_in: int, hidden: list[int], n_out: int, box: bool):
    from torch import nn

    layers: list[nn.Module] = []
    last = n_in
    for h in hidden:
        layers += [nn.Linear(last, h), nn.ReLU()]
        last = h
    layers.append(nn.Linear(last, n_out))
    if box:
        layers.append(nn.Tanh())
    return nn.Sequential(*layers)


def save_mlp_policy(path, model, hidden: list[int], codec, features: BCFeatures, targets: BCActions,
                    info: dict[str, Any]) -> Path:
    """Write an MLP policy (its weights, spaces, normalisation and ``info``) to ``path`` atomically: the file
    ``rlft train bc`` writes and ``rlft train offline`` writes its actor as; returns the path."""
    import torch

    payload = {
        "format": BC_FORMAT,
        "state_dict": model.state_dict(),
        "hidden": list(hidden),
        "observation_space": json.dumps(codec.observation_space),
        "action_space": json.dumps(codec.action_space),
        "obs_mean": None if features.mean is None else torch.from_numpy(features.mean),
        "obs_std": None if features.std is None else torch.from_numpy(features.std),
        "act_center": None if targets.center is None else torch.from_numpy(targets.center),
        "act_scale": None if targets.scale is None else torch.from_numpy(targets.scale),
        "info": json.dumps(info, default=str),
    }
    return atomic_write_file(path, lambda tmp: torch.save(payload, tmp))


@dataclass
class BCModel:
    """A saved behaviour-cloning MLP, ready for batched forward passes (:func:`load_bc`)."""

    model: Any  # torch.nn.Sequential, in eval mode
    features: BCFeatures
    actions: BCActions
    observation_space: dict
    action_space: dict
    info: dict

    def act(self, obs) -> np.ndarray:
        import torch

        with torch.no_grad():
            out = self.model(torch.from_numpy(self.features(obs))).numpy()
        return self.actions.decode(out)


def load_bc(path: str | os.PathLike) -> BCModel:
    """Load a file written by :func:`train_bc`, with a clear error for anything else."""
    import torch

    path = require_file(path, "behaviour-cloning policy", hint="train one with: rlft train bc --dataset DIR --out FILE")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - not a torch file, or not ours
        # torch's own message on a file that is no checkpoint runs to a paragraph about weights_only
        first = (str(exc).strip().splitlines() or [""])[0]
        reason = first if 0 < len(first) <= 100 and "weights_only" not in first else "not a torch checkpoint"
        raise InvalidInputError(f"{path} is not a behaviour-cloning policy file ({reason})",
                                hint="pass a file made by rlft train bc") from exc
    if not isinstance(payload, dict) or payload.get("format") != BC_FORMAT:
        raise InvalidInputError(f"{path} is not a behaviour-cloning policy file (made by rlft train bc)")
    observation_space = json.loads(payload["observation_space"])
    action_space = json.loads(payload["action_space"])

    def arr(key):
        value = payload.get(key)
        return None if value is None else value.numpy()

    features = BCFeatures(observation_space, arr("obs_mean"), arr("obs_std"))
    actions = BCActions(action_space, arr("act_center"), arr("act_scale"))
    model = build_mlp(features.n, list(payload["hidden"]), actions.n, not actions.discrete)
    model.load_state_dict(payload["state_dict"])
    model.eval()
    return BCModel(model, features, actions, observation_space, action_space, json.loads(payload["info"]))
