"""Evaluation throughput: env-steps/s of one LLM policy with K = 1 (one generate call per step, the old way)
against K = 8 and K = 32 vector environments (one batched generate call per step for all live envs).

Same tiny model, same episodes (seeds), same process; printed as ratios. By default it builds what it needs
in a temporary folder: a random-policy CartPole Minari dataset, the ``raw`` codec dataset (plain prompts),
a tiny from-scratch model and a short full-weight SFT run so the policy answers in the codec's format. With
``--model RUN --codec DIR`` it measures an existing model instead (``--env`` defaults to the codec's).

Run: ``.venv/bin/python benchmarks/eval_throughput.py [--episodes 64] [--ks 1,8,32] [--constrained]``; the
default run also writes ``results/benchmarks/eval_throughput.json`` (rendered into the README).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from bench_fixtures import quiet  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "results" / "benchmarks" / "eval_throughput.json"


def build_model(work: Path, sft_steps: int) -> tuple[str, str]:
    """CartPole random data -> raw codec dataset -> tiny model -> short SFT run; returns (run, dataset)."""
    from bench_fixtures import random_cartpole_dataset
    from rlft.models.tiny import ModelInitConfig, init_model
    from rlft.train.sft import run_sft
    from rlft.train.sft_config import SFTStageConfig

    dataset = random_cartpole_dataset(work)
    init_model(ModelInitConfig(dataset=str(dataset), out=work / "tiny"))
    run = work / "run"
    run_sft(SFTStageConfig(dataset=str(dataset), model=str(work / "tiny"), out=run, lora=False,
                           learning_rate=3e-3, max_steps=sft_steps, per_device_train_batch_size=16,
                           eval_split="none", logging_steps=1000, save_steps=100_000))
    return str(run), str(dataset)


def measure(setup, ks: list[int], episodes: int, seed: int) -> list[dict]:
    """One row per K: throughput of the same episodes with K vector envs, against the first K."""
    from rlft.envs.vector_envs import make_env_fns
    from rlft.policy.policies import default_action
    from rlft.policy.rollout import rollout

    policy = setup.policy
    rows, base, reference = [], None, None
    for k in ks:
        k_eff = min(k, episodes)
        calls0, dec0, inv0 = policy.backend.calls, policy.decisions, policy.invalid
        fns = make_env_fns(setup.env_id, setup.env_kwargs, k_eff, None, None)
        result = rollout(policy, fns, episodes, seed, default_action(setup.action_space))
        returns = [e.episode_return for e in result.episodes]
        reference = reference or returns
        rate = result.env_steps / result.seconds
        base = base or rate
        rows.append({
            "K": k_eff,
            "steps": result.env_steps,
            "calls": policy.backend.calls - calls0,
            "seconds": round(result.seconds, 2),
            "steps/s": round(rate, 1),
            "speedup": round(rate / base, 2),
            "/K": round(rate / base / k_eff, 2),
            "invalid": f"{policy.invalid - inv0}/{policy.decisions - dec0}",
            "same returns": returns == reference,
        })
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="model or RUN folder (default: build a tiny CartPole model)")
    parser.add_argument("--codec", help="dataset folder of the model's codec")
    parser.add_argument("--env", help="env id (default: the codec's)")
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--ks", default="1,8,32", help="numbers of vector envs, the first is the baseline")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--constrained", action="store_true", help="grammar-constrained decoding")
    parser.add_argument("--sft-steps", type=int, default=60)
    parser.add_argument("--no-write", action="store_true", help="print only, leave results/ as it is")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    from rlft.core.console import console, records_table
    from rlft.evaluate.config import EvalConfig
    from rlft.evaluate.setup import build_setup

    with tempfile.TemporaryDirectory(prefix="rlft-eval-bench-") as tmp:
        if args.model:
            model, codec = args.model, args.codec
        else:
            t0 = time.perf_counter()
            # the build's own tables and progress bars are not the benchmark's output
            with quiet():
                model, codec = build_model(Path(tmp), args.sft_steps)
            console.print(f"built CartPole dataset, tiny model and {args.sft_steps}-step SFT run in "
                          f"{time.perf_counter() - t0:.1f} s")
        config = EvalConfig(policy=f"llm:{model}", env_id=args.env, codec=codec, episodes=args.episodes,
                            seed=args.seed, constrained=args.constrained, quiet=True, cache=False)
        # the model is loaded once and shared by every K; no greedy cache: every K must really generate
        setup = build_setup(config)
        policy = setup.policy
        rows = measure(setup, [int(k) for k in args.ks.split(",")], args.episodes, args.seed)
        console.print(f"{args.episodes} episodes (seeds {args.seed}..{args.seed + args.episodes - 1}) of "
                      f"{setup.env_id}, codec {setup.codec.describe()}, {setup.codec.template.style} prompts, "
                      f"{'constrained' if args.constrained else 'free'} greedy decoding, "
                      f"{torch.get_num_threads()} torch thread(s)")
        console.print(records_table("LLM policy throughput: K vector envs, one generate call per step", rows))
        console.print("steps = env steps of the evaluated episodes, calls = batched generate calls, /K = speedup / K "
                      "(goal at K=8: >= 0.6), same returns = per-episode returns identical to the first K")
        if setup.precompute:
            console.print(f"constrained decoding table: {setup.precompute}")
        policy.close()
        if not args.no_write and not args.model:
            from rlft.results.tables import column, table, write_benchmark

            result = table("K envs", [column("calls", "generate calls", "d"), column("rate", "steps/s", ".1f"),
                                      column("speedup", "speedup", "x"), column("per_k", "speedup / K", ".2f"),
                                      column("same", "returns identical to K=1", "")],
                           [(str(r["K"]), {"calls": r["calls"], "rate": r["steps/s"], "speedup": r["speedup"],
                                           "per_k": r["/K"], "same": r["same returns"]}) for r in rows])
            write_benchmark(OUT, "Evaluation throughput: K vector envs, one batched generate call per step",
                            [result], "python benchmarks/eval_throughput.py",
                            description=f"a tiny LLM after {args.sft_steps} SFT steps on CartPole, {args.episodes} "
                                        f"episodes (seeds {args.seed}..{args.seed + args.episodes - 1}), greedy "
                                        f"{'constrained ' if args.constrained else ''}decoding, 1 torch thread; "
                                        "K=1 is one generate call per env step")
            console.print(f"-> {OUT}")
        if not all(r["same returns"] for r in rows):
            sys.exit("per-episode returns differ between K values")


if __name__ == "__main__":
    main()
