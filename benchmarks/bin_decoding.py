"""Bin decoding on HalfCheetah: env-steps/s of an LLM policy over a ``binned`` codec, read per dimension
(``--bin-decoding argmax`` / ``mean``: one KV-cached step per action dimension) against constrained greedy
``generate`` (the plain way: the grammar's token table as a logits processor).

Same model, same episodes, same process, K = 10 vector envs; printed as ratios. It builds what it needs in a
temporary folder: a HalfCheetah-v5 dataset of random actions recorded in Minari, serialized with the binned codec
(64 bins), and a from-scratch model of the halfcheetah-binned recipe's size (4 layers, hidden 128; untrained, which
costs the same per step). Bin argmax chooses the bins constrained greedy generation chooses
(tests/test_binned.py holds them equal on the same prompts); over whole episodes of an untrained model, whose bin
distributions are nearly flat, a float-level near-tie can still flip one choice and the episodes part ways, so
returns are not compared here.

Run: ``.venv/bin/python benchmarks/bin_decoding.py [--episodes 10] [--steps 200]``; writes
``results/benchmarks/bin_decoding.json`` (rendered into the README).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

from bench_fixtures import print_tables, quiet  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "results" / "benchmarks" / "bin_decoding.json"
ARMS = (("constrained generate", "off"), ("bins, argmax", "argmax"), ("bins, mean", "mean"))


def build(work: Path, episodes: int, steps: int) -> tuple[Path, Path]:
    """A random-action HalfCheetah Minari dataset -> binned codec dataset -> a 4-layer hidden-128 tiny model."""
    from bench_fixtures import record_random
    from rlft.datasets.serialize import serialize
    from rlft.datasets.serialize_options import SerializeConfig
    from rlft.models.tiny import ModelInitConfig, init_model

    record_random(work, "HalfCheetah-v5", "halfcheetah/bench-v0", episodes, steps)
    dataset = work / "halfcheetah-binned"
    serialize(SerializeConfig(source="halfcheetah/bench-v0", out=dataset, format="binned", bins=64))
    init_model(ModelInitConfig(dataset=str(dataset), out=work / "tiny", layers=4, hidden=128, heads=4))
    return dataset, work / "tiny"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--steps", type=int, default=200, help="steps per episode")
    parser.add_argument("--no-write", action="store_true", help="print only, leave results/ as it is")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    from rlft.core.console import console
    from rlft.evaluate.config import EvalConfig
    from rlft.evaluate.runner import run_evaluation
    from rlft.results.tables import column, table, write_benchmark

    rows, base = [], None
    with tempfile.TemporaryDirectory(prefix="rlft-bins-bench-") as tmp:
        with quiet():
            dataset, model = build(Path(tmp), 4, args.steps)
        for name, mode in ARMS:
            with quiet():
                report = run_evaluation(EvalConfig(
                    policy=f"llm:{model}", codec=str(dataset), episodes=args.episodes, num_envs=10, seed=0,
                    constrained=mode == "off", bin_decoding=mode, max_episode_steps=args.steps, cache=False,
                    quiet=True))
            rate = report["env_steps_per_second"]
            base = base or rate
            rows.append((name, {"rate": rate, "speedup": rate / base, "invalid": report["invalid_action_rate"],
                                "tokens": report["new_tokens"] / report["env_steps"]}))
    result = table("decoding", [column("rate", "env steps/s", ".0f"), column("speedup", "speedup", "x"),
                                column("tokens", "new tokens / step", ".1f"),
                                column("invalid", "invalid actions", ".3f")], rows)
    print_tables([result])
    if not args.no_write:
        write_benchmark(OUT, "Bin decoding: one KV-cached step per action dimension vs constrained generate",
                        [result], "python benchmarks/bin_decoding.py",
                        description=f"HalfCheetah-v5, the binned codec (64 bins), a 4-layer hidden-128 tiny model, "
                                    f"K = 10 envs, {args.episodes} episodes of {args.steps} steps, greedy, 1 torch "
                                    "thread")
        console.print(f"-> {OUT}")


if __name__ == "__main__":
    main()
