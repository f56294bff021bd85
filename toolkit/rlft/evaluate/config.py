"""What ``rlft eval`` takes: :class:`EvalConfig` (the CLI flags, one to one) and policy specs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rlft.core.errors import InvalidInputError

POLICY_KINDS = ("llm", "random", "constant", "expert", "bc", "q-greedy", "online")
BACKENDS = ("transformers", "openai")


@dataclass
class EvalConfig:
    """Everything ``rlft eval`` takes (the CLI flags, one to one)."""

    policy: str
    env_id: str | None = None
    episodes: int = 10
    num_envs: int = 1
    seed: int = 0
    out: Path | None = None
    codec: str | None = None  # dataset folder whose codec (and Q-values / examples) to use
    allow_codec_mismatch: bool = False  # --codec for another env/kind/spaces than the run's own codec
    backend: str = "transformers"
    api_url: str | None = None
    api_model: str | None = None
    api_key: str | None = None
    concurrency: int = 8
    api_timeout: float = 60.0  # seconds an OpenAI-compatible server may take to answer one request
    constrained: bool = False
    fallback_action: str | None = None
    target_return: float | None = None
    n_examples: int = 0
    bin_decoding: str = "auto"  # binned codecs: rlft.policy.bins (mean, argmax, off; auto picks)
    temperature: float = 0.0
    top_p: float = 1.0
    max_new_tokens: int | None = None
    cache: bool = True  # greedy decoding: generate each distinct prompt once (rlft.policy.generation)
    api_stop: bool = True  # send the answer's closing tag as a stop string to OpenAI-compatible servers
    expert: Path | None = None  # SB3 checkpoint to measure agreement against
    action_error: str | None = None  # dataset folder: the policy's error on its held-out rows (rlft.evaluate.actions)
    video: Path | None = None
    video_episodes: int = 3
    max_episode_steps: int | None = None
    overwrite: bool = False
    quiet: bool = False


def parse_policy_spec(spec: str) -> tuple[str, str | None]:
    """``llm:MODEL``, ``random``, ``constant[:VALUE]``, ``expert:FILE.zip``, ``bc:FILE``, ``q-greedy``,
    ``online:RUN`` (an ``rlft train online`` run)."""
    kind, _, arg = str(spec).partition(":")
    kind = kind.strip().lower()
    arg = arg.strip() or None
    if kind not in POLICY_KINDS:
        raise InvalidInputError(
            f"unknown policy {spec!r}",
            hint="use llm:MODEL, random, constant[:VALUE], expert:FILE.zip, bc:FILE, q-greedy or online:RUN",
        )
    if kind in ("expert", "bc", "online") and not arg:
        raise InvalidInputError(f"--policy {kind} needs a file: {kind}:FILE")
    if kind == "llm" and not arg:
        raise InvalidInputError("--policy llm needs a model: llm:MODEL (a model folder, a RUN folder or a Hub id)")
    return kind, arg
