"""``rlft eval``: run a policy in its real environment over K vector envs; ``rlft eval compare`` reports.

    rlft eval --policy llm:RUN --episodes 100 --num-envs 8 --seed 0 --out reports/sft.json
    rlft eval --env FrozenLake-v1 --policy q-greedy --codec datasets/frozenlake-q --episodes 1000
    rlft eval --env CartPole-v1 --policy random --episodes 100 --out reports/random.json
    rlft eval compare reports/random.json reports/sft.json
"""

from __future__ import annotations

from pathlib import Path

import typer

from rlft.cli.common import command, handle_errors

app = typer.Typer(invoke_without_command=True, no_args_is_help=False)


@app.callback(invoke_without_command=True)
@handle_errors
def evaluate(
    ctx: typer.Context,
    policy: str | None = typer.Option(
        None, "--policy",
        help="llm:MODEL (model folder, RUN folder or Hub id), random, constant[:VALUE], expert:FILE.zip, bc:FILE, "
             "q-greedy."),
    env: str | None = typer.Option(None, "--env", help="Gymnasium env id (default: the codec's env)."),
    episodes: int = typer.Option(10, "--episodes", help="Episodes N; episode i is seeded SEED + i."),
    num_envs: int = typer.Option(1, "--num-envs", help="Vector environments K stepped together (capped to N)."),
    seed: int = typer.Option(0, "--seed", min=0, help="Seed of episode 0."),
    out: Path | None = typer.Option(None, "--out", help="REPORT.json (REPORT.png and REPORT_tb/ beside it)."),
    codec: str | None = typer.Option(
        None, "--codec", help="Dataset folder whose codec/prompt template to use (default: the RUN folder's); "
                              "also the Q-values for q-greedy and agreement, and the few-shot examples."),
    allow_codec_mismatch: bool = typer.Option(
        False, "--allow-codec-mismatch/--no-allow-codec-mismatch",
        help="Evaluate a RUN with a --codec for another environment, codec kind or spaces than its own."),
    backend: str = typer.Option("transformers", "--backend", help="transformers or openai."),
    api_url: str | None = typer.Option(None, "--api-url", help="openai: server URL, e.g. http://127.0.0.1:8000/v1."),
    api_model: str | None = typer.Option(None, "--api-model", help="openai: model name on the server."),
    concurrency: int = typer.Option(8, "--concurrency", help="openai: requests in flight at once."),
    api_timeout: float = typer.Option(60.0, "--api-timeout", min=0.001,
                                      help="openai: seconds a server may take to answer a request (3 tries)."),
    constrained: bool = typer.Option(False, "--constrained/--no-constrained",
                                     help="Only allow tokens that keep a valid answer (transformers)."),
    fallback_action: str | None = typer.Option(
        None, "--fallback-action", help="Action taken when the output does not parse (counted as invalid) "
                                        "(default: 0 / the first action)."),
    target_return: float | None = typer.Option(
        None, "--target-return", help="Return-to-go at the start (codecs conditioned on it) "
                                      "(default: the dataset's best episode return)."),
    n_examples: int = typer.Option(0, "--n-examples", help="Few-shot (observation, expert action) pairs from "
                                                           "the --codec dataset."),
    bin_decoding: str = typer.Option("auto", "--bin-decoding",
                                     help="binned codecs: read each action dimension's distribution over its bins: "
                                          "mean (its expectation), local-mean (the expectation near the most likely "
                                          "bin), argmax, off (generate text); auto: mean when every bin is one token "
                                          "of the model's tokenizer, else off."),
    temperature: float = typer.Option(0.0, "--temperature", help="0 = greedy decoding."),
    top_p: float = typer.Option(1.0, "--top-p", help="Nucleus sampling (temperature > 0)."),
    api_stop: bool = typer.Option(True, "--api-stop/--no-api-stop",
                                  help="Send the answer's closing tag as a stop string (--backend openai). "
                                       "transformers serve cannot match stop strings with rlft's tiny "
                                       "word-level tokenizers: pass --no-api-stop for them."),
    cache: bool = typer.Option(True, "--cache/--no-cache", help="Greedy decoding: generate each distinct prompt "
                                                                 "once (FrozenLake: 11 generations, not thousands)."),
    max_new_tokens: int | None = typer.Option(None, "--max-new-tokens",
                                              help="Token budget per answer (default: the longest valid answer + 8)."),
    expert: Path | None = typer.Option(None, "--expert", help="SB3 checkpoint: report agreement with its actions."),
    action_error: str | None = typer.Option(
        None, "--action-error", help="Dataset folder (continuous actions): also report the policy's action error "
                                     "on up to 2,000 rows of its held-out split, per dimension and as a fraction "
                                     "of each dimension's range."),
    video: Path | None = typer.Option(None, "--video", help="Folder for MP4s of the first episodes "
                                                             "(MuJoCo: MUJOCO_GL=egl)."),
    video_episodes: int = typer.Option(3, "--video-episodes", help="How many episodes --video records."),
    max_episode_steps: int | None = typer.Option(None, "--max-episode-steps", help="Override the time limit."),
    overwrite: bool = typer.Option(False, "--overwrite/--no-overwrite", help="Replace an existing --out."),
) -> None:
    """Evaluate a policy (LLM or baseline) in its real environment; subcommand: compare."""
    if ctx.invoked_subcommand is not None:
        return
    if policy is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(0 if len(ctx.args) == 0 else 2)
    from rlft.evaluate.config import EvalConfig
    from rlft.evaluate.runner import run_evaluation

    run_evaluation(EvalConfig(
        policy=policy, env_id=env, episodes=episodes, num_envs=num_envs, seed=seed, out=out, codec=codec,
        allow_codec_mismatch=allow_codec_mismatch,
        backend=backend, api_url=api_url, api_model=api_model, concurrency=concurrency, api_timeout=api_timeout,
        constrained=constrained,
        fallback_action=fallback_action, target_return=target_return, n_examples=n_examples,
        bin_decoding=bin_decoding, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, cache=cache,
        api_stop=api_stop,
        expert=expert, action_error=action_error, video=video,
        video_episodes=video_episodes, max_episode_steps=max_episode_steps, overwrite=overwrite,
    ))


@command(app, "compare")
def compare(
    reports: list[Path] = typer.Argument(..., help="REPORT.json files."),
    png: Path | None = typer.Option(None, "--png", help="Also draw the reports' headline metric with error bars."),
) -> None:
    """Print evaluation reports side by side; for FrozenLake LLM reports, say whether the LLM matched the
    optimal policy (agreement 1.0 and success within noise of the exact optimal rate)."""
    from rlft.core.console import console
    from rlft.core.errors import InvalidInputError
    from rlft.evaluate.report import compare_table, load_report
    from rlft.evaluate.verdict import verdicts

    loaded = [load_report(p) for p in reports]
    table, notes = compare_table(reports, loaded)
    console.print(table)
    for note in notes:
        console.print(f"[yellow]note:[/] {note}")
    for verdict in verdicts([(p.stem, r) for p, r in zip(reports, loaded, strict=True)]):
        console.print(verdict.line())
    if png is not None:
        if png.suffix.lower() != ".png":
            raise InvalidInputError(f"--png must name a .png file, got {png}")
        from rlft.evaluate.report import plot_compare

        console.print(f"comparison plot -> {plot_compare([p.stem for p in reports], loaded, png)}")
