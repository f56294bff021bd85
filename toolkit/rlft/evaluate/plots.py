"""An evaluation report's picture: the return distribution, or on FrozenLake the policy drawn on its grid."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rlft.core.plotting import figure, save_figure


def plot_returns(report: dict[str, Any], path: Path) -> None:
    returns = np.asarray(report["returns"], dtype=float)
    fig, (ax1, ax2) = figure(1, 2, figsize=(10, 3.6))
    ax1.hist(returns, bins=min(30, max(5, len(returns) // 3)), color="tab:blue", alpha=0.8)
    ax1.axvline(report["return_mean"], color="k", ls="--", lw=1, label=f"mean {report['return_mean']:.3g}")
    ax1.set(title="Return distribution", xlabel="episode return", ylabel="episodes")
    ax1.legend()
    ax2.plot(np.arange(len(returns)), returns, ".", ms=4)
    ax2.set(title="Return per episode", xlabel=f"episode i (seed {report['seed']} + i)", ylabel="return")
    title = f"{report['policy']} on {report['env_id']}: {report['return_mean']:.3g} +- {report['return_std']:.3g}"
    if report.get("success_rate") is not None:
        title += f", success {report['success_rate']:.3f}"
    fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, path)


ARROWS = {0: (-1, 0), 1: (0, 1), 2: (1, 0), 3: (0, -1)}  # LEFT, DOWN, RIGHT, UP as (dx, dy) with y downwards
CELL_COLORS = {"S": "#d8ecf8", "F": "#eef6fb", "H": "#2b3a4a", "G": "#8fd18f"}


def plot_policy_map(report: dict[str, Any], path: Path) -> None:
    """The FrozenLake policy on its grid: in each visited state an arrow for the action taken most often (thicker
    when the policy always took it), red where it is not an optimal action, faint gray arrows for the optimal ones
    where they differ; holes dark, the goal green; unvisited states marked with a dot."""
    from matplotlib.patches import Rectangle

    pm = report["policy_map"]
    rows = pm["rows"]
    nrow, ncol = len(rows), len(rows[0])
    size = max(4.0, 0.6 * max(nrow, ncol))
    fig, ax = figure(figsize=(size, size * nrow / ncol + 0.6))
    wrong = 0
    for r, line in enumerate(rows):
        for c, cell in enumerate(line):
            ax.add_patch(Rectangle((c, r), 1, 1, facecolor=CELL_COLORS.get(cell, "white"), edgecolor="#9aa8b5", lw=0.8))
            if cell in "HG":
                ax.text(c + 0.5, r + 0.5, "hole" if cell == "H" else "goal", ha="center", va="center", fontsize=7,
                        color="white" if cell == "H" else "black")
                continue
            state = str(r * ncol + c)
            optimal = set(pm["optimal"].get(state, []))
            taken = pm["taken"].get(state)
            if not taken:
                ax.plot(c + 0.5, r + 0.5, ".", color="#9aa8b5")
                continue
            action, count = max(((int(a), n) for a, n in taken.items()), key=lambda x: x[1])
            share = count / sum(taken.values())
            bad = action not in optimal
            wrong += bad
            for other in sorted(optimal - {action}):  # the optimal actions the policy did not take
                dx, dy = ARROWS[other]
                ax.annotate("", (c + 0.5 + 0.3 * dx, r + 0.5 + 0.3 * dy), (c + 0.5, r + 0.5),
                            arrowprops={"arrowstyle": "->", "color": "#b0b8c0", "lw": 1})
            dx, dy = ARROWS[action]
            ax.annotate("", (c + 0.5 + 0.35 * dx, r + 0.5 + 0.35 * dy), (c + 0.5 - 0.1 * dx, r + 0.5 - 0.1 * dy),
                        arrowprops={"arrowstyle": "-|>", "color": "#c0392b" if bad else "#1f4e79",
                                    "lw": 1 + 2 * share, "mutation_scale": 12})
    ax.set_xlim(0, ncol)
    ax.set_ylim(nrow, 0)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    success = report.get("success_rate")
    title = f"{report['policy']}: success {success:.3f}" if success is not None else report["policy"]
    ax.set_title(f"{title}\n{wrong} visited state{'s' if wrong != 1 else ''} with a non-optimal action (red)",
                 fontsize=9)
    fig.tight_layout()
    save_figure(fig, path)
