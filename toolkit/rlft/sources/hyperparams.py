"""RL-Zoo-style hyperparameter files: ``rlft/sources/zoo/<algo>.yaml`` (shipped inside the package) keyed by env id.

An entry holds keyword arguments of the SB3 algorithm plus three RL-Zoo keys that are not arguments:
``n_envs``, ``n_timesteps`` and ``policy``. Values written as ``lin_<x>`` become a schedule that decays
linearly from x to 0 over training (RL-Zoo's notation); ``policy_kwargs.activation_fn`` is a name (tanh, relu).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlft.core.errors import InvalidInputError
from rlft.core.options import MAX_ENV_STEPS, MAX_ENVS, MAX_HIDDEN_WEIGHTS, layer_weights
from rlft.core.reading import is_number, read_yaml_mapping, require_file

# Inside the package (package data), so an installed rlft (not only a checkout) trains with the tuned settings.
HYPERPARAMS_DIR = Path(__file__).resolve().parent / "zoo"
NON_ALGO_KEYS = ("n_envs", "n_timesteps", "policy")
UNSUPPORTED_KEYS = ("normalize", "frame_stack", "env_wrapper", "callback", "vec_env_wrapper")


@dataclass
class Hyperparams:
    """One resolved entry: where it came from, the raw values (for metadata) and what SB3 is given."""

    source: str
    raw: dict[str, Any] = field(default_factory=dict)
    n_envs: int = 1
    n_timesteps: int | None = None
    policy: str = "MlpPolicy"

    def algo_kwargs(self, cls=None) -> dict[str, Any]:
        """Keyword arguments for the SB3 algorithm class, with schedules and activation names resolved; with ``cls``
        (the algorithm class) a key it does not take is one clear error, not a TypeError from inside SB3."""
        kwargs = {k: _resolve(k, v) for k, v in self.raw.items() if k not in NON_ALGO_KEYS}
        if cls is not None:
            import inspect

            accepted = set(inspect.signature(cls.__init__).parameters) - {"self", "policy", "env"}
            unknown = sorted(set(kwargs) - accepted)
            if unknown:
                raise InvalidInputError(f"{self.source}: {cls.__name__} takes no {', '.join(unknown)}",
                                        hint=f"its settings: {', '.join(sorted(accepted))}")
        if "policy_kwargs" in kwargs:
            kwargs["policy_kwargs"] = resolve_policy_kwargs(kwargs["policy_kwargs"])
        return kwargs


def default_file(algo: str) -> Path:
    """The tuned hyperparameter file of ``algo`` shipped inside the package (``rlft/sources/zoo``)."""
    return HYPERPARAMS_DIR / f"{algo}.yaml"


def tuned_algos(env_id: str) -> list[str]:
    """The algorithms whose shipped file holds tuned settings for ``env_id``."""
    return sorted(f.stem for f in HYPERPARAMS_DIR.glob("*.yaml")
                  if env_id in read_yaml_mapping(f, "a mapping of env ids to hyperparameters"))


def load_hyperparams(algo: str, env_id: str, path: str | Path | None = None) -> Hyperparams:
    """The entry for ``env_id`` in ``path`` (default: the shipped ``<algo>.yaml``).

    A given file must hold the env id; with the shipped file a missing env falls back to SB3 defaults,
    which is recorded as the source so the expert's metadata says it was not tuned.
    """

    explicit = path is not None
    file = Path(path) if explicit else default_file(algo)
    if not file.is_file():
        if explicit:  # missing, a folder, or a pipe or device: said as what it is (hostile pass 15)
            require_file(file, "--hyperparams")
        return Hyperparams(source="stable-baselines3 defaults (no tuned file)")
    table = read_yaml_mapping(file, "a mapping of env ids to hyperparameters")
    if env_id not in table:
        if explicit:
            raise InvalidInputError(f"{file} has no entry for {env_id!r}", hint=f"it has: {', '.join(map(str, table))}")
        return Hyperparams(source=f"stable-baselines3 defaults ({env_id} not in {file.name})")
    raw = _checked_entry(table[env_id] or {}, f"{file}: {env_id}")
    bad = [k for k in UNSUPPORTED_KEYS if k in raw]
    if bad:
        raise InvalidInputError(f"{file}: {env_id}: unsupported keys {bad}", hint="rlft trains without env wrappers")
    return Hyperparams(
        source=_display_path(file),
        raw=raw,
        n_envs=int(raw.get("n_envs", 1)),
        n_timesteps=int(float(raw["n_timesteps"])) if "n_timesteps" in raw else None,
        policy=str(raw.get("policy", "MlpPolicy")),
    )


# the counts and rates SB3 compares with numbers: text there ("many") was a TypeError deep in SB3 (pass 15, B13)
COUNT_KEYS = ("n_envs", "n_timesteps", "n_steps", "batch_size", "n_epochs", "buffer_size", "learning_starts",
              "gradient_steps", "target_update_interval")
RATE_KEYS = ("gamma", "gae_lambda", "vf_coef", "max_grad_norm", "tau", "learning_rate", "clip_range", "ent_coef")
# what a count may be (least, most): the file's n_envs and n_timesteps as --num-envs and --timesteps; a rollout or
# replay buffer (SB3 allocates it whole before the first step: n_steps 2e9 asked for 30 GiB) at most 10 million rows
# (D4RL's largest datasets hold 2 million); learning_starts and gradient_steps may be 0 (SB3 takes -1 for the latter)
MAX_BUFFER_ROWS = 10_000_000
COUNT_BOUNDS = {"n_envs": (1, MAX_ENVS), "n_timesteps": (1, MAX_ENV_STEPS), "n_steps": (1, MAX_BUFFER_ROWS),
                "batch_size": (1, MAX_BUFFER_ROWS), "n_epochs": (1, 1_000_000), "buffer_size": (1, MAX_BUFFER_ROWS),
                "learning_starts": (0, MAX_ENV_STEPS), "gradient_steps": (-1, 1_000_000),
                "target_update_interval": (1, MAX_ENV_STEPS)}
UNIT_RATES = ("gamma", "gae_lambda", "tau")  # fractions: 0 to 1


def _checked_entry(entry: Any, where: str) -> dict[str, Any]:
    """A file's entry with its counts and rates checked as numbers in their range before anything is built (pass 18,
    B1: a NaN learning rate, a negative batch size, an infinite n_timesteps or 10^8 envs were tracebacks or hangs)."""
    if not isinstance(entry, dict):
        raise InvalidInputError(f"{where} must be a mapping of hyperparameters, not a {type(entry).__name__}")
    for key, value in entry.items():
        if key in COUNT_KEYS:
            _check_count(key, value, where)
        if key in RATE_KEYS:
            _check_rate(key, value, where)
    if "n_steps" in entry and "n_envs" in entry:  # the rollout buffer holds both
        rows = float(entry["n_steps"]) * float(entry["n_envs"])
        if rows > MAX_BUFFER_ROWS:
            raise InvalidInputError(f"{where}: n_steps x n_envs is {rows:,.0f} rows of rollout buffer, more than "
                                    f"{MAX_BUFFER_ROWS:,}", hint="lower n_steps or n_envs")
    return dict(entry)


def _check_count(key: str, value: Any, where: str) -> None:
    number = float(value) if is_number(value) or (isinstance(value, str) and _is_float(value)) else None
    if number is None:
        raise InvalidInputError(f"{where}: {key} is {value!r}, not a number")
    low, high = COUNT_BOUNDS[key]
    if not (low <= number <= high) or number != int(number):
        raise InvalidInputError(f"{where}: {key} is {value!r}, not a whole number from {low:,} to {high:,}")


def _check_rate(key: str, value: Any, where: str) -> None:
    if isinstance(value, str) and value.startswith(("lin_", "auto")):
        text = value[4:] if value.startswith("lin_") else value[5:] if value.startswith("auto_") else ""
        if text and not _is_finite(text):
            raise InvalidInputError(f"{where}: {key} is {value!r}: the number in it is not finite")
        return
    if not is_number(value):
        raise InvalidInputError(f"{where}: {key} is {value!r}, not a number (or lin_<number>, auto)")
    number = float(value)
    if not math.isfinite(number) or number < 0 or (key in UNIT_RATES and number > 1) or \
            (key == "learning_rate" and number == 0):
        bound = "from 0 to 1" if key in UNIT_RATES else "above 0" if key == "learning_rate" else "0 or more"
        raise InvalidInputError(f"{where}: {key} is {value!r}; it must be a finite number {bound}")


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _is_finite(text: str) -> bool:
    return _is_float(text) and math.isfinite(float(text))


def _display_path(file: Path) -> str:
    """A shipped file as ``rlft/sources/zoo/NAME`` (metadata does not leak local paths); another file as given."""
    try:
        return str(file.resolve().relative_to(HYPERPARAMS_DIR.parents[2]))
    except ValueError:
        return str(file)


def _resolve(key: str, value: Any) -> Any:
    if isinstance(value, str) and value.startswith("lin_"):
        from stable_baselines3.common.utils import LinearSchedule

        try:
            start = float(value[4:])
        except ValueError as exc:
            raise InvalidInputError(f"{key}: {value!r} is not lin_<number>") from exc
        # SB3 calls schedules with progress_remaining (1 -> 0): end value 0 reached at the end of training.
        return LinearSchedule(start, 0.0, 1.0)
    return value


def _activation_classes() -> dict[str, Any]:
    from torch import nn

    return {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "leaky_relu": nn.LeakyReLU, "gelu": nn.GELU,
            "silu": nn.SiLU}


def resolve_policy_kwargs(value: Any) -> dict[str, Any]:
    """``policy_kwargs`` as SB3 takes them: an ``activation_fn`` name (tanh, relu, ...) becomes its torch class."""
    if not isinstance(value, dict):
        raise InvalidInputError(f"policy_kwargs must be a mapping, got {value!r}")
    kwargs = dict(value)
    _check_net_arch(kwargs.get("net_arch"))
    name = kwargs.get("activation_fn")
    if isinstance(name, str):
        classes = _activation_classes()
        if name not in classes:
            raise InvalidInputError(f"activation_fn {name!r} is not one of {', '.join(classes)}")
        kwargs["activation_fn"] = classes[name]
    return kwargs


MAX_NET_WIDTH = 100_000  # units of one net_arch layer; the weights between layers are what binds


def _check_net_arch(arch: Any) -> None:
    """``net_arch`` (a list of widths, a dict of them per head, or a list holding such a dict) bounded before SB3
    allocates it: [100000, 100000] asked for 40 GB and ended in a traceback (hostile pass 21, F10)."""
    if arch is None:
        return
    stack, weights = [arch], 0
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack += list(item.values())
            continue
        if not isinstance(item, list | tuple):
            raise InvalidInputError(f"net_arch of policy_kwargs holds {item!r}: widths (whole numbers) are expected")
        widths = [w for w in item if not isinstance(w, dict | list | tuple)]
        stack += [w for w in item if isinstance(w, dict | list | tuple)]
        if not all(isinstance(w, int) and not isinstance(w, bool) and 1 <= w <= MAX_NET_WIDTH for w in widths):
            raise InvalidInputError(f"net_arch of policy_kwargs: each width must be a whole number from 1 to "
                                    f"{MAX_NET_WIDTH:,}, got {widths}")
        weights += layer_weights(widths)
    if weights > MAX_HIDDEN_WEIGHTS:  # the bound train bc's --hidden meets (rlft.models.bc.check_hidden)
        raise InvalidInputError(f"net_arch of policy_kwargs holds {weights:,} weights between its layers, more than "
                                f"{MAX_HIDDEN_WEIGHTS:,}", hint="use narrower layers (SB3's default is [64, 64])")


def check_rollout(hp: Hyperparams, n_envs: int, timesteps: int) -> None:
    """An on-policy run collects whole rollouts of n_steps x n_envs before it can stop: far more than --timesteps
    is a run that ignores it (n_steps 10^7 ran on for minutes at --timesteps 64: hostile pass 21, F11)."""
    n_steps = hp.raw.get("n_steps")
    if n_steps is None:
        return
    rollout = int(float(n_steps)) * n_envs
    if rollout > max(ROLLOUT_SLACK * timesteps, MIN_ROLLOUT_BOUND):
        raise InvalidInputError(f"{hp.source}: one rollout is n_steps x n_envs = {rollout:,} env steps, which runs "
                                f"whole before --timesteps {timesteps:,} can stop it",
                                hint="lower n_steps (or n_envs), or raise --timesteps")


ROLLOUT_SLACK, MIN_ROLLOUT_BOUND = 10, 100_000  # a rollout may pass --timesteps this many times, or this many steps


def policy_kwargs_to_names(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`resolve_policy_kwargs` for metadata: an activation class back to its name."""
    out = dict(kwargs)
    fn = out.get("activation_fn")
    if fn is not None and not isinstance(fn, str):
        names = {cls: name for name, cls in _activation_classes().items()}
        if fn not in names:
            raise InvalidInputError(f"activation_fn {fn!r} has no name rlft can save",
                                    hint=f"use one of {', '.join(names.values())}")
        out["activation_fn"] = names[fn]
    return out
