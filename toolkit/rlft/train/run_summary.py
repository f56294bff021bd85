"""What a finished training run reports: the criterion's line (decision accuracy or action error, the closed-loop
check beside it, a warning when accuracy hides large errors), parameter counts and GPU memory, values read back from
the trainer's log history."""

from __future__ import annotations

from typing import Any

from rlft.models.resolve import count_parameters

LARGE_ERROR_FACTOR = 2.0  # worst-tenth action error above this many tolerances: accuracy is hiding failures


def action_error_line(record: dict[str, Any], acc: str) -> str:
    """A continuous check's line: the action error first, accuracy beside it, and a warning when a high accuracy
    hides a large error on the worst states."""
    error, worst = record.get("action_error"), record.get("action_error_worst10")
    where = f"{record['states']} {record.get('split', 'train')} states ({record['decoding']})"
    if error is None:
        return f"action error n/a on {where}"
    line = (f"action error {error:.4f} of the range (worst tenth {worst:.4f}), decision accuracy {acc} within "
            f"{record['tolerance']:g} on {where}")
    target = record.get("error_target")
    if target is not None:
        line = (f"[green]criterion reached[/] at step {record['reached_at_step']}: " if record["reached"] else
                f"[red]criterion NOT reached[/] (action error <= {target:g}): ") + line
    if final_accuracy_high(record) and worst > LARGE_ERROR_FACTOR * record["tolerance"]:
        line += (f"\n[yellow]warning: accuracy {acc} hides large errors: the worst tenth of states is "
                 f"{worst:.3f} of the range off (above {LARGE_ERROR_FACTOR:g} x the tolerance); judge this run by "
                 "its action error and its return, not its accuracy[/]")
    return line


def final_accuracy_high(record: dict[str, Any]) -> bool:
    return (record.get("final_accuracy") or 0.0) >= 0.9


def criterion_line(record: dict[str, Any]) -> str:
    """One line on whether training reached its criterion, and when (the closed-loop check's return beside it)."""
    line = _decision_line(record)
    episodes = record.get("episodes")
    if episodes and episodes["history"]:
        step, mean, low, score = episodes["history"][-1]
        line += (f"; closed loop at step {step}: return {mean:.4g} (min {low:.4g})"
                 f"{'' if score is None else f', normalized {score:.1f}'} on {episodes['episodes']} episodes")
        if episodes["target"] is not None:
            line += (f" [green](return target {episodes['target']:g} reached at step {record['reached_at_step']})[/]"
                     if record["reached"] and mean >= episodes["target"] else
                     f" [red](return target {episodes['target']:g} not reached)[/]")
    return line


def _decision_line(record: dict[str, Any]) -> str:
    final = record["final_accuracy"]
    acc = "n/a" if final is None else f"{final:.3f}"
    if "action_error" in record or "error_target" in record:
        return action_error_line(record, acc)
    if record["target"] is None:
        return f"decision accuracy {acc} on {record['states']} states ({record['decoding']})"
    if record["reached"] and final is not None and final >= record["target"] - 1e-12:
        return (f"[green]criterion reached[/] at step {record['reached_at_step']}: decision accuracy {acc} >= "
                f"{record['target']:g} on {record['states']} states ({record['decoding']})")
    return (f"[red]criterion NOT reached[/]: decision accuracy {acc} < {record['target']:g} on "
            f"{record['states']} states; wrong: {record['wrong_states'][:10]}")


def parameter_metrics(model) -> dict[str, Any]:
    """Parameter counts, where the model trained and, on a GPU, its peak memory (what a GPU recipe reports)."""
    import torch

    trainable, total = count_parameters(model)
    device = next(model.parameters()).device
    metrics: dict[str, Any] = {"trainable_parameters": trainable, "total_parameters": total, "device": str(device)}
    if device.type == "cuda":
        metrics["gpu_name"] = torch.cuda.get_device_name(device)
        metrics["gpu_peak_memory_gb"] = round(torch.cuda.max_memory_allocated(device) / 2**30, 3)
    return metrics


def last_logged(log_history: list[dict], key: str):
    for entry in reversed(log_history):
        if key in entry:
            return entry[key]
    return None


def first_logged(log_history: list[dict], key: str):
    for entry in log_history:
        if key in entry:
            return entry[key]
    return None
