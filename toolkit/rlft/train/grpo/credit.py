"""Per-state credit for episodic GRPO (``--credit state``), GiGPO-style (Feng et al. 2025, verl-agent).

Episode-level GRPO gives every answer of an episode the same advantage: the one good move of a successful
FrozenLake episode and its ten wasted ones are pushed up alike, and a state's better answer is only ever compared
with a whole other episode. GiGPO adds a **step-level** advantage: the turns of all episodes that start alike
(same first prompt: one task) are grouped by the observation they answered (an *anchor state*; FrozenLake's states
repeat exactly), and a turn's discounted return-to-go is compared with the other turns of its anchor group. Each
answer's advantage is then ``A_episode + weight * A_step``, written per token (TRL's loss takes ``(B, T)``
advantages), so the answer of turn ``t`` carries turn ``t``'s credit.

``--credit action`` goes one step further, for sparse returns. GiGPO's step advantage only moves turns of episodes
that earned something: a FrozenLake batch where one episode in sixty reaches the goal gives every other turn zero.
Here a turn's step advantage is a Monte-Carlo estimate of ``Q(s, a) - V(s)``: the mean return-to-go of the turns
that answered the same observation *with the same action*, minus that of all turns at the observation, scaled by
their standard deviation. The turns pooled are those of the last ``--credit-window`` steps (1: this batch only),
so a rare success keeps informing its states for a while, and a turn of a failed episode that took the good action
where it counted is pushed up too (a tabular critic where states repeat exactly; older steps' turns come from
older policies, which is why the window is short).

``--credit model`` bootstraps instead of averaging returns. Monte-Carlo estimates stay noisy while returns are
rare (a FrozenLake batch from a near-uniform start reaches the goal in about 1 episode of 60), and pooling older steps
mixes older policies. Transitions, though, are facts about the environment whoever played them: every
``(observation, answer) -> (reward, next observation, end)`` seen so far goes into an empirical model of the
environment (:class:`ExperienceModel`), and value iteration on it gives ``Q(s, a)`` for every answer tried at every
observation, propagating one success back to every state that can reach it. A turn's step advantage is
``(Q(s, a) - V(s)) / (max_b Q(s, b) - min_b Q(s, b))`` where ``V(s)`` is the mean ``Q`` of the answers this batch
gave at that observation (the current policy's value there, as GiGPO's anchor groups baseline within the batch).
What was measured on the LLM (FrozenLake 4x4, format-only start; docs/results.md, row 9a's notes): with
``Q - max`` (never positive) its token entropy at the answer fell from 1.1 to 0.03 in 80 steps while its choice
among the four answers stayed near uniform. Centred (on the answers tried, then on the batch's own answers at each
observation, then with each observation's turns scaled by ``turns / (observations x its turns)`` so that the
start's few positions, which hold most of a batch's turns, weigh no more than the others), it gave one answer
everywhere within 10-30 steps every time. The likely reason, and what should fix it, are in those notes: a
position visited with one answer only has that answer's value as its baseline, so nothing turns it. The code
keeps the last variant (batch baseline, balanced observations).

This is certainty-equivalence model-based credit: it needs observations that repeat
exactly (FrozenLake's positions, grid worlds, text games); where they never repeat (CartPole's floats) every
transition is its own state and the credit reduces to the immediate reward.

Pure numpy over :class:`rlft.train.grpo.episodes.Episode` fields, so the arithmetic is tested without a trainer.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

STD_EPS = 1e-6


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


Turn = tuple[str, str, str, float]  # (task, observation, action, return-to-go)


def episode_turns(tasks: Sequence[str], observations: Sequence[Sequence[str]], actions: Sequence[Sequence],
                  rewards: Sequence[Sequence[float]], gamma: float) -> list[list[Turn]]:
    """Per episode, its turns as ``(task, observation, action, return-to-go)``: what ``--credit action`` pools."""
    out = []
    for task, obs, acts, rew in zip(tasks, observations, actions, rewards, strict=True):
        rtg = returns_to_go(rew, gamma)
        out.append([(task, o, action_key(a), float(g)) for o, a, g in zip(obs, acts, rtg, strict=False)])
    return out


def action_key(action) -> str:
    """A hashable, stable name for an action (numpy scalars and arrays included)."""
    return repr(np.asarray(action).tolist())


def action_advantages(turns: Sequence[Sequence[Turn]], pool: Sequence[Turn]) -> tuple[list[np.ndarray],
                                                                                       dict[str, float]]:
    """Per episode of ``turns``, one advantage per turn: ``(Q(s, a) - V(s)) / std(s)`` where, over the turns of
    ``pool`` (this batch's and earlier steps' turns) with the same task and observation, ``V`` is the mean
    return-to-go, ``std`` its standard deviation and ``Q`` the mean of those that took the same action; 0 where the
    observation's returns are all equal (no signal)."""
    states: dict[tuple[str, str], list[float]] = defaultdict(list)
    pairs: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for task, obs, act, g in pool:
        states[(task, obs)].append(g)
        pairs[(task, obs, act)].append(g)
    value = {k: (float(np.mean(v)), float(np.std(v))) for k, v in states.items()}
    q = {k: float(np.mean(v)) for k, v in pairs.items()}
    out, informative = [], set()
    for episode in turns:
        adv = np.zeros(len(episode))
        for t, (task, obs, act, _g) in enumerate(episode):
            mean, std = value[(task, obs)]
            if std >= STD_EPS:
                adv[t] = (q[(task, obs, act)] - mean) / std
                informative.add((task, obs))
        out.append(adv)
    return out, {**_turn_stats(turns, out, informative), "turns_per_state_group": len(pool) / max(1, len(states))}


def _turn_stats(turns: Sequence[Sequence[Turn]], out: Sequence[np.ndarray], informative: set) -> dict[str, float]:
    """What a pooled credit logs of a batch: its observations, those that carried a signal, the share of turns
    with a step advantage."""
    n = sum(len(e) for e in turns)
    return {"state_groups": float(len({(t[0], t[1]) for e in turns for t in e})),
            "state_groups_informative": float(len(informative)),
            "turns_with_step_credit": float(sum(int(np.count_nonzero(a)) for a in out)) / max(1, n)}


class ExperienceModel:
    """Every transition played so far, counted: ``(state, action) -> {(reward, next state, terminal): count}``;
    states are ``(task, observation text)``. :meth:`values` runs value iteration on the empirical model."""

    def __init__(self, gamma: float, tolerance: float = 1e-6, max_sweeps: int = 1000):
        self.gamma, self.tolerance, self.max_sweeps = gamma, tolerance, max_sweeps
        self.counts: dict[tuple, dict[tuple, int]] = defaultdict(lambda: defaultdict(int))
        self.transitions = 0

    def add(self, task: str, observations: Sequence[str], actions: Sequence, rewards: Sequence[float],
            next_observation: str | None, terminated: bool) -> None:
        """One episode: turn ``t`` leads to ``observations[t + 1]``; the last turn to ``next_observation`` (the
        observation after the last action), which is terminal when the episode ``terminated`` and unknown (the
        transition is left out) when it was cut short without one."""
        n = min(len(observations), len(actions), len(rewards))
        for t in range(n):
            last = t == n - 1
            if last and not terminated and next_observation is None:
                continue
            nxt = next_observation if last else observations[t + 1]
            self.counts[(task, observations[t], action_key(actions[t]))][
                (float(rewards[t]), (task, nxt), bool(last and terminated))] += 1
            self.transitions += 1

    def values(self) -> dict[tuple[str, str, str], float]:
        """``Q(s, a)`` for every ``(task, observation, action)`` seen, by value iteration (``V(s) = max_a Q``)."""
        keys = list(self.counts)
        index = {}
        for task, obs, _act in keys:
            index.setdefault((task, obs), len(index))
        rows, cols, probs, rewards, pair_of = [], [], [], np.zeros(len(keys)), []
        for k, key in enumerate(keys):
            outcomes = self.counts[key]
            total = sum(outcomes.values())
            for (reward, nxt, terminal), count in outcomes.items():
                rewards[k] += reward * count / total
                if not terminal and nxt in index:  # a state never left (yet) is worth 0
                    rows.append(k)
                    cols.append(index[nxt])
                    probs.append(self.gamma * count / total)
            pair_of.append(index[key[:2]])
        rows_a, cols_a, probs_a, owner = np.array(rows, int), np.array(cols, int), np.array(probs), np.array(pair_of)
        value = np.zeros(len(index))
        for _ in range(self.max_sweeps):
            q = rewards + np.bincount(rows_a, probs_a * value[cols_a], minlength=len(keys))
            new = np.full(len(index), -np.inf)
            np.maximum.at(new, owner, q)
            converged = np.max(np.abs(new - value), initial=0.0) < self.tolerance
            value = new
            if converged:
                break
        return {key: float(v) for key, v in zip(keys, q, strict=True)}


def model_advantages(turns: Sequence[Sequence[Turn]], q: dict[tuple[str, str, str], float]) -> tuple[
        list[np.ndarray], dict[str, float]]:
    """Per episode, one advantage per turn: ``(Q(s, a) - V(s)) / (max_b Q(s, b) - min_b Q(s, b))``, ``V(s)`` the
    mean ``Q`` of the answers given at ``s`` in ``turns`` (this batch), scaled by ``turns / (observations x turns at
    s)`` so that each observation weighs the same; 0 where all answers tried at ``s`` are worth the same. Each
    observation's advantages sum to zero over the batch."""
    answers: dict[tuple[str, str], list[float]] = defaultdict(list)
    for (task, obs, _act), value in q.items():
        answers[(task, obs)].append(value)
    given: dict[tuple[str, str], list[float]] = defaultdict(list)
    for episode in turns:
        for task, obs, act, _g in episode:
            if (task, obs, act) in q:
                given[(task, obs)].append(q[(task, obs, act)])
    baseline = {k: float(np.mean(v)) for k, v in given.items()}
    share = sum(len(e) for e in turns) / max(1, len(given))  # an observation's turns weigh as much as an average one's
    out, informative = [], set()
    for episode in turns:
        adv = np.zeros(len(episode))
        for t, (task, obs, act, _g) in enumerate(episode):
            state = (task, obs)
            if (task, obs, act) not in q:
                continue
            width = max(answers[state]) - min(answers[state])
            if width > STD_EPS:
                adv[t] = (q[(task, obs, act)] - baseline[state]) / width * share / len(given[state])
                informative.add(state)
        out.append(adv)
    starts = [max(answers[k]) for k in {e[0][:2] for e in turns if e} if k in answers]
    return out, {**_turn_stats(turns, out, informative), "model_states": float(len(answers)),
                 "start_value": float(np.mean(starts)) if starts else 0.0}


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
