"""Codec comparison without training: prompt tokens per observation and action round-trip error of every codec
setting, on real HalfCheetah and CartPole observations, next to RLFT4RL's 5-decimal comma-separated prompt.

Observations come from real episodes: HalfCheetah-v5 played by the committed SAC medium expert, CartPole-v1 by a
fixed balancing rule (push toward the side the pole falls to). Token counts use the tiny word-level tokenizer that
``rlft model init`` trains on each codec's own text, and SmolLM2-135M-Instruct's tokenizer when the model folder
exists (``rlft model fetch smollm2-135m-instruct --out models/smollm2-135m-instruct``). The plain prompt is what
the codec builds (``<observation>...</observation>``); the action is the completion (``<action>...</action>``).
The error is ``|decode(encode(a)) - a| / (high - low)`` over every action dimension of the recorded actions.

Run: ``.venv/bin/python benchmarks/codecs.py``; writes ``results/benchmarks/codecs.json``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "benchmarks" / "codecs.json"
EXPERT = ROOT / "pipelines" / "experts" / "halfcheetah-medium-sac.zip"
SMOLLM2 = ROOT / "models" / "smollm2-135m-instruct"
SETTINGS = [  # (label, format, options)
    ("raw, 3 decimals", "raw", {"precision": 3}),
    ("raw, 2 decimals", "raw", {"precision": 2}),
    ("raw, 1 decimal", "raw", {"precision": 1}),
    ("discretized, 32 bins", "discretized", {"bins": 32}),
    ("discretized, 16 bins", "discretized", {"bins": 16}),
    ("tokenized, 0..999", "tokenized", {"tokens": 1000}),
    ("tokenized, 0..99", "tokenized", {"tokens": 100}),
]


def rollouts(env_id: str, steps: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, object]:
    """(observations, actions, env) of real episodes: the SAC expert on HalfCheetah, a balancing rule on CartPole."""
    import gymnasium as gym

    env = gym.make(env_id)
    if env_id.startswith("HalfCheetah"):
        from rlft.sources.experts import load_expert

        model, _ = load_expert(EXPERT)

        def act(o):
            return model.predict(o[None], deterministic=True)[0][0]
    else:
        def act(o):
            return int(o[2] + 0.5 * o[3] > 0)
    obs_list, act_list = [], []
    obs, _ = env.reset(seed=seed)
    episode = 0
    while len(obs_list) < steps:
        action = act(obs)
        obs_list.append(obs)
        act_list.append(action)
        obs, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            episode += 1
            obs, _ = env.reset(seed=seed + episode)
    return np.asarray(obs_list), np.asarray(act_list), env


def rlft4rl_prompt(obs: np.ndarray) -> str:
    """RLFT4RL's observation text: five decimals, comma-separated, inside the observation tag."""
    return "<observation>" + ",".join(f"{v:.5f}" for v in obs) + "</observation>"


def count(tokenizer, texts: list[str]) -> float:
    return float(np.mean([len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]))


def measure(env_id: str, steps: int, smollm2) -> list[tuple[str, dict]]:
    from rlft.codecs.factory import make_codec
    from rlft.models.tokenizer import train_tokenizer

    observations, actions, env = rollouts(env_id, steps)
    discrete = actions.ndim == 1
    sample = np.arange(0, len(observations), max(1, len(observations) // 500))
    rows = []
    for label, fmt, options in SETTINGS:
        codec = make_codec(fmt, env.observation_space, env.action_space, observations=observations,
                           actions=actions, env_id=env_id, **options)
        prompts = [codec.build_prompt(o) for o in observations[sample]]
        completions = [codec.build_completion(a) for a in actions[sample]]
        tiny = train_tokenizer(prompts + completions, codec)
        if discrete:
            error = float(np.mean([codec.decode_action(c) != a for c, a in zip(completions, actions[sample],
                                                                                    strict=True)]))
        else:
            width = env.action_space.high - env.action_space.low
            decoded = np.asarray([codec.decode_action(c) for c in completions])
            error = float(np.mean(np.abs(decoded - actions[sample]) / width))
        cells = {"tiny_obs": count(tiny, prompts), "tiny_act": count(tiny, completions), "error": error}
        if smollm2 is not None:
            cells.update(smol_obs=count(smollm2, prompts), smol_act=count(smollm2, completions))
        rows.append((f"{env_id}: {label}", cells))
    reference = [rlft4rl_prompt(o) for o in observations[sample]]
    cells = {"tiny_obs": None, "tiny_act": None, "error": None}
    if smollm2 is not None:
        cells.update(smol_obs=count(smollm2, reference), smol_act=None)
    rows.append((f"{env_id}: RLFT4RL 5-decimal commas (reference)", cells))
    if smollm2 is not None:  # the ratio against the reference prompt, measured on the same observations
        for _, row in rows:
            row["smol_ratio"] = row["smol_obs"] / cells["smol_obs"]
    env.close()
    return rows


def main() -> None:
    from rlft.core.console import console
    from rlft.results.render import table_markdown
    from rlft.results.tables import column, table, write_benchmark

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=5000, help="observations per environment")
    parser.add_argument("--no-write", action="store_true", help="print only, leave results/ as it is")
    args = parser.parse_args()
    smollm2 = None
    if (SMOLLM2 / "tokenizer.json").is_file():
        from transformers import AutoTokenizer

        smollm2 = AutoTokenizer.from_pretrained(SMOLLM2)
    rows = measure("HalfCheetah-v5", args.steps, smollm2) + measure("CartPole-v1", args.steps, smollm2)
    columns = [column("tiny_obs", "tiny: obs tokens", ".1f"), column("tiny_act", "tiny: action tokens", ".1f")]
    if smollm2 is not None:
        columns += [column("smol_obs", "SmolLM2: obs tokens", ".1f"),
                    column("smol_act", "SmolLM2: action tokens", ".1f"),
                    column("smol_ratio", "SmolLM2 obs tokens / RLFT4RL's", ".2f")]
    columns.append(column("error", "action round-trip error", ".4f"))
    result = table("codec", columns, rows)
    console.print("\n".join(table_markdown(result)), markup=False, highlight=False)
    if not args.no_write:
        write_benchmark(OUT, "Codecs: prompt tokens per observation and action round-trip error", [result],
                        "python benchmarks/codecs.py",
                        description=f"{args.steps:,} real observations per environment (HalfCheetah: the SAC medium "
                                    "expert; CartPole: a balancing rule); tokens of the plain observation prompt and "
                                    "of the action completion; error = mean |decode(encode(a)) - a| / (high - low) "
                                    "(CartPole: the fraction of actions that do not round-trip)",
                        notes=["tiny: the word-level tokenizer rlft model init trains on each codec's text (one "
                               "token per digit, one per value for tokenized codecs); SmolLM2: SmolLM2-135M-"
                               "Instruct's BPE tokenizer"])
        console.print(f"-> {OUT}")


if __name__ == "__main__":
    main()
