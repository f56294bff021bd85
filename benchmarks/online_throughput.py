"""Online RL throughput: environment steps/s of PPO and TRPO training with a tiny transformer as the policy network
against the plain MLP policy (``--backbone mlp``, everything else identical), in the same process.

It builds what it needs in a temporary folder: a random-policy CartPole Minari dataset, the ``raw`` codec dataset
(2 decimals, plain prompts) and a tiny from-scratch model whose tokenizer reads it. Each run trains ``--steps``
environment steps with the shipped RL-Zoo hyperparameters (PPO: 8 envs x 32 steps, 20 epochs of 256; TRPO: 2 envs
x 512 steps, 20 critic updates); the ratio is MLP steps/s over LLM steps/s.

Run: ``.venv/bin/python benchmarks/online_throughput.py [--steps 2048]``; writes
``results/benchmarks/online_throughput.json`` (rendered into the README).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

from bench_fixtures import quiet  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "results" / "benchmarks" / "online_throughput.json"


def build_backbone(work: Path) -> tuple[str, str]:
    """CartPole random data -> raw codec dataset -> tiny model; returns (model, dataset)."""
    from bench_fixtures import random_cartpole_dataset
    from rlft.models.tiny import ModelInitConfig, init_model

    dataset = random_cartpole_dataset(work)
    init_model(ModelInitConfig(dataset=str(dataset), out=work / "tiny"))
    return str(work / "tiny"), str(dataset)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=2048, help="environment steps per run")
    parser.add_argument("--no-write", action="store_true", help="print only, leave results/ as it is")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    from rlft.core.console import console
    from rlft.results.render import table_markdown
    from rlft.results.tables import column, table, write_benchmark
    from rlft.train.online import train_online
    from rlft.train.online_config import OnlineConfig

    rows = []
    with tempfile.TemporaryDirectory(prefix="rlft-online-bench-") as tmp:
        work = Path(tmp)
        with quiet():
            model, dataset = build_backbone(work)
        params = None
        for algo in ("ppo", "trpo"):
            rates = {}
            for backbone in ("mlp", model):
                with quiet():
                    info = train_online(OnlineConfig(
                        env="CartPole-v1", out=work / f"{algo}-{len(rates)}", algo=algo, backbone=backbone,
                        codec=None if backbone == "mlp" else dataset, timesteps=args.steps, eval_episodes=1))
                rates[backbone] = info["steps_per_second"]
                if backbone != "mlp":
                    params = info["trainable_parameters"]
            rows.append((algo.upper(), {"mlp": rates["mlp"], "llm": rates[model],
                                        "ratio": rates["mlp"] / rates[model]}))
    result = table(f"algorithm ({args.steps:,} CartPole steps)",
                   [column("mlp", "MLP policy steps/s", ",.0f"), column("llm", "tiny-LLM policy steps/s", ",.1f"),
                    column("ratio", "MLP / LLM", "x")], rows)
    console.print("\n".join(table_markdown(result)), markup=False, highlight=False)
    if not args.no_write:
        write_benchmark(OUT, "Online RL with an LLM policy network: training throughput", [result],
                        "python benchmarks/online_throughput.py",
                        description=f"rlft train online on CartPole-v1, {args.steps:,} steps per run, RL-Zoo "
                                    "hyperparameters, the same process; LLM = a tiny from-scratch Llama "
                                    f"({params:,} trainable parameters with the heads) reading the raw codec's "
                                    "2-decimal text, fully trainable; MLP = SB3's default policy",
                        notes=["steps/s include the policy updates (PPO: 20 epochs per 256 steps)"])
        console.print(f"-> {OUT}")


if __name__ == "__main__":
    main()
