"""A language model as the policy network of online RL (``rlft train online``): Stable-Baselines3 features
extractor that writes each observation through the codec, tokenizes it, runs the transformer and returns the
last real token's hidden state; SB3's small action and value heads sit on top.

Shared by training (``rlft.train.online``) and evaluation (``rlft eval --policy online:RUN``), hence here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from rlft.core.errors import InvalidInputError, require
from rlft.core.reading import read_json_mapping
from rlft.sources.hyperparams import policy_kwargs_to_names, resolve_policy_kwargs

BACKBONE_MODES = ("frozen", "lora", "full")
ONLINE_FILE = "online.zip"  # the SB3 checkpoint inside a RUN folder
ONLINE_INFO = "rlft_online.json"
BACKBONE_DIR = "backbone"  # the backbone's config and tokenizer (its trained weights are in the checkpoint)
CACHE_LIMIT = 200_000  # observation texts whose token ids are remembered (discrete or coarse codecs repeat)


def _extractor_base():
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

    return BaseFeaturesExtractor


def _adam():
    import torch

    return torch.optim.Adam


class BackboneScaledAdam(_adam()):
    """Adam with the language model's parameters in their own group, stepped at ``backbone_lr_scale`` times the
    rate SB3 sets (SB3 sets one rate for every group at each update, from its schedule; the scale is applied at
    each step).

    Why: with the RL-Zoo rate for CartPole (1e-3, 20 epochs an update) a transformer trunk moves the policy 10-20x
    further per update than the MLP does (SB3's approx_kl 0.07-0.18 against 0.003-0.011) and collapses; at 1e-4
    for everything the updates are MLP-sized but the value head learns too slowly to explain any variance
    (explained_variance ~0), and training stalls near a return of 130. A slow trunk under heads at the Zoo's
    rate is the usual recipe for fine-tuning a pretrained encoder with RL."""

    def __init__(self, params, lr: float = 1e-3, backbone_lr_scale: float = 1.0, **kwargs):
        params = list(params)
        backbone = [p for p in params if getattr(p, "rlft_backbone", False)]
        heads = [p for p in params if not getattr(p, "rlft_backbone", False)]
        groups = [{"params": ps, "lr_scale": scale}
                  for ps, scale in ((backbone, float(backbone_lr_scale)), (heads, 1.0)) if ps]
        super().__init__(groups, lr=lr, **kwargs)

    def step(self, closure=None):
        rates = [group["lr"] for group in self.param_groups]
        for group in self.param_groups:
            group["lr"] = group["lr"] * group["lr_scale"]
        try:
            return super().step(closure)
        finally:
            for group, rate in zip(self.param_groups, rates, strict=True):
                group["lr"] = rate


def scaled_optimizer_kwargs(backbone_lr_scale: float) -> dict[str, Any]:
    """The policy kwargs that train the backbone at ``backbone_lr_scale`` times SB3's rate (none for 1.0);
    eps as SB3 gives its own Adam in actor-critic policies."""
    if backbone_lr_scale == 1.0:
        return {}
    return {"optimizer_class": BackboneScaledAdam,
            "optimizer_kwargs": {"backbone_lr_scale": float(backbone_lr_scale), "eps": 1e-5}}


class TransformerFeatures(_extractor_base()):
    """Observation -> codec text -> token ids -> transformer -> hidden state of the last real token.

    ``mode``: ``frozen`` (no gradient into the transformer), ``lora`` (LoRA adapters train) or ``full``.
    ``pretrained=False`` builds the transformer from its config only: loading a RUN then restores the trained
    weights from the checkpoint, so the original model folder is not needed.
    """

    def __init__(self, observation_space, backbone: str, codec: dict, mode: str = "full", lora_r: int = 8,
                 pretrained: bool = True, attn_implementation: str | None = None):
        from gymnasium import spaces
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        from rlft.codecs.base import codec_from_dict

        if mode not in BACKBONE_MODES:
            raise InvalidInputError(f"--backbone-mode must be one of {', '.join(BACKBONE_MODES)}, got {mode!r}")
        try:
            tokenizer = AutoTokenizer.from_pretrained(backbone)
            attn = {"attn_implementation": attn_implementation} if attn_implementation else {}
            model = (AutoModel.from_pretrained(backbone, **attn) if pretrained
                     else AutoModel.from_config(AutoConfig.from_pretrained(backbone), **attn))
        except (OSError, ValueError) as exc:
            raise InvalidInputError(f"--backbone {backbone} cannot be loaded as a transformers model: {exc}",
                                    hint="a folder from rlft model init / rlft model fetch, or mlp") from exc
        super().__init__(observation_space, features_dim=int(model.config.hidden_size))
        self.codec = codec_from_dict(codec, "the online run's codec")
        self.tokenizer = tokenizer
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        if mode == "frozen":
            # Kept out of the module tree: its weights are no parameters of the policy (TRPO differentiates
            # every policy parameter; the checkpoint stays small), so a RUN saves them under backbone/.
            for p in model.parameters():
                p.requires_grad_(False)
            model.eval()
        elif mode == "lora":
            from peft import LoraConfig, get_peft_model

            model = get_peft_model(model, LoraConfig(r=lora_r, lora_alpha=2 * lora_r, target_modules="all-linear"))
        for p in model.parameters():
            p.rlft_backbone = True  # BackboneScaledAdam puts these in their own group
        if mode == "frozen":
            object.__setattr__(self, "backbone", model)
        else:
            self.backbone = model
        self.mode = mode
        self.discrete_obs = isinstance(observation_space, spaces.Discrete)
        self._cache: dict[str, list[int]] = {}
        self.cache_hits = 0

    def texts(self, observations: np.ndarray) -> list[str]:
        """The codec's prompt for each observation (what an SFT dataset of the same codec holds)."""
        template = self.codec.template
        encoded = self.codec.encode_observations(observations)
        encoded = encoded.to_pylist() if hasattr(encoded, "to_pylist") else list(encoded)
        return [template.build_prompt(t) if template.style == "plain" else template.user_text(t) for t in encoded]

    def token_ids(self, observations: np.ndarray):
        """Right-padded ``(input_ids, attention_mask)``; each distinct text is tokenized once (batched)."""
        import torch

        texts = self.texts(observations)
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            if len(self._cache) + len(missing) > CACHE_LIMIT:
                self._cache.clear()
            for text, ids in zip(missing, self.tokenizer(missing, add_special_tokens=True)["input_ids"],
                                 strict=True):
                self._cache[text] = ids
        self.cache_hits += len(texts) - len(missing)
        rows = [self._cache[t] for t in texts]
        width = max(len(r) for r in rows)
        ids = np.full((len(rows), width), self.tokenizer.pad_token_id, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = r
            mask[i, : len(r)] = 1
        return torch.from_numpy(ids), torch.from_numpy(mask)

    def forward(self, observations):
        import torch

        obs = observations.detach().cpu().numpy()
        if self.discrete_obs:  # SB3 one-hot encodes Discrete observations before the extractor
            obs = obs.argmax(axis=-1)
        ids, mask = self.token_ids(obs)
        device = observations.device
        hidden = self.backbone(input_ids=ids.to(device), attention_mask=mask.to(device)).last_hidden_state
        last = mask.sum(dim=1).to(device) - 1
        return hidden[torch.arange(hidden.shape[0], device=device), last]


def online_algo_class(algo: str):
    """The SB3 / sb3-contrib class of an online algorithm (ppo, trpo): for training and for loading a RUN."""

    if algo == "trpo":
        return require("sb3_contrib", package="sb3-contrib").TRPO
    if algo == "ppo":
        return require("stable_baselines3", package="stable-baselines3").PPO
    raise InvalidInputError(f"unknown online algorithm {algo!r}", hint="use ppo or trpo")


def read_online_info(run: str | Path) -> dict[str, Any]:
    path = Path(run) / ONLINE_INFO
    if not path.is_file():
        raise InvalidInputError(f"{run} is not an online RUN folder (no {ONLINE_INFO})",
                                hint="make one with rlft train online")
    return read_json_mapping(path, "an online run's metadata")


def load_online(run: str | Path):
    """(SB3 model, metadata) of an online RUN folder, ready for ``predict`` on batches."""
    run = Path(run)
    info = read_online_info(run)
    algo = info.get("algo")
    if algo not in ("ppo", "trpo"):
        raise InvalidInputError(f"{run / ONLINE_INFO}: unknown algo {algo!r}")
    cls = online_algo_class(algo)
    custom: dict[str, Any] = {"learning_rate": 0.0, "lr_schedule": lambda _: 0.0, "clip_range": lambda _: 0.0}
    if info.get("backbone") != "mlp":
        kwargs = resolve_policy_kwargs(info["policy_kwargs"])
        kwargs["features_extractor_class"] = TransformerFeatures
        if "backbone_lr_scale" in kwargs.get("optimizer_kwargs", {}):  # the checkpoint holds its two groups
            kwargs["optimizer_class"] = BackboneScaledAdam
        extractor = kwargs.get("features_extractor_kwargs", {})
        # trained weights are in the checkpoint, except a frozen backbone's, saved whole under backbone/
        kwargs["features_extractor_kwargs"] = {**extractor, "backbone": str(run / BACKBONE_DIR),
                                               "pretrained": extractor.get("mode") == "frozen"}
        custom["policy_kwargs"] = kwargs
    checkpoint = run / ONLINE_FILE
    if not checkpoint.is_file():
        raise InvalidInputError(f"{run} has no {ONLINE_FILE}")
    try:
        model = cls.load(checkpoint, device="cpu", custom_objects=custom)
    except (ValueError, OSError, KeyError, RuntimeError) as exc:  # SB3's messages for a damaged or foreign zip
        raise InvalidInputError(f"cannot read {checkpoint}: {str(exc).removeprefix('Error: ')}",
                                hint="the file is damaged or not an rlft train online checkpoint; train it again"
                                ) from exc
    return model, info


def policy_kwargs_for_info(policy_kwargs: dict) -> dict:
    """The JSON-safe part of the policy kwargs (the extractor class is implied by the backbone)."""

    # the classes are implied: the extractor by the backbone, the optimizer by optimizer_kwargs' backbone_lr_scale
    kwargs = policy_kwargs_to_names({k: v for k, v in policy_kwargs.items()
                                     if k not in ("features_extractor_class", "optimizer_class")})
    json.dumps(kwargs)  # fails loudly if something unserialisable slipped in
    return kwargs
