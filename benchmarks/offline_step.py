"""Offline RL gradient steps: ``rlft train offline`` (TorchRL's TD3BCLoss and IQLLoss, TensorDict batches) against a
plain-torch TD3+BC step written CORL's way (the same networks, batch and updates), in the same process.

It builds a HalfCheetah-shaped dataset folder from random numbers (20 episodes x 1,000 steps, raw codec) in a
temporary folder, then times ``--steps`` gradient steps of each (rlft's figure is its own ``steps_per_second``: the
training loop alone). The ratio is rlft's milliseconds per step over the plain loop's.

Run: ``.venv/bin/python benchmarks/offline_step.py [--steps 500]``; writes ``results/benchmarks/offline_step.json``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from bench_fixtures import quiet  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "results" / "benchmarks" / "offline_step.json"
OBS, ACT, HIDDEN, BATCH = 17, 6, [256, 256], 256


def build_dataset(work: Path) -> Path:
    """A HalfCheetah-v5-shaped Minari dataset of random numbers, serialized with the raw codec."""
    import gymnasium as gym
    import minari
    import numpy as np
    from minari.data_collector.episode_buffer import EpisodeBuffer

    from rlft.datasets.serialize import serialize
    from rlft.datasets.serialize_options import SerializeConfig
    from rlft.sources.minari_source import minari_root

    rng = np.random.default_rng(0)
    buffers = [EpisodeBuffer(id=e, observations=rng.standard_normal((1001, OBS)),
                             actions=rng.uniform(-1, 1, (1000, ACT)).astype(np.float32),
                             rewards=rng.standard_normal(1000), terminations=np.zeros(1000, bool),
                             truncations=np.r_[np.zeros(999, bool), True]) for e in range(20)]
    with minari_root(work / "minari"):
        minari.create_dataset_from_buffers("bench/cheetah-v0", buffers, env=gym.make("HalfCheetah-v5"))
        serialize(SerializeConfig(source="bench/cheetah-v0", out=work / "data", format="raw", precision=3))
    return work / "data"


def plain_td3bc_ms(steps: int) -> float:
    """Milliseconds per step of TD3+BC in plain torch (CORL's td3_bc.py structure): twin critics on MSE targets with
    clipped target-policy noise, an actor update and Polyak updates every second step."""
    import copy

    import torch

    from rlft.models.bc import build_mlp
    from rlft.models.offline import q_network

    n = 20_000
    gen = torch.Generator().manual_seed(0)
    obs, act = torch.randn(n, OBS, generator=gen), torch.rand(n, ACT, generator=gen) * 2 - 1
    nxt, rew, done = torch.randn(n, OBS, generator=gen), torch.randn(n, 1, generator=gen), torch.zeros(n, 1)
    actor, q1, q2 = build_mlp(OBS, HIDDEN, ACT, True), q_network(OBS, ACT, HIDDEN), q_network(OBS, ACT, HIDDEN)
    targets = [copy.deepcopy(m) for m in (actor, q1, q2)]
    actor_opt = torch.optim.Adam(actor.parameters(), lr=3e-4)
    critic_opt = torch.optim.Adam([*q1.parameters(), *q2.parameters()], lr=3e-4)

    def step(i: int) -> None:
        idx = torch.randint(n, (BATCH,), generator=gen)
        o, a, no, r, d = obs[idx], act[idx], nxt[idx], rew[idx], done[idx]
        with torch.no_grad():
            noise = (torch.randn_like(a) * 0.2).clamp(-0.5, 0.5)
            na = (targets[0](no) + noise).clamp(-1, 1)
            target = r + 0.99 * (1 - d) * torch.min(targets[1](no, na), targets[2](no, na))
        loss = ((q1(o, a) - target) ** 2).mean() + ((q2(o, a) - target) ** 2).mean()
        critic_opt.zero_grad()
        loss.backward()
        critic_opt.step()
        if i % 2 == 0:
            pi = actor(o)
            q = q1(o, pi)
            actor_loss = -2.5 / q.abs().mean().detach() * q.mean() + ((pi - a) ** 2).mean()
            actor_opt.zero_grad()
            actor_loss.backward()
            actor_opt.step()
            with torch.no_grad():
                for net, target_net in zip((actor, q1, q2), targets, strict=True):
                    for p, tp in zip(net.parameters(), target_net.parameters(), strict=True):
                        tp.mul_(0.995).add_(p, alpha=0.005)

    for i in range(20):
        step(i)
    start = time.perf_counter()
    for i in range(steps):
        step(i)
    return (time.perf_counter() - start) / steps * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=500, help="gradient steps per measurement")
    parser.add_argument("--no-write", action="store_true", help="print only, leave results/ as it is")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    from rlft.core.console import console
    from rlft.results.render import table_markdown
    from rlft.results.tables import column, table, write_benchmark
    from rlft.train.offline import train_offline
    from rlft.train.offline_config import OfflineConfig

    with tempfile.TemporaryDirectory(prefix="rlft-offline-bench-") as tmp:
        work = Path(tmp)
        with quiet():
            data = build_dataset(work)
        plain = plain_td3bc_ms(args.steps)
        rows = [("TD3+BC, plain torch (CORL's loop)", {"ms": plain, "ratio": 1.0})]
        for algo, label in (("td3bc", "TD3+BC, rlft train offline (TorchRL)"), ("iql", "IQL, rlft train offline "
                                                                                     "(TorchRL)")):
            with quiet():
                info = train_offline(OfflineConfig(dataset=str(data), out=work / algo, algo=algo, steps=args.steps))
            ms = 1000.0 / info["steps_per_second"]
            rows.append((label, {"ms": ms, "ratio": ms / plain}))
    result = table(f"gradient step (batch {BATCH}, {HIDDEN[0]}x{HIDDEN[1]} networks)",
                   [column("ms", "ms per step", ".1f"), column("ratio", "/ plain TD3+BC", ".2f")], rows)
    console.print("\n".join(table_markdown(result)), markup=False, highlight=False)
    if not args.no_write:
        write_benchmark(OUT, "Offline RL: the cost of a gradient step", [result],
                        "python benchmarks/offline_step.py",
                        description=f"{args.steps:,} steps each on a HalfCheetah-shaped dataset (17 observation and "
                                    "6 action values, 20,000 rows), one thread, the same process",
                        notes=["IQL does three updates a step (V, Q, actor), TD3+BC one critic update and, every "
                               "second step, one actor update",
                               "rlft's figure is its training loop alone (its own steps_per_second)"])
        console.print(f"-> {OUT}")


if __name__ == "__main__":
    main()
