"""Build a numeric codec (``raw``, ``discretized``, ``tokenized``, ``binned``) for a pair of spaces, fitted on
data."""

from __future__ import annotations

from typing import Any

from rlft.codecs.binned import BinnedCodec
from rlft.codecs.choices import RLFT4RL_FIXED
from rlft.codecs.discretized import DiscretizedCodec
from rlft.codecs.numeric import NumericCodec, check_rows, observation_rows
from rlft.codecs.numeric_prompt import numeric_template
from rlft.codecs.raw import RawCodec
from rlft.codecs.structured import flat_box, is_structured
from rlft.codecs.template import PromptTemplate
from rlft.codecs.tokenized import TokenizedCodec
from rlft.core.errors import InvalidInputError
from rlft.envs.spaces import space_to_dict

NUMERIC_FORMATS: dict[str, type[NumericCodec]] = {
    "raw": RawCodec,
    "discretized": DiscretizedCodec,
    "tokenized": TokenizedCodec,
    "binned": BinnedCodec,
}


def _fit_inputs(format: str, observation_space, action_space) -> tuple[type[NumericCodec], dict, dict, dict]:
    """The codec class of ``format``, both spaces as dicts, and the observation space it is fitted on."""
    if format not in NUMERIC_FORMATS:
        raise InvalidInputError(f"unknown numeric codec format {format!r}", hint=f"use one of {list(NUMERIC_FORMATS)}")
    obs_space = observation_space if isinstance(observation_space, dict) else space_to_dict(observation_space,
                                                                                             "observation")
    act_space = action_space if isinstance(action_space, dict) else space_to_dict(action_space, "action")
    # a structured observation (Dict, Tuple...) is fitted as its flat row of values
    fit_space = flat_box(obs_space) if is_structured(obs_space) else obs_space
    return NUMERIC_FORMATS[format], obs_space, act_space, fit_space


def codec_fits_on_data(format: str, observation_space, action_space, *, edges_from: str = "data") -> bool:
    """Whether :func:`make_codec` needs the dataset's observations and actions for these spaces: ``tokenized``
    ranges and ``discretized`` quantile edges do; ``raw`` and edges over finite bounds do not."""
    cls, _, act_space, fit_space = _fit_inputs(format, observation_space, action_space)
    return cls.fits_on_data(fit_space, act_space, edges_from=edges_from)


def make_codec(
    format: str,
    observation_space,
    action_space,
    *,
    observations=None,
    actions=None,
    precision: int = 3,
    bins: int = 32,
    edges_from: str = "data",
    tokens: int = 1000,
    prompt_style: str = "plain",
    history: int = 0,
    return_to_go: bool = False,
    env_id: str | None = None,
    env_kwargs: dict[str, Any] | None = None,
    system: str | None = None,
    separator: str = " ",
    prefill: bool = False,
    profile: str | None = None,
    turns: int = 0,
) -> NumericCodec:
    """A numeric codec for ``observation_space``/``action_space`` (gymnasium spaces or their dicts).

    ``observations``/``actions`` are the dataset's arrays, needed by ``discretized`` (edges from data) and
    ``tokenized``; they are checked for shape and NaN/inf. ``separator`` goes between values (" " or ",");
    ``prefill`` ends plain prompts with the answer's opening tag; ``turns`` > 1 makes each prompt the episode so far
    as a conversation of that many turns. ``profile="rlft4rl"`` writes RLFT4RL's format:
    "," between values, 5 decimals (raw), tokens as ``int()`` of the scaled value (tokenized), its prompt
    layout with ``<action>`` prefilled. Raises :class:`InvalidInputError` on bad input.
    """
    cls, obs_space, act_space, fit_space = _fit_inputs(format, observation_space, action_space)
    obs_rows = None if observations is None else observation_rows(obs_space, observations)
    act_rows = None if actions is None else check_rows(act_space, actions, "action")
    rounding, signed_zero = "nearest", False
    if profile == "rlft4rl":
        separator, precision, prompt_style = (RLFT4RL_FIXED[k] for k in ("separator", "precision", "prompt_style"))
        rounding, signed_zero = "floor", True
    options = {
        "raw": {"precision": precision, "signed_zero": signed_zero},
        "discretized": {"bins": bins, "edges_from": edges_from},
        "tokenized": {"tokens": tokens, "rounding": rounding},
        "binned": {"bins": bins, "edges_from": edges_from},
    }[format]
    params = cls.fit_params(fit_space, act_space, obs_rows, act_rows, **options)
    # the template describes the fitted encoding, so the codec exists before its template
    codec = cls(obs_space, act_space, PromptTemplate(), env_id=env_id, env_kwargs=env_kwargs, separator=separator,
                **params)
    codec.template = numeric_template(
        prompt_style, obs_space, act_space, codec.encoding_description(), env_id, history, return_to_go, system,
        separator=separator, profile=profile, turns=turns,
    )
    if prefill and not codec.template.prefill:
        if prompt_style != "plain":
            raise InvalidInputError("--prefill needs --prompt-style plain (a chat prompt ends with its own "
                                    "assistant header)")
        codec.template.prefill = True
    return codec
