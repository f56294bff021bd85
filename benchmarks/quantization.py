"""What the binned codec's observation bins cost a policy: the same behaviour-cloning MLP trained and played on
observations as the codec gives them back (each value replaced by its bin's data mean) against exact observations.

A diagnosis for issue #26: if quantizing HalfCheetah's 17 observation values into 64 bins each cost the MLP most of
its score, no model reading those tokens could reach behaviour cloning, and the representation would be the limit.
Same rows, same seeds, same network (2 x 256, tanh output, Adam 1e-3, 30 epochs of 256), same process; printed as
ratios against exact observations.

It records 200 episodes of the committed SAC medium expert (``pipelines/experts/halfcheetah-medium-sac.zip``) in a
temporary folder and serializes them with the binned codec. Run: ``.venv/bin/python benchmarks/quantization.py
[--bins 16,64,256]``; writes ``results/benchmarks/quantization.json`` (rendered into the README).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from bench_fixtures import print_tables, quiet  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "benchmarks" / "quantization.json"
EXPERT = ROOT / "pipelines" / "experts" / "halfcheetah-medium-sac.zip"


def expert_dataset(work: Path, episodes: int) -> Path:
    from rlft.datasets.serialize import serialize
    from rlft.datasets.serialize_options import SerializeConfig
    from rlft.sources.collect import CollectConfig, collect_to_minari

    os.environ["MINARI_DATASETS_PATH"] = str(work / "minari")
    collect_to_minari(CollectConfig(env_id="HalfCheetah-v5", policy=str(EXPERT), episodes=episodes, num_envs=8,
                                    seed=0, dataset_id="rlft/bench-halfcheetah-medium-v0"))
    serialize(SerializeConfig(source="rlft/bench-halfcheetah-medium-v0", out=work / "data", format="binned", bins=64))
    return work / "data"


def fit_mlp(x: np.ndarray, y: np.ndarray, seed: int, epochs: int):
    """The MLP trained on (x, y) with MSE; returns its action function (inputs standardized by x's statistics)."""
    import torch

    torch.manual_seed(seed)
    mean, std = x.mean(0), x.std(0) + 1e-6
    net = torch.nn.Sequential(torch.nn.Linear(x.shape[1], 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                              torch.nn.ReLU(), torch.nn.Linear(256, y.shape[1]), torch.nn.Tanh())
    opt = torch.optim.Adam(net.parameters(), 1e-3)
    xt = torch.tensor((x - mean) / std, dtype=torch.float32)
    yt = torch.tensor(y, dtype=torch.float32)
    for _ in range(epochs):
        order = torch.randperm(len(xt))
        for i in range(0, len(xt), 256):
            batch = order[i : i + 256]
            loss = ((net(xt[batch]) - yt[batch]) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()

    def act(obs):
        with torch.no_grad():
            return net(torch.tensor((obs - mean) / std, dtype=torch.float32)).numpy()

    return act


def closed_loop(act, quantize, episodes: int) -> float:
    """D4RL-normalized score of ``act`` on quantized observations, episodes seeded 1000..1000+n-1."""
    import gymnasium as gym

    from rlft.envs.registry import normalized_score

    env = gym.make_vec("HalfCheetah-v5", num_envs=episodes, vectorization_mode="sync")
    obs, _ = env.reset(seed=1000)
    total = np.zeros(episodes)
    for _ in range(1000):
        obs, reward, _, _, _ = env.step(act(quantize(obs)))
        total += reward
    env.close()
    return float(normalized_score("HalfCheetah-v5", float(total.mean())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bins", default="16,64,256", help="observation bins per dimension to compare")
    parser.add_argument("--episodes", type=int, default=200, help="expert episodes recorded")
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--no-write", action="store_true", help="print only, leave results/ as it is")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    from rlft.codecs import make_codec
    from rlft.core.console import console
    from rlft.datasets.loading import column_array, load_dataset_codec, read_split
    from rlft.results.tables import column, table, write_benchmark

    rows, base = [], None
    with tempfile.TemporaryDirectory(prefix="rlft-quant-bench-") as tmp:
        with quiet():
            data = expert_dataset(Path(tmp), args.episodes)
        codec = load_dataset_codec(data)
        train, held = (read_split(data, ["observation", "action"], s) for s in ("train", "validation"))
        x, y = column_array(train, "observation"), column_array(train, "action")
        xv, yv = column_array(held, "observation"), column_array(held, "action")
        for bins in [0] + [int(b) for b in args.bins.split(",")]:
            if bins:
                binned = make_codec("binned", codec.observation_space, codec.action_space, observations=x,
                                    actions=y, bins=bins)

                def quantize(obs, c=binned):
                    ints, _ = c.box_to_ints(np.asarray(obs, dtype=np.float64), "observation")
                    return c.ints_to_box(ints, "observation")
            else:
                def quantize(obs):
                    return np.asarray(obs, dtype=np.float64)
            start = time.perf_counter()
            act = fit_mlp(quantize(x), y, seed=0, epochs=args.epochs)
            error = float(np.abs(act(quantize(xv)) - yv).mean())
            score = closed_loop(act, quantize, args.eval_episodes)
            base = base if base is not None else score
            rows.append((f"{bins} bins" if bins else "exact", {
                "error": error, "score": score, "ratio": score / base, "seconds": time.perf_counter() - start}))
    result = table("observations", [column("error", "held-out action MAE", ".4f"),
                                    column("score", "normalized score", ".1f"),
                                    column("ratio", "score / exact", ".3f"), column("seconds", "s", ".0f")], rows)
    print_tables([result])
    if not args.no_write:
        write_benchmark(OUT, "Observation bins: a behaviour-cloning MLP on the binned codec's observations",
                        [result], "python benchmarks/quantization.py",
                        description=f"HalfCheetah-v5, {args.episodes} episodes of the committed SAC medium expert "
                                    f"(train split), an MLP 2 x 256 trained {args.epochs} epochs on observations as "
                                    f"the binned codec gives them back, played on {args.eval_episodes} episodes; "
                                    "held-out MAE in action units on the validation split")
        console.print(f"-> {OUT}")


if __name__ == "__main__":
    main()
