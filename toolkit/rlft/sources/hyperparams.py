"""RL-Zoo-style hyperparameter files: ``rlft/sources/zoo/<algo>.yaml`` (shipped inside the package) keyed by env id.

An entry holds keyword arguments of the SB3 algorithm plus three RL-Zoo keys that are not arguments:
``n_envs``, ``n_timesteps`` and ``policy``. Values written as ``lin_<x>`` become a schedule that decays
linearly from x to 0 over training (RL-Zoo's notation); ``policy_kwargs.activation_fn`` is a name (tanh, relu).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlft.core.errors import InvalidInputError
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


def _checked_entry(entry: Any, where: str) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise InvalidInputError(f"{where} must be a mapping of hyperparameters, not a {type(entry).__name__}")
    for key, value in entry.items():
        number = is_number(value)
        if key in COUNT_KEYS and not (number or (isinstance(value, str) and _is_float(value))):
            raise InvalidInputError(f"{where}: {key} is {value!r}, not a number")
        if key in RATE_KEYS and not (number or (isinstance(value, str) and (value.startswith(("lin_", "auto"))))):
            raise InvalidInputError(f"{where}: {key} is {value!r}, not a number (or lin_<number>, auto)")
    return dict(entry)


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


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
    name = kwargs.get("activation_fn")
    if isinstance(name, str):
        classes = _activation_classes()
        if name not in classes:
            raise InvalidInputError(f"activation_fn {name!r} is not one of {', '.join(classes)}")
        kwargs["activation_fn"] = classes[name]
    return kwargs


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
