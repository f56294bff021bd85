"""Behaviour cloning with a small MLP: the non-LLM baseline trained on the same dataset rows.

``rlft train bc --dataset DIR --out FILE`` fits an MLP on the dataset's raw ``observation`` (FrozenLake:
``state``) and ``action`` columns: cross-entropy for a Discrete action space, mean squared error on actions
scaled to [-1, 1] for a Box. Discrete observations are one-hot, Box observations standardised with the
training data's mean and std. ``FILE`` (a torch file of tensors and plain values, loadable with
``weights_only=True``) holds the weights, the spaces, the normalisation and the env id of the dataset; the
network and its loading are :mod:`rlft.models.bc`.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from rlft.core.console import console, kv_table, progress
from rlft.core.errors import InvalidInputError
from rlft.core.options import MAX_GRADIENT_STEPS
from rlft.core.output_file import check_output_file, is_zip
from rlft.core.trackers import Trackers, check_log_folder, parse_report_to
from rlft.datasets.row_checks import check_box_actions, check_finite_rows
from rlft.models.bc import BC_FORMAT, BCActions, BCFeatures, build_mlp, check_hidden, save_mlp_policy
from rlft.train.bc_config import BCConfig
from rlft.train.lifecycle import Stage
from rlft.train.stage import check_finite_weights

__all__ = ["BCConfig", "train_bc"]  # BCConfig lives in bc_config (the CLI is generated from it)


def _check(config: BCConfig) -> None:
    if parse_report_to(config.report_to):
        out = Path(config.out)
        check_log_folder(out.with_name(out.stem + "_tb"), config.overwrite, f"--out {out}")
    check_output_file(config.out, config.overwrite, inputs=[("--dataset", config.dataset)], ours=is_zip)
    if config.epochs < 1 or config.batch_size < 1:
        raise InvalidInputError("--epochs and --batch-size must be at least 1")
    if not 0 <= config.val_fraction < 1:
        raise InvalidInputError(f"--val-fraction must be in [0, 1), got {config.val_fraction}")
    check_hidden(list(config.hidden))
    if config.learning_rate <= 0:
        raise InvalidInputError("--learning-rate must be positive")


class BCStage(Stage):
    """``rlft train bc``: the lifecycle of :mod:`rlft.train.lifecycle` with an MLP fitted by minibatch descent."""

    name = "bc"

    def check(self) -> None:
        _check(self.config)

    def load_data(self) -> None:
        self.codec, obs, actions = _load_rows(self.config)
        self.features, self.targets, self.x, self.y = _encode_rows(self.config, self.codec, obs, actions)

    def build_model(self) -> None:
        import torch

        config, targets = self.config, self.targets
        self.val_idx, self.train_idx = _split_rows(self.rng, len(self.x), config.val_fraction)
        steps = config.epochs * -(-len(self.train_idx) // config.batch_size)
        if steps > MAX_GRADIENT_STEPS:  # 100,000 epochs of batch 1 ran 16 million steps (hostile pass 21, F14)
            raise InvalidInputError(f"--epochs x the batches of {len(self.train_idx):,} training rows is {steps:,} "
                                    f"gradient steps, more than {MAX_GRADIENT_STEPS:,}",
                                    hint="fewer --epochs or a larger --batch-size")
        # built after seeding (and in this order), so the initial weights and batch order follow the seed
        self.model = build_mlp(self.features.n, list(config.hidden), targets.n, not targets.discrete)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=config.learning_rate,
                                     weight_decay=config.weight_decay)
        self.loss_fn = torch.nn.CrossEntropyLoss() if targets.discrete else torch.nn.MSELoss()
        self.gen = torch.Generator().manual_seed(config.seed)

    def learn(self) -> dict[str, Any]:
        import torch

        config, model, codec = self.config, self.model, self.codec
        xt, yt = torch.from_numpy(self.x), torch.from_numpy(self.y)
        out = Path(config.out)
        tracking = Trackers(parse_report_to(config.report_to), out.with_name(out.stem + "_tb"), out.stem,
                            {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(config).items()})
        start = time.perf_counter()
        try:
            for entry in _train_epochs(config, model, self.opt, self.loss_fn, xt, yt, self.train_idx, self.gen):
                tracking.log({"train/loss": entry["train_loss"]}, entry["epoch"])
        finally:
            tracking.close()
        train_s = time.perf_counter() - start
        check_finite_weights(model, "behaviour cloning")
        metrics = _metrics(model, xt, yt, self.train_idx, self.val_idx, self.targets, self.loss_fn)
        info = {
            "format": BC_FORMAT,
            "dataset": str(config.dataset),
            "env_id": codec.env_id,
            "env_kwargs": codec.env_kwargs,
            "rows": int(len(self.x)),
            "train_rows": int(len(self.train_idx)),
            "val_rows": int(len(self.val_idx)),
            "train_seconds": round(train_s, 3),
            "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(config).items()},
            **metrics,
        }
        out = save_mlp_policy(config.out, model, config.hidden, codec, self.features, self.targets, info)
        console.print(kv_table(f"behaviour cloning -> {out}",
                               {k: v for k, v in info.items() if k not in ("config", "env_kwargs")}))
        return info


def train_bc(config: BCConfig) -> dict[str, Any]:
    """Fit the MLP, save it to ``config.out`` (atomically) and return the training summary."""
    return BCStage(config).run()


def _load_rows(config: BCConfig):
    """(codec, observations, actions) of the dataset's split; an empty split is refused."""
    from rlft.datasets.dataset import RlftDataset

    dataset = RlftDataset.open(config.dataset, require_codec=False)
    codec = dataset.codec
    obs, actions = dataset.observations_actions(config.split, config.best_episodes)
    if config.max_train_samples is not None:
        obs, actions = obs[: config.max_train_samples], actions[: config.max_train_samples]
    if len(obs) == 0:
        raise InvalidInputError(f"{config.dataset}: the {config.split} split is empty")
    check_finite_rows(config.dataset, config.split, [("observation", obs), ("action", actions)])
    check_box_actions(config.dataset, config.split, actions, codec.action_space)
    return codec, obs, actions


def _encode_rows(config: BCConfig, codec, obs: np.ndarray, actions: np.ndarray):
    """(features, targets, x, y): the encoders fitted on the rows, and the rows encoded, checked against the
    codec's spaces."""
    features, targets = BCFeatures(codec.observation_space), BCActions(codec.action_space)
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


def _metrics(model, xt, yt, train_idx, val_idx, targets: BCActions, loss_fn) -> dict[str, float]:
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
