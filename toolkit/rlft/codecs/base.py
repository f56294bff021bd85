"""The one codec interface: encode observations/actions as text, decode model text back to an action.

A codec is data: :meth:`Codec.to_dict` holds everything (spaces, template, bins, ranges) and is saved as
``rlft_codec.json`` next to the dataset. Trainers and evaluation call :func:`load_codec` and never rebuild a
format by hand.
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from importlib import import_module
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from rlft.codecs.template import PromptTemplate
from rlft.core.errors import InvalidInputError, RlftError
from rlft.core.reading import read_json_mapping, require_file
from rlft.envs.frozenlake import validate_rows
from rlft.envs.registry import ensure_registered
from rlft.envs.spaces import space_from_dict, space_to_dict

CODEC_FILENAME = "rlft_codec.json"
CODEC_SCHEMA_VERSION = 1
_REGISTRY: dict[str, type[Codec]] = {}


class ActionParseError(RlftError, ValueError):
    """Model text that does not decode to an action; ``reason`` says why (no answer block, bad token...)."""

    def __init__(self, reason: str, text: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.text = text


CODEC_MODULES = ("raw", "discretized", "tokenized", "binned", "grid")  # each registers its kinds when imported


def _register_kinds() -> None:
    """Import every codec module (``rlft.codecs`` loads them lazily), so a saved codec of any kind can be read."""
    for module in CODEC_MODULES:
        import_module(f"rlft.codecs.{module}")


def register_codec(cls: type[Codec]) -> type[Codec]:
    """Class decorator: make a codec kind loadable by :func:`codec_from_dict`."""
    _REGISTRY[cls.kind] = cls
    return cls


class Codec(ABC):
    """Shared interface of every codec kind (``raw``, ``discretized``, ``tokenized``, ``frozenlake-grid``)."""

    kind: ClassVar[str]

    def __init__(
        self,
        observation_space: dict[str, Any],
        action_space: dict[str, Any],
        template: PromptTemplate,
        env_id: str | None = None,
        env_kwargs: dict[str, Any] | None = None,
    ):
        self.observation_space = observation_space if isinstance(observation_space, dict) else space_to_dict(
            observation_space
        )
        self.action_space = action_space if isinstance(action_space, dict) else space_to_dict(action_space)
        self.template = template
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs or {})

    # -- what subclasses define -------------------------------------------------------------------------
    @abstractmethod
    def encode_observation(self, obs) -> str:
        """Text for one observation."""

    @abstractmethod
    def encode_action(self, action) -> str:
        """Text for one action (without the answer tags)."""

    @abstractmethod
    def parse_action_text(self, text: str):
        """The action for the text inside the answer tags; raise :class:`ActionParseError` if invalid."""

    def params(self) -> dict[str, Any]:
        """Kind-specific parameters saved in the codec file (bins, ranges, precision...)."""
        return {}

    # -- shared behaviour -----------------------------------------------------------------------------
    @property
    def is_discrete_action(self) -> bool:
        return self.action_space["type"] == "discrete"

    def encode_observations(self, observations) -> list[str]:
        """Text for a batch of observations; subclasses vectorise this."""
        return [self.encode_observation(o) for o in observations]

    def encode_actions(self, actions) -> list[str]:
        """Text for a batch of actions; subclasses vectorise this."""
        return [self.encode_action(a) for a in actions]

    def decode_action(self, text: str | list[dict[str, str]]):
        """Model output (a completion string or chat messages) -> a valid action of the action space.

        Raises :class:`ActionParseError` with the reason when no valid action can be read.
        """
        inner = self.template.extract_answer(text)
        if inner is None:
            inner = self._prefilled_answer(text)
        if inner is None:
            fmt = self.template.answer_format.replace("{action}", "...")
            raise ActionParseError(f"no answer block of the form {fmt}", text if isinstance(text, str) else "")
        if not inner:
            raise ActionParseError("empty answer", inner)
        return self.parse_action_text(inner)

    def _prefilled_answer(self, text) -> str | None:
        """An answer whose opening tag was in the prompt (RLFT4RL prefills ``<action>``): ``v1,v2</action>``."""
        if isinstance(text, list):
            text = text[-1]["content"] if text else ""
        prefix, suffix = self.template.answer_prefix, self.template.answer_suffix
        if not suffix or suffix not in text or (prefix and prefix in text):
            return None
        return text[: text.find(suffix)].strip()

    def build_prompt(self, obs, context: str = ""):
        return self.template.build_prompt(self.encode_observation(obs), context)

    def build_completion(self, action):
        return self.template.build_completion(self.encode_action(action))

    def credit_key(self, obs) -> str | None:
        """A coarser name of ``obs`` for the empirical critic of episodic GRPO (``--credit-key local``): states that
        share it pool their experience. None: this codec defines none (the critic keys on the observation text)."""
        return None

    def make_env(self, **kwargs):
        """The gymnasium environment this codec's data came from (evaluation and env rewards use it)."""
        import gymnasium as gym


        if not self.env_id:
            raise InvalidInputError("this codec records no env id", hint="pass the environment explicitly")
        ensure_registered(self.env_id)
        return gym.make(self.env_id, **{**self.env_kwargs, **kwargs})

    def spaces(self):
        """(observation_space, action_space) as gymnasium spaces."""
        return space_from_dict(self.observation_space), space_from_dict(self.action_space)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rlft_codec_version": CODEC_SCHEMA_VERSION,
            "kind": self.kind,
            "env_id": self.env_id,
            "env_kwargs": self.env_kwargs,
            "observation_space": self.observation_space,
            "action_space": self.action_space,
            "template": self.template.to_dict(),
            "params": _jsonable(self.params()),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Codec:
        return cls(
            observation_space=data["observation_space"],
            action_space=data["action_space"],
            template=PromptTemplate.from_dict(data["template"]),
            env_id=data.get("env_id"),
            env_kwargs=data.get("env_kwargs"),
            **data.get("params", {}),
        )

    def save(self, directory: str | os.PathLike) -> Path:
        path = Path(directory) / CODEC_FILENAME
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
        return path

    def describe(self) -> str:
        """One line for cards and tables."""
        extra = ", ".join(f"{k}={v}" for k, v in self.params().items() if not isinstance(v, list | dict))
        return f"{self.kind}" + (f" ({extra})" if extra else "")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.describe()})"


def _jsonable(value):
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


CODEC_KEYS = ("kind", "observation_space", "action_space", "template")


def _check_space(space: Any, what: str) -> None:
    """What every env check and decoder reads of a saved space (a damaged codec file fails here, not mid-episode)."""
    if not isinstance(space, dict) or not isinstance(space.get("type"), str):
        raise ValueError(f"{what} is not a space")
    if space["type"] == "discrete" and not (isinstance(space.get("n"), int) and space["n"] >= 1):
        raise ValueError(f"{what}: a discrete space needs n >= 1")
    if space["type"] == "box":
        shape = space.get("shape")
        if not isinstance(shape, list) or not all(isinstance(n, int) and n >= 0 for n in shape):
            raise ValueError(f"{what}: a box space needs a shape")
        for bound in ("low", "high"):
            if bound not in space or np.asarray(space[bound], dtype=np.float64).size != int(np.prod(shape)):
                raise ValueError(f"{what}: a box space needs {bound}, one number per element")


def codec_from_dict(data: dict[str, Any], source: str = "the codec") -> Codec:
    """Rebuild any registered codec kind from its saved dict; :class:`InvalidInputError` naming ``source`` when
    the dict is not a codec rlft can read (missing keys, unknown kind or schema version, bad values).

    The built-in kinds are registered by the time this runs: importing this module runs ``rlft/codecs/__init__``
    first, and that imports every kind."""
    if not isinstance(data, dict):
        raise InvalidInputError(f"{source} must hold a JSON object, not a {type(data).__name__}")
    missing = [k for k in CODEC_KEYS if k not in data]
    if missing:
        raise InvalidInputError(f"{source} is not an rlft codec: it lacks {', '.join(missing)}",
                                hint="re-create the dataset with rlft data serialize / export-q")
    version = data.get("rlft_codec_version", CODEC_SCHEMA_VERSION)
    if version != CODEC_SCHEMA_VERSION:
        raise InvalidInputError(f"{source} has codec schema version {version!r}; this rlft reads version "
                                f"{CODEC_SCHEMA_VERSION}", hint="use the rlft version that wrote it, or re-create it")
    kind = data.get("kind")
    _register_kinds()
    if not isinstance(kind, str) or kind not in _REGISTRY:  # a list was "unhashable" (hostile pass 15, B6)
        raise InvalidInputError(f"{source}: unknown codec kind {kind!r}", hint=f"known kinds: {sorted(_REGISTRY)}")
    try:
        codec = _REGISTRY[kind].from_dict(data)
        for what in ("observation_space", "action_space"):
            _check_space(data[what], what)
        _check_env_kwargs(codec.env_kwargs)
        if codec.env_id is not None and not isinstance(codec.env_id, str):  # a list: a traceback at the env (pass 17)
            raise InvalidInputError(f"env_id must be a gymnasium id (text), got {codec.env_id!r}")
        return codec
    except InvalidInputError as exc:
        raise InvalidInputError(f"{source}: {exc.message}", hint=exc.hint) from exc
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # AttributeError: numbers as action names
        raise InvalidInputError(f"{source} holds a malformed {kind} codec ({type(exc).__name__}: {exc})",
                                hint="re-create the dataset with rlft data serialize / export-q") from exc


def _check_env_kwargs(env_kwargs: dict[str, Any]) -> None:
    """A map the codec hands the environment (FrozenLake's ``desc``) passes the checks a --map file passes: a codec
    edited to a 3000x3000 grid took 5 GB before the first step."""
    slippery = env_kwargs.get("is_slippery")
    if slippery is not None and not isinstance(slippery, bool):  # "false", a string, made a slippery lake
        raise InvalidInputError(f"env_kwargs.is_slippery must be true or false (JSON booleans), got {slippery!r}")
    desc = env_kwargs.get("desc")
    if desc is not None:
        if not isinstance(desc, list) or not all(isinstance(row, str) for row in desc):
            raise InvalidInputError("env_kwargs.desc must be a list of grid rows (strings)")
        validate_rows(desc, "env_kwargs.desc")


def load_codec(path: str | os.PathLike) -> Codec:
    """Load the codec of a dataset folder (or a codec JSON file itself)."""
    path = Path(path)
    file = path / CODEC_FILENAME if path.is_dir() else path
    require_file(file, "codec file", hint="pass an rlft dataset folder (it holds rlft_codec.json)")

    return codec_from_dict(read_json_mapping(file, "codec file"), f"codec file {file}")
