"""What ``rlft eval`` takes: :class:`EvalConfig` (the CLI flags, one to one) and policy specs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rlft.core.errors import InvalidInputError
from rlft.core.options import MAX_EPISODE_STEPS, MAX_EPISODES, MAX_WAIT_SECONDS, Declared, option

POLICY_KINDS = ("llm", "random", "constant", "expert", "bc", "q-greedy", "online", "offline")
BACKENDS = ("transformers", "openai")



@dataclass
class EvalConfig(Declared):
    """Everything ``rlft eval`` takes: its options are generated from these fields (rlft.cli.options)."""

    policy: str = field(metadata={"help": "llm:MODEL (model folder, RUN folder or Hub id), random, constant[:VALUE], "
                                          "expert:FILE.zip, bc:FILE, q-greedy, online:RUN, offline:RUN."})
    env_id: str | None = option(None, "Gymnasium env id (default: the codec's env).", aliases=["--env"])
    # each episode's return, length and seed are kept for the report: 10**13 grew until memory ran out
    episodes: int = option(10, "Episodes N; episode i is seeded SEED + i.", max=MAX_EPISODES)
    num_envs: int = option(1, "Vector environments K stepped together (capped to N).")
    seed: int = option(0, "Seed of episode 0.", min=0)
    out: Path | None = option(None, "REPORT.json (REPORT.png and REPORT_tb/ beside it).")
    codec: str | None = option(None, "Dataset folder whose codec/prompt template to use (default: the RUN folder's); "
                                   "also the Q-values for q-greedy and agreement, and the few-shot examples.")
    allow_codec_mismatch: bool = option(False, "Evaluate a RUN with a --codec for another environment, codec kind or "
                                             "spaces than its own.", needs="llm")
    backend: str = option("transformers", "transformers or openai.", choices=BACKENDS)
    device: str = option("auto", "transformers: where the model runs: auto (cuda when torch sees a GPU, else cpu), "
                               "cpu, cuda or cuda:N.", needs="transformers")
    api_url: str | None = option(None, "openai: server URL, e.g. http://127.0.0.1:8000/v1.", needs="openai")
    api_model: str | None = option(None, "openai: model name on the server.", needs="openai")
    api_key: str | None = option(None, "openai: API key (default: OPENAI_API_KEY).")  # a key may be set for all
    concurrency: int = option(8, "openai: requests in flight at once.", needs="openai")
    api_timeout: float = option(60.0, "openai: seconds a server may take to answer a request (3 tries).", min=0.001,
                                max=MAX_WAIT_SECONDS, needs="openai")
    constrained: bool = option(False, "Only allow tokens that keep a valid answer (transformers).", needs="llm")
    fallback_action: str | None = option(None, "Action taken when the output does not parse (counted as invalid) "
                                             "(default: 0 / the first action).", needs="llm")
    target_return: float | None = option(None, "Return-to-go at the start (codecs conditioned on it) (default: the "
                                             "dataset's best episode return).")
    n_examples: int = option(0, "Few-shot (observation, expert action) pairs from the --codec dataset.", min=0,
                             needs="llm")
    bin_decoding: str = option("auto", "binned codecs: read each action dimension's distribution over its bins: mean "
                                     "(its expectation), local-mean (the expectation near the most likely bin), "
                                     "trimmed-mean (the expectation over bins of >= 1% probability), argmax, off "
                                     "(generate text); auto: mean when every bin is one token of the "
                                     "model's tokenizer, else off.", needs="llm")
    temperature: float = option(0.0, "0 = greedy decoding.", needs="llm")
    top_p: float = option(1.0, "Nucleus sampling (temperature > 0).", needs="sampling")
    max_new_tokens: int | None = option(None, "Token budget per answer (default: the longest valid answer + 8).",
                                        needs="llm")
    cache: bool = option(True, "Greedy decoding: generate each distinct prompt once (FrozenLake: 11 generations, not "
                             "thousands).", needs="llm")
    api_stop: bool = option(True, "Send the answer's closing tag as a stop string (--backend openai). transformers "
                                "serve cannot match stop strings with rlft's tiny word-level tokenizers: pass "
                                "--no-api-stop for them.", needs="openai")
    expert: Path | None = option(None, "SB3 checkpoint: report agreement with its actions.")
    action_error: str | None = option(None, "Dataset folder (continuous actions): also report the policy's action "
                                          "error on up to 2,000 rows of its held-out split, per dimension and as a "
                                          "fraction of each dimension's range.")
    video: Path | None = option(None, "Folder for MP4s of the first episodes (MuJoCo: MUJOCO_GL=egl).")
    video_episodes: int = option(3, "How many episodes --video records.", needs="video")
    max_episode_steps: int | None = option(None, "Override the time limit.", min=1, max=MAX_EPISODE_STEPS)
    action_scale: float = option(1.0, "Multiply every action by this, clipped to the action space, before the env "
                                    "steps (continuous actions): how much the return hinges on how hard the policy "
                                    "pushes.")
    search: int = option(0, "Test-time search (a diagnosis, continuous actions): score the policy's action and N-1 "
                          "perturbations of it by playing each from the current state, restored in a copy of the "
                          "env, then --expert for --search-horizon steps; play the best (0: off).", min=0)
    search_horizon: int = option(20, "--search: steps each candidate is scored over.", min=1, needs="search")
    search_noise: float = option(0.1, "--search: perturbation std as a fraction of each dimension's half-range.",
                                 needs="search")
    critic: str | None = option(None, "RUN of rlft train offline (IQL or TD3+BC): critic-ranked decoding of a binned "
                                    "LLM. Each step the LLM's mean action and --critic-candidates - 1 actions "
                                    "drawn from its own bin distributions are scored by the critic's Q; the best "
                                    "is played (the report names the critic: the policy is the LLM and it).")
    # 64: on row 12e's seed 2, 16 -> 32 -> 64 candidates raised the return each time (diminishing) at no visible
    # cost, the critic being a small MLP scoring all of them in one batch
    critic_candidates: int = option(64, "--critic: actions scored per step, the mean action included.", min=2,
                                    needs="critic")
    # 0.3 (BCQ's own threshold): chosen on row 12e's seed 2 (0 / 0.1 / 0.3: 40.6 / 40.7 / 40.9), then held on seeds 0
    # and 1 (+0.7, +0.3); on Pendulum's DART data it softens a critic that cannot rank (row 11e: -1347 -> -358)
    critic_min_prob: float = option(0.3, "--critic: draw only bins the model gives at least this share of its most "
                                         "likely bin's probability (BCQ's threshold: candidates stay where the data "
                                         "is; 0: every bin).", min=0.0, max=1.0, needs="critic")
    overwrite: bool = option(False, "Replace an existing --out.", needs="outputs")
    quiet: bool = option(False, "Print no tables (the report file is still written).")


def parse_policy_spec(spec: str) -> tuple[str, str | None]:
    """``llm:MODEL``, ``random``, ``constant[:VALUE]``, ``expert:FILE.zip``, ``bc:FILE``, ``q-greedy``,
    ``online:RUN`` (an ``rlft train online`` run), ``offline:RUN`` (an ``rlft train offline`` run)."""
    kind, _, arg = str(spec).partition(":")
    kind = kind.strip().lower()
    arg = arg.strip() or None
    if kind not in POLICY_KINDS:
        raise InvalidInputError(
            f"unknown policy {spec!r}",
            hint="use llm:MODEL, random, constant[:VALUE], expert:FILE.zip, bc:FILE, q-greedy, online:RUN or "
                 "offline:RUN",
        )
    if kind in ("expert", "bc", "online", "offline") and not arg:
        raise InvalidInputError(f"--policy {kind} needs a file: {kind}:FILE")
    if kind == "llm" and not arg:
        raise InvalidInputError("--policy llm needs a model: llm:MODEL (a model folder, a RUN folder or a Hub id)")
    return kind, arg
