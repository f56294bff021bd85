"""Behaviour cloning with a small MLP: the non-LLM baseline trained on the same dataset rows.

``rlft train bc --dataset DIR --out FILE`` fits an MLP on the dataset's raw ``observation`` (FrozenLake:
``state``) and ``action`` columns: cross-entropy for a Discrete action space, mean squared error on actions
scaled to [-1, 1] for a Box. Discrete observations are one-hot, Box observations standardised with the
training data's mean and std. ``FILE`` (a torch file of tensors and plain values, loadable with
``weights_only=True``) holds the weights, the spaces, the normalisation and the env id of the dataset.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlft.core.errors import InvalidInputError
from rlft.train.bc_config import BCConfig

__all__ = ["BCConfig", "train_bc"]  # BCConfig lives in bc_config (the CLI is generated from it)

BC_FORMAT = "rlft-bc-v1"


MAX_HIDDEN = 65_536  # a behaviour-cloning MLP wider than this is a typo (10,000,000 would need 400 TB)


class _Features:
    """Observation -> network input (one-hot or standardised), from the spaces and training data."""

    def __init__(self, obs_space: dict, mean=None, std=None):
        from rlft.codecs.structured import flat_box, is_structured, leaves

        if obs_space["type"] == "text":
            from rlft.core.errors import InvalidInputError

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
            from rlft.codecs.structured import flatten

            obs = flatten(self.structure, obs, single=False, parts=self.parts)
        obs = np.asarray(obs)
        if self.discrete:
            idx = obs.reshape(-1).astype(np.int64) - self.start
            out = np.zeros((len(idx), self.n), np.float32)
            out[np.arange(len(idx)), np.clip(idx, 0, self.n - 1)] = 1.0
            return out
        x = obs.reshape(len(obs), -1).astype(np.float32)
        return (x - self.mean) / self.std


class _Actions:
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


def _mlp(n_in: int, hidden: list[int], n_out: int, box: bool):
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


def _check(config: BCConfig) -> None:
    from rlft.core.io import check_output_file

    check_output_file(config.out, config.overwrite, inputs=[("--dataset", config.dataset)])
    if config.epochs < 1 or config.batch_size < 1:
        raise InvalidInputError("--epochs and --batch-size must be at least 1")
    if not 0 <= config.val_fraction < 1:
        raise InvalidInputError(f"--val-fraction must be in [0, 1), got {config.val_fraction}")
    if not config.hidden or any(h < 1 or h > MAX_HIDDEN for h in config.hidden):
        raise InvalidInputError(f"--hidden must be layer sizes from 1 to {MAX_HIDDEN:,}, got {config.hidden}")
    if config.learning_rate <= 0:
        raise InvalidInputError("--learning-rate must be positive")


def train_bc(config: BCConfig) -> dict[str, Any]:
    """Fit the MLP, save it to ``config.out`` (atomically) and return the training summary."""
    _check(config)
    import torch

    from rlft.core.console import console, kv_table
    from rlft.core.seeding import limit_threads, seed_everything

    limit_threads()
    codec, obs, actions = _load_rows(config)
    features, targets, x, y = _encode_rows(config, codec, obs, actions)

    rng = seed_everything(config.seed)
    val_idx, train_idx = _split_rows(rng, len(x), config.val_fraction)
    # built after seeding (and in this order), so the initial weights and batch order follow the seed
    model = _mlp(features.n, list(config.hidden), targets.n, not targets.discrete)
    opt = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay)
    loss_fn = torch.nn.CrossEntropyLoss() if targets.discrete else torch.nn.MSELoss()
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    gen = torch.Generator().manual_seed(config.seed)
    start = time.perf_counter()
    _train_epochs(config, model, opt, loss_fn, xt, yt, train_idx, gen)
    train_s = time.perf_counter() - start
    metrics = _metrics(model, xt, yt, train_idx, val_idx, targets, loss_fn)
    info = {
        "format": BC_FORMAT,
        "dataset": str(config.dataset),
        "env_id": codec.env_id,
        "env_kwargs": codec.env_kwargs,
        "rows": int(len(x)),
        "train_rows": int(len(train_idx)),
        "val_rows": int(len(val_idx)),
        "train_seconds": round(train_s, 3),
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(config).items()},
        **metrics,
    }
    out = _save(config, model, codec, features, targets, info)
    console.print(kv_table(f"behaviour cloning -> {out}",
                           {k: v for k, v in info.items() if k not in ("config", "env_kwargs")}))
    return info


def _load_rows(config: BCConfig):
    """(codec, observations, actions) of the dataset's split; an empty split is refused."""
    from rlft.hub.datasets import dataset_dir, load_dataset_codec, observations_actions

    root = dataset_dir(config.dataset)
    codec = load_dataset_codec(root)
    obs, actions = observations_actions(root, config.split)
    if len(obs) == 0:
        raise InvalidInputError(f"{config.dataset}: the {config.split} split is empty")
    for name, values in (("observation", obs), ("action", actions)):
        try:
            rows = np.asarray(values, dtype=np.float64).reshape(len(values), -1)
        except (TypeError, ValueError):
            continue  # text observations: nothing to be non-finite
        bad = np.flatnonzero(~np.isfinite(rows).all(axis=1))
        if len(bad):
            raise InvalidInputError(f"{config.dataset}: {len(bad)} {config.split} row(s) have a non-finite {name} "
                                    f"(first: row {int(bad[0])}, {rows[bad[0]].tolist()})",
                                    hint="re-serialize with rlft data serialize --drop-nonfinite, or fix the source")
    return codec, obs, actions


def _encode_rows(config: BCConfig, codec, obs: np.ndarray, actions: np.ndarray):
    """(features, targets, x, y): the encoders fitted on the rows, and the rows encoded, checked against the
    codec's spaces."""
    features, targets = _Features(codec.observation_space), _Actions(codec.action_space)
    try:
        features.fit(obs)
        targets.fit(actions)
        x, y = features(obs), targets.target(actions)
    except ValueError as exc:
        raise InvalidInputError(f"{config.dataset}: the observation/action columns do not fit the codec's spaces "
                                f"({exc})") from exc
    if x.shape[1] != features.n or (not targets.discrete and y.shape[1] != targets.n):
        raise InvalidInputError(f"{config.dataset}: column shapes {x.shape[1:]}/{y.shape[1:]} do not match the "
                                "codec's spaces")
    if targets.discrete and (y.min() < 0 or y.max() >= targets.n):
        raise InvalidInputError(f"{config.dataset}: actions outside the Discrete({targets.n}) action space")
    return features, targets, x, y


def _split_rows(rng, n_rows: int, val_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """(validation indices, training indices): a seeded shuffle of the rows, ``val_fraction`` of them held out."""
    perm = rng.permutation(n_rows)
    n_val = int(round(val_fraction * n_rows)) if n_rows > 1 else 0
    return perm[:n_val], perm[n_val:]


def _train_epochs(config: BCConfig, model, opt, loss_fn, xt, yt, train_idx: np.ndarray, gen) -> list[dict]:
    """Minibatch training for ``config.epochs`` epochs with a progress bar; returns each epoch's mean loss."""
    import torch

    from rlft.core.console import progress

    history = []
    with progress(transient=True) as bar:
        task = bar.add_task("behaviour cloning", total=config.epochs)
        for epoch in range(config.epochs):
            model.train()
            order = torch.from_numpy(train_idx)[torch.randperm(len(train_idx), generator=gen)]
            total = 0.0
            for i in range(0, len(order), config.batch_size):
                idx = order[i : i + config.batch_size]
                loss = loss_fn(model(xt[idx]), yt[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += loss.item() * len(idx)
            history.append({"epoch": epoch + 1, "train_loss": total / max(1, len(order))})
            bar.advance(task)
    return history


def _save(config: BCConfig, model, codec, features: _Features, targets: _Actions, info: dict[str, Any]) -> Path:
    """Write the weights, spaces, normalisation and ``info`` to ``config.out`` atomically; returns the path."""
    import torch

    from rlft.core.io import atomic_write_file

    payload = {
        "format": BC_FORMAT,
        "state_dict": model.state_dict(),
        "hidden": list(config.hidden),
        "observation_space": json.dumps(codec.observation_space),
        "action_space": json.dumps(codec.action_space),
        "obs_mean": None if features.mean is None else torch.from_numpy(features.mean),
        "obs_std": None if features.std is None else torch.from_numpy(features.std),
        "act_center": None if targets.center is None else torch.from_numpy(targets.center),
        "act_scale": None if targets.scale is None else torch.from_numpy(targets.scale),
        "info": json.dumps(info, default=str),
    }
    return atomic_write_file(config.out, lambda tmp: torch.save(payload, tmp))


def _metrics(model, xt, yt, train_idx, val_idx, targets: _Actions, loss_fn) -> dict[str, float]:
    import torch

    model.eval()
    out: dict[str, float] = {}
    with torch.no_grad():
        for name, idx in (("train", train_idx), ("val", val_idx)):
            if len(idx) == 0:
                continue
            pred = model(xt[idx])
            out[f"{name}_loss"] = float(loss_fn(pred, yt[idx]))
            if targets.discrete:
                out[f"{name}_accuracy"] = float((pred.argmax(dim=1) == yt[idx]).float().mean())
            else:
                out[f"{name}_mean_abs_error"] = float(((pred - yt[idx]).abs() * torch.from_numpy(targets.scale))
                                                      .mean())
    return out


@dataclass
class BCModel:
    """A saved behaviour-cloning MLP, ready for batched forward passes (:func:`load_bc`)."""

    model: Any  # torch.nn.Sequential, in eval mode
    features: _Features
    actions: _Actions
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

    path = Path(path)
    if not path.is_file():
        raise InvalidInputError(f"behaviour-cloning policy {path} does not exist",
                                hint="train one with: rlft train bc --dataset DIR --out FILE")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - not a torch file, or not ours
        raise InvalidInputError(f"{path} is not a behaviour-cloning policy file: {exc}") from exc
    if not isinstance(payload, dict) or payload.get("format") != BC_FORMAT:
        raise InvalidInputError(f"{path} is not a behaviour-cloning policy file (made by rlft train bc)")
    observation_space = json.loads(payload["observation_space"])
    action_space = json.loads(payload["action_space"])

    def arr(key):
        value = payload.get(key)
        return None if value is None else value.numpy()

    features = _Features(observation_space, arr("obs_mean"), arr("obs_std"))
    actions = _Actions(action_space, arr("act_center"), arr("act_scale"))
    model = _mlp(features.n, list(payload["hidden"]), actions.n, not actions.discrete)
    model.load_state_dict(payload["state_dict"])
    model.eval()
    return BCModel(model, features, actions, observation_space, action_space, json.loads(payload["info"]))
