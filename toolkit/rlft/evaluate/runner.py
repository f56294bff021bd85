"""``rlft eval``: build the setup, run the episodes, write and print the report."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rlft.core.console import console, progress
from rlft.core.errors import InvalidInputError, OutputExistsError, RlftError
from rlft.core.io import refuse_overlap
from rlft.core.options import MAX_ENVS, check_needed
from rlft.core.output_file import check_output_file, is_json_with
from rlft.core.seeding import limit_threads, seed_everything
from rlft.datasets.dataset import RlftDataset
from rlft.envs.spaces import space_to_dict
from rlft.envs.vector_envs import VIDEO_FILES, VideoSlots, check_video, make_env_fns
from rlft.evaluate.actions import held_out_rows, policy_action_error
from rlft.evaluate.config import EvalConfig, parse_policy_spec
from rlft.evaluate.report import build_report, check_side_files, print_report, write_report
from rlft.evaluate.setup import build_setup
from rlft.models.offline import check_critic, load_critic
from rlft.models.run import model_lineage
from rlft.policy.bins import BIN_DECODINGS
from rlft.policy.critic_rank import CriticRankPolicy
from rlft.policy.policies import default_action
from rlft.policy.rollout import Agreement, RolloutResult, rollout
from rlft.policy.search import SearchPolicy
from rlft.sources.experts import check_expert_spaces, load_expert


def _keep_finished(config: EvalConfig, setup, result: RolloutResult, num_envs: int, exc: RlftError) -> RlftError:
    """Write the report of the episodes finished before ``exc`` (marked incomplete) and return the error to
    raise, which says where they are."""

    if config.out is None or not result.episodes:
        return exc
    report = build_report(config, setup, result, num_envs)
    report.update(incomplete=True, episodes_requested=config.episodes, error=exc.message)
    write_report(report, Path(config.out))
    return type(exc)(f"{exc.message}; the {len(result.episodes)} episodes finished before it are in {config.out} "
                     "(marked incomplete)", hint=exc.hint)


def run_evaluation(config: EvalConfig) -> dict[str, Any]:
    """Build everything, run the episodes, write and print the report; return the report dict."""

    _check_config(config)
    limit_threads()
    seed_everything(config.seed)
    expert_model = _load_expert_model(config)
    critic = _load_critic(config)
    setup = build_setup(config)
    if expert_model is not None:
        check_expert_spaces(expert_model, setup.env_id, setup.observation_space, setup.action_space,
                          str(config.expert))
    if config.action_scale != 1.0 and space_to_dict(setup.action_space, "action")["type"] != "box":
        raise InvalidInputError(f"--action-scale scales continuous actions; {setup.env_id} has discrete ones",
                                hint="drop --action-scale")
    if config.search:
        setup.policy = _search_policy(config, setup, expert_model)
    if critic is not None:
        check_critic(critic, setup.codec, config.critic)
        setup.policy = CriticRankPolicy(setup.policy, critic, str(config.critic), config.critic_candidates,
                                        seed=config.seed, min_prob=config.critic_min_prob)
    num_envs = _num_envs(config, setup)
    earlier_videos = sorted(Path(config.video).glob("*.mp4")) if config.video and Path(config.video).is_dir() else []
    video = _video_slots(config, setup, num_envs)
    if not config.quiet:
        _print_setup(setup)
    env_fns = make_env_fns(setup.env_id, setup.env_kwargs, num_envs, config.max_episode_steps, video,
                           config.action_scale)
    agreement = Agreement(setup.qtable, expert_model) if (setup.qtable is not None or expert_model is not None) \
        else None
    held_out = _held_out_rows(config)
    result = _run_episodes(config, setup, env_fns, agreement, video, num_envs)
    report = build_report(config, setup, result, num_envs)
    if held_out is not None:
        report.update(_action_error(setup, held_out), action_error_dataset=str(config.action_error))
    if config.out is not None:
        report["files"] = write_report(report, Path(config.out))
    _drop_replaced_videos(earlier_videos, result)
    if not config.quiet:
        print_report(report)
    return report


def _drop_replaced_videos(earlier: list[Path], result) -> None:
    """--overwrite replaces an earlier evaluation's videos: once this one's are written, those it did not write
    again go (check_video_folder let only such videos be there), so the folder shows one evaluation."""
    written = {Path(p).resolve() for p in (getattr(result, "videos", None) or [])}
    for path in earlier:
        if path.resolve() not in written and VIDEO_FILES.fullmatch(path.name):
            path.unlink(missing_ok=True)


def _load_critic(config: EvalConfig):
    """The critic of --critic, loaded before the model (a bad path fails fast), or None."""
    if not config.critic:
        return None
    if config.search:
        raise InvalidInputError("--critic and --search both choose among candidate actions: pass one of them")
    return load_critic(config.critic)


def _search_policy(config: EvalConfig, setup, expert_model):
    """``setup.policy`` wrapped in :class:`SearchPolicy` (``--search``), refused where it cannot work."""
    import gymnasium as gym

    if expert_model is None:
        raise InvalidInputError("--search scores candidates by the expert's continuation: pass --expert FILE.zip")
    if space_to_dict(setup.action_space, "action")["type"] != "box":
        raise InvalidInputError(f"--search perturbs continuous actions; {setup.env_id} has discrete ones")
    if not (math.isfinite(config.search_noise) and config.search_noise > 0) or config.search < 2:
        raise InvalidInputError(f"--search needs at least 2 candidates and a positive --search-noise, got "
                                f"{config.search} and {config.search_noise}")
    return SearchPolicy(setup.policy, expert_model, lambda: gym.make(setup.env_id, **(setup.env_kwargs or {})),
                        setup.action_space, config.search, config.search_horizon, config.search_noise,
                        seed=config.seed)


def _held_out_rows(config: EvalConfig):
    """--action-error's held-out rows (read before the episodes, so a bad dataset fails first), or None."""
    if config.action_error is None:
        return None

    return held_out_rows(RlftDataset.open(config.action_error, require_codec=False), config.seed)


def _action_error(setup, held_out) -> dict[str, Any]:
    observations, actions, split = held_out
    space = space_to_dict(setup.action_space, "action")
    return {**policy_action_error(setup.policy, observations, actions, space), "action_error_split": split}




def _check_config(config: EvalConfig) -> None:
    """Refuse bad numbers and a bad --out before anything slow is loaded."""
    if config.episodes < 1:
        raise InvalidInputError(f"--episodes must be at least 1, got {config.episodes}")
    if not 1 <= config.num_envs <= MAX_ENVS:
        raise InvalidInputError(f"--num-envs must be from 1 to {MAX_ENVS}, got {config.num_envs}",
                                hint="each env is a live simulator in memory; batches of tens are where speed is")
    if config.bin_decoding not in BIN_DECODINGS:  # every policy, not only llm: (a typo never passes silently)
        raise InvalidInputError(f"--bin-decoding must be one of {', '.join(BIN_DECODINGS)}, "
                                f"got {config.bin_decoding!r}")
    if not (math.isfinite(config.action_scale) and config.action_scale > 0):
        raise InvalidInputError(f"--action-scale must be a positive number, got {config.action_scale}")
    if config.temperature < 0:
        raise InvalidInputError(f"--temperature must be >= 0 (0: greedy), got {config.temperature}")
    if not 0.0 < config.top_p <= 1.0:
        raise InvalidInputError(f"--top-p must be in (0, 1], got {config.top_p}")
    # after the values: an option that does nothing for this policy is refused, not ignored (hostile pass 15, B16)
    llm = config.policy.startswith("llm:")
    check_needed(config, {"llm": (llm, "to llm: policies"),
                          "openai": (config.backend == "openai", "with --backend openai"),
                          "transformers": (llm and config.backend != "openai", "to llm: policies run by transformers"),
                          "sampling": (llm and config.temperature > 0, "with sampling (--temperature above 0)"),
                          "video": (config.video is not None, "with --video FOLDER"),
                          "search": (config.search > 0, "with --search N"),
                          "critic": (config.critic is not None, "with --critic RUN"),
                          # nothing to replace without an output (hostile pass 19, U2)
                          "outputs": (config.out is not None or config.video is not None,
                                      "with --out FILE (or --video FOLDER)")})
    _check_outputs(config)


def _check_outputs(config: EvalConfig) -> None:
    """--out (and the files beside it) and --video, before any episode: new, or rlft's to replace, and no input."""
    kind, target = parse_policy_spec(config.policy)
    # an LLM run's base models are inputs too: a LoRA run's base was written into (hostile pass 12, B7)
    policy = model_lineage("--policy", target) if kind == "llm" else [("--policy", target)]
    inputs = [*policy, ("--codec", config.codec), ("--expert", config.expert),
              ("--action-error", config.action_error), ("--critic", config.critic)]
    # an SB3 checkpoint (expert.zip) carries its metadata beside it (expert.json): an input too
    inputs += [(f"{name}'s metadata", str(Path(p).with_suffix(".json"))) for name, p in inputs
               if p and str(p).endswith(".zip")]
    if config.out is not None:
        out = Path(config.out)
        if out.suffix.lower() != ".json":
            raise InvalidInputError(f"--out must be a .json file, got {out}")
        check_output_file(out, config.overwrite, inputs=inputs, ours=is_json_with("env_id", "policy"))
        check_side_files(out, config.overwrite)
    if config.video is not None:
        check_video_folder(Path(config.video), config.overwrite, inputs)


def check_video_folder(folder: Path, overwrite: bool, inputs) -> None:
    """--video writes ``episode-IIII-seed-S.mp4`` files: into a new or empty folder, or over the videos of an earlier
    evaluation with --overwrite; never into an input or a folder holding anything else."""
    refuse_overlap(folder, inputs, "--video")
    if folder.exists() and not folder.is_dir():
        raise OutputExistsError(f"--video {folder} is a file", hint="give a folder for the videos")
    present = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    other = [name for name in present if not VIDEO_FILES.fullmatch(name)]
    if other:
        raise OutputExistsError(f"--video {folder} holds files an evaluation does not write ({', '.join(other[:5])})",
                                hint="give --video a new or empty folder")
    if present and not overwrite:
        raise OutputExistsError(f"--video {folder} already holds videos ({', '.join(present[:3])})",
                                hint="pass --overwrite to replace them, or give another folder")


def _load_expert_model(config: EvalConfig):
    """The SB3 model of --expert (to measure agreement against), or None."""
    if config.expert is None:
        return None

    expert_model, _ = load_expert(config.expert)
    return expert_model


def _num_envs(config: EvalConfig, setup) -> int:
    """--num-envs, capped to --episodes (a note says so)."""
    if config.num_envs > config.episodes:
        setup.notes.append(f"--num-envs {config.num_envs} is more than --episodes {config.episodes}: "
                           f"using {config.episodes} environments")
        return config.episodes
    return config.num_envs


def _video_slots(config: EvalConfig, setup, num_envs: int) -> VideoSlots | None:
    """The video recorder of --video (after checking that the environment renders), or None."""
    if config.video is None:
        return None
    check_video(setup.env_id, setup.env_kwargs)
    return VideoSlots(config.video, config.video_episodes, num_envs)


def _print_setup(setup) -> None:
    """Print the setup's notes and the constrained-decoding precompute summary."""

    for note in setup.notes:
        console.print(f"[yellow]note:[/] {note}")
    if setup.precompute:
        pc = setup.precompute
        console.print(f"constrained decoding: {pc['states']} grammar states, {pc['candidate_tokens']} candidate "
                      f"tokens, precomputed in {pc['precompute_seconds'] * 1000:.1f} ms")


def _run_episodes(config: EvalConfig, setup, env_fns, agreement: Agreement | None, video: VideoSlots | None,
                  num_envs: int) -> RolloutResult:
    """Roll the policy out under a progress bar; the policy is closed whatever happens."""

    result = RolloutResult([], 0.0, 0.0, 0.0, 0)
    try:
        with progress(transient=True) as bar:
            task = bar.add_task(f"{config.policy} on {setup.env_id}", total=config.episodes)
            rollout(setup.policy, env_fns, config.episodes, config.seed, default_action(setup.action_space),
                    agreement, video, on_episode=lambda _r: bar.advance(task), result=result)
    except RlftError as exc:  # e.g. the generation server died: keep what was finished, then say so
        raise _keep_finished(config, setup, result, num_envs, exc) from exc
    finally:
        setup.policy.close()
    return result
