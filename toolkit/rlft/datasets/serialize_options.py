"""The options of ``rlft data serialize`` (:class:`SerializeConfig`) and their checks, made before the source is read
(the observation size check once its spaces are known)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from rlft.codecs.choices import RLFT4RL_FIXED
from rlft.codecs.numeric_prompt import PROFILES
from rlft.core.console import console
from rlft.core.errors import InvalidInputError
from rlft.core.io import check_output_dir
from rlft.core.options import check_declared, check_needed, unused_settings
from rlft.core.secrets import refuse_secret_text
from rlft.datasets.card import read_extra_markdown
from rlft.datasets.serialize_config import SerializeConfig
from rlft.sources.minari_source import datasets_root

# tokens (bins) per value: each can be a token of the model's vocabulary; a trillion was accepted and model init
# then filled the memory (hostile pass 12, B3)
MAX_CODEC_TOKENS = 100_000
MAX_HISTORY = 1000  # previous steps (--history) or turns (--turns) in one prompt


def validate_config(config: SerializeConfig) -> None:
    """Every option is checked before the source is read."""
    check_declared(config)  # the declared choices and bounds, however the config was made
    check_needed(config, {"download": (config.download, "with --download")})  # ignored, a typo (pass 15, B16)
    _note_other_formats_options(config)
    _check_prompt_options(config)
    _check_codec_options(config)
    if config.max_episodes is not None and config.max_episodes < 1:
        raise InvalidInputError(f"--max-episodes must be at least 1, got {config.max_episodes}",
                                hint="leave it out to serialize every episode")
    if config.chunk_steps < 1 or config.in_memory_steps < 0:
        raise InvalidInputError("chunk_steps must be >= 1 and in_memory_steps >= 0")
    refuse_secret_text(config.system, "--system", "the system text is written into every prompt, the codec and "
                       "the dataset card")
    check_output_dir(config.out, config.overwrite, inputs=serialize_inputs(config))
    read_extra_markdown(config.card_extra)  # a missing or unreadable file is refused before the data scan


def serialize_inputs(config: SerializeConfig) -> list[tuple[str, str | Path | None]]:
    """The local files and folders serialize reads: ``--out`` must stay clear of them."""

    source = Path(config.source).expanduser()
    if not source.exists() and "/" in config.source and not Path(config.source).is_absolute():
        source = datasets_root() / config.source  # a local Minari id
    return [("Minari dataset", source), ("--card-extra", config.card_extra)]


def _check_prompt_options(config: SerializeConfig) -> None:
    """Format, prompt style, splits and history."""
    fractions = np.asarray(config.splits, dtype=float)
    if len(fractions) != 3 or np.any(fractions < 0) or not np.isclose(fractions.sum(), 1.0) or fractions[0] <= 0:
        raise InvalidInputError(
            f"--splits must be three non-negative fractions train,validation,test summing to 1 (train > 0), "
            f"got {','.join(map(str, config.splits))}"
        )
    if not 0 <= config.history <= MAX_HISTORY:  # each prompt holds them all: a billion hung the serializer
        raise InvalidInputError(f"--history must be from 0 to {MAX_HISTORY}, got {config.history}")
    if not 0 <= config.turns <= MAX_HISTORY:  # as many turns as steps of history: each prompt holds them all
        raise InvalidInputError(f"--turns must be from 0 to {MAX_HISTORY}, got {config.turns}")
    if config.turns == 1:  # one turn is the one-step prompt: the flag did nothing (hostile pass 18, B5)
        raise InvalidInputError("--turns 1 writes the same one-step prompts as no --turns",
                                hint="--turns K with K > 1 makes each prompt a conversation of its last K turns")
    if config.turns > 1 and (config.prefill or config.profile is not None):
        raise InvalidInputError("--turns writes conversations; a prefilled answer tag (--prefill, --profile) needs "
                                "single-turn prompts", hint="drop one of them")


def _note_other_formats_options(config: SerializeConfig) -> None:
    """A codec option of another format does nothing: said, not refused, since a recipe passes its {bins} and
    {precision} whatever its {format} (hostile pass 20, F1: --bins beside --format raw exited 0 without a word)."""
    binned = config.format in ("discretized", "binned")
    formats = {"raw": (config.format == "raw", "with --format raw"),
               "bins": (binned, "with --format discretized or binned"),
               "tokenized": (config.format == "tokenized", "with --format tokenized")}
    for flag, applies in unused_settings(config, formats):
        console.print(f"[yellow]Note:[/] {flag} is not used: it applies {applies} (this is --format "
                      f"{config.format})", highlight=False)


def _check_codec_options(config: SerializeConfig) -> None:
    """The codec's options, whatever the format (a --bins 0 beside --format raw is a mistake too)."""

    if not 0 <= config.precision <= 6:
        raise InvalidInputError("--precision must be in 0..6")
    if not 2 <= config.bins <= MAX_CODEC_TOKENS:
        raise InvalidInputError(f"--bins must be from 2 to {MAX_CODEC_TOKENS:,}, got {config.bins}")
    if not 2 <= config.tokens <= MAX_CODEC_TOKENS:
        raise InvalidInputError(f"--tokens must be from 2 to {MAX_CODEC_TOKENS:,}, got {config.tokens}")
    if config.profile is not None and config.profile not in PROFILES:
        raise InvalidInputError(f"unknown --profile {config.profile!r}", hint=f"known: {', '.join(PROFILES)}")
    if config.profile == "rlft4rl":  # the profile sets these itself: another value was overridden without a word
        default = {f.name: f.default for f in dataclasses.fields(SerializeConfig)}
        for name, value in RLFT4RL_FIXED.items():
            given, flag = getattr(config, name), "--" + name.replace("_", "-")
            if given not in (value, default[name]):
                raise InvalidInputError(f"{flag} {given} does nothing with --profile rlft4rl, which writes "
                                        f"{value!r}", hint=f"leave {flag} out")
    if config.prefill and config.prompt_style != "plain" and config.profile is None:
        raise InvalidInputError("--prefill needs --prompt-style plain")


LARGE_OBSERVATION = 1024  # values per observation beyond which an image-like Box is refused by default


def check_observation_size(space, allow_large: bool) -> None:
    """Refuse image-like observations (more than 1,024 values) in one line: as text they make prompts of
    thousands of tokens. ``--allow-large-observations`` lets them through."""
    from gymnasium import spaces

    if allow_large or not isinstance(space, spaces.Box):
        return
    size = int(np.prod(space.shape))
    if size > LARGE_OBSERVATION:
        raise InvalidInputError(
            f"observations of shape {tuple(space.shape)} ({size:,} values, {space.dtype}) would make prompts of "
            f"thousands of tokens", hint="shrink them first (gymnasium's ResizeObservation / GrayscaleObservation "
            "wrappers when collecting), or pass --allow-large-observations")
