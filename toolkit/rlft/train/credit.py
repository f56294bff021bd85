"""Per-state credit for episodic GRPO (``--credit state``), GiGPO-style (Feng et al. 2025, verl-agent).

Episode-level GRPO gives every answer of an episode the same advantage: the one good move of a successful
FrozenLake episode and its ten wasted ones are pushed up alike, and a state's better answer is only ever compared
with a whole other episode. GiGPO adds a **step-level** advantage: the turns of all episodes that start alike
(same first prompt: one task) are grouped by the observation they answered (an *anchor state*; FrozenLake's states
repeat exactly), and a turn's discounted return-to-go is compared with the other turns of its anchor group. Each
answer's advantage is then ``A_episode + weight * A_step``, written per token (TRL's loss takes ``(B, T)``
advantages), so the answer of turn ``t`` carries turn ``t``'s credit.

Pure numpy over :class:`rlft.train.episodes.Episode` fields, so the arithmetic is tested without a trainer.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from rlft.core.errors import InvalidInputError

CREDITS = ("episode", "state")
STD_EPS = 1e-6


def check_credit(credit: str, gamma: float, weight: float) -> None:
    """Refuse a credit setting that cannot work: an unknown kind, a discount outside [0, 1], a bad weight."""
    if credit not in CREDITS:
        raise InvalidInputError(f"--credit must be one of {', '.join(CREDITS)}, got {credit!r}")
    if not 0.0 <= gamma <= 1.0:
        raise InvalidInputError(f"--credit-gamma must be within [0, 1], got {gamma}")
    if not math.isfinite(weight) or weight < 0:
        raise InvalidInputError(f"--step-weight must be a finite number >= 0, got {weight}")


def returns_to_go(rewards: Sequence[float], gamma: float) -> np.ndarray:
    """``R_t = r_t + gamma r_{t+1} + ...`` for each turn of one episode."""
    out = np.zeros(len(rewards))
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = float(rewards[t]) + gamma * running
        out[t] = running
    return out


def step_advantages(tasks: Sequence[str], observations: Sequence[Sequence[str]],
                    rewards: Sequence[Sequence[float]], gamma: float) -> tuple[list[np.ndarray], dict[str, float]]:
    """Per episode, one step-level advantage per turn: ``(R_t - mean) / std`` over the turns of episodes of the
    same task (``tasks[i]``: e.g. the first prompt) that answered the same observation; 0 in a group of one turn
    or where every return-to-go is equal (no signal: no push). Also returns what the groups held, for the log."""
    rtg = [returns_to_go(r, gamma) for r in rewards]
    groups: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    for i, (task, obs) in enumerate(zip(tasks, observations, strict=True)):
        for t, o in enumerate(obs[: len(rtg[i])]):
            groups[(task, o)].append((i, t))
    out = [np.zeros(len(r)) for r in rtg]
    informative = 0
    for members in groups.values():
        values = np.array([rtg[i][t] for i, t in members])
        std = float(values.std())
        if len(members) < 2 or std < STD_EPS:
            continue
        informative += 1
        for (i, t), v in zip(members, (values - values.mean()) / std, strict=True):
            out[i][t] = float(v)
    turns = sum(len(r) for r in rtg)
    stats = {"state_groups": float(len(groups)), "state_groups_informative": float(informative),
             "turns_per_state_group": turns / max(1, len(groups)),
             "turns_with_step_credit": float(sum(int(np.count_nonzero(a)) for a in out)) / max(1, turns)}
    return out, stats


def token_advantages(episode_advantages: Sequence[float], turn_ids: Sequence[Sequence[int]],
                     steps: Sequence[np.ndarray], weight: float, width: int) -> np.ndarray:
    """``(B, width)`` advantages: token ``j`` of episode ``i`` written by turn ``t`` gets
    ``episode_advantages[i] + weight * steps[i][t]``; tokens of no turn (the environment's, padding) keep the
    episode's advantage (they are masked out of the loss anyway)."""
    out = np.repeat(np.asarray(episode_advantages, dtype=np.float32)[:, None], width, axis=1)
    for i, (ids, step) in enumerate(zip(turn_ids, steps, strict=True)):
        ids = np.asarray(ids[:width], dtype=np.int64)
        mine = ids >= 0
        out[i, : len(ids)][mine] += weight * np.asarray(step, dtype=np.float32)[ids[mine]]
    return out
