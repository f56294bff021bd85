"""Prompt/completion records from episodes, a whole chunk of steps at a time (no per-step Python loop).

The per-step path used at evaluation time (``Codec.build_prompt`` + ``PromptTemplate.context``) and this
vectorised path must produce identical text; ``tests/test_serialize.py`` compares them row by row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rlft.codecs.base import Codec
from rlft.core.textfmt import format_fixed
from rlft.datasets.textops import (
    concat_text,
    fill_template,
    from_numpy,
    list_array,
    list_positions,
    messages,
    repeat_text,
    shifted,
    text_scalar,
)

GLOSSARY = {
    "prompt": "model input: the observation (and optional history / return-to-go) in the codec's format; "
    "a string (plain style) or a list of chat messages (chat style); with turns, the episode so far as a "
    "conversation",
    "completion": "the recorded action in the codec's answer format, e.g. <action>0.123 -0.500</action>",
    "observation": "the raw observation (list of float, or the integer of a discrete space)",
    "next_observation": "the observation the action led to (s'); on an episode's last row its final observation "
    "(terminal or cut by the time limit), so every row is a whole transition",
    "action": "the raw action (list of float, or the integer of a discrete space)",
    "executed_action": "DART data only (collected with --noise and --label-actions clean): the noisy action the env "
    "was stepped with, which led to next_observation and reward, where action is the policy's clean label",
    "reward": "reward received after the action",
    "return_to_go": "undiscounted sum of the rewards from this step to the end of the episode",
    "episode_id": "id of the episode in the source Minari dataset",
    "step": "index of the step inside its episode (0 = first action)",
    "terminated": "the episode ended on this step by reaching a terminal state (MDP termination)",
    "truncated": "the episode was cut on this step by a time limit (not a terminal state)",
}


@dataclass
class EpisodeChunk:
    """Whole episodes concatenated: per-step arrays (N steps, N actions), each step's next observation beside it
    (an episode's T+1 observations are its rows' observations and, shifted by one, their next ones)."""

    observations: np.ndarray  # (N, D) float or (N,) int
    actions: np.ndarray  # (N, A) float or (N,) int
    rewards: np.ndarray  # (N,)
    terminated: np.ndarray  # (N,) bool
    truncated: np.ndarray  # (N,) bool
    episode_id: np.ndarray  # (N,) int64
    step: np.ndarray  # (N,) int64
    next_observations: np.ndarray | None = None  # (N, D) float or (N,) int; None: not known (no episodes)
    executed_actions: np.ndarray | None = None  # DART data: the actions the env was stepped with (else None)

    @property
    def n(self) -> int:
        return len(self.rewards)

    def returns_to_go(self) -> np.ndarray:
        """Reverse cumulative sum of rewards inside each episode."""
        total = np.r_[np.cumsum(self.rewards[::-1].astype(np.float64))[::-1], 0.0]  # total[i] = sum(rewards[i:])
        last = np.flatnonzero(np.r_[self.episode_id[1:] != self.episode_id[:-1], True])  # each episode's last row
        end = last[np.searchsorted(last, np.arange(self.n))]
        return total[:-1] - total[end + 1]


def _value_column(values: np.ndarray) -> pa.Array:
    """(N, ...) floats -> list<float32> of each row flattened in row-major order (the codec keeps the shape);
    (N,) ints -> int64; (N,) strings (Text observations) -> string."""
    if values.dtype.kind in "USO":
        return pa.array([str(v) for v in values], pa.string())
    if values.ndim == 1:
        return from_numpy(values.astype(np.int64))
    values = values.reshape(len(values), -1)
    flat = from_numpy(values.astype(np.float32).ravel())
    offsets = from_numpy(np.arange(0, values.size + 1, max(1, values.shape[1]), dtype=np.int32))
    return pa.ListArray.from_arrays(offsets, flat)


def build_records(chunk: EpisodeChunk, codec: Codec) -> pa.Table:
    """The dataset rows of ``chunk`` encoded with ``codec`` and its prompt template."""
    template = codec.template
    n = chunk.n
    obs_text = codec.encode_observations(chunk.observations)
    act_text = codec.encode_actions(chunk.actions)
    obs_text = obs_text if isinstance(obs_text, pa.Array) else pa.array(obs_text, pa.string())
    act_text = act_text if isinstance(act_text, pa.Array) else pa.array(act_text, pa.string())
    rtg = chunk.returns_to_go()

    context_parts: list[pa.Array | str] = []
    for lag in range(template.history, 0, -1):  # oldest first, as PromptTemplate.context writes them
        piece = fill_template(
            template.history_format, {"observation": shifted(obs_text, chunk.step, lag),
                                      "action": shifted(act_text, chunk.step, lag)}, n
        )
        context_parts.append(pc.fill_null(piece, text_scalar("")))
    if template.return_to_go:
        rtg_text = format_fixed(rtg, template.rtg_precision)
        context_parts.append(fill_template(template.rtg_format, {"rtg": rtg_text}, n))
    context = concat_text(context_parts, n)
    user = fill_template(template.instruction, {"context": context, "observation": obs_text}, n)
    answer = fill_template(template.completion_format, {"action": act_text}, n)

    if template.turns > 1:  # the episode so far as a conversation, as episodic GRPO and evaluation write it
        prompt = turn_prompts(template, user, answer, chunk.step)
    elif template.style == "plain":
        prompt = concat_text([template.system + "\n\n", user], n) if template.system else user
        if template.prompt_suffix:  # the prefilled answer tag
            prompt = concat_text([prompt, template.prompt_suffix], n)
    else:
        roles, contents = (["system", "user"], [template.system, user]) if template.system else (["user"], [user])
        prompt = messages(roles, contents, n)
    completion = answer if template.style == "plain" else messages(["assistant"], [answer], n)

    next_obs = {} if chunk.next_observations is None else {"next_observation": _value_column(chunk.next_observations)}
    executed = {} if chunk.executed_actions is None else {"executed_action": _value_column(chunk.executed_actions)}
    return pa.table(
        {
            "prompt": prompt,
            "completion": completion,
            "observation": _value_column(chunk.observations),
            **next_obs,
            "action": _value_column(chunk.actions),
            **executed,
            "reward": from_numpy(chunk.rewards.astype(np.float64)),
            "return_to_go": from_numpy(rtg),
            "episode_id": from_numpy(chunk.episode_id.astype(np.int64)),
            "step": from_numpy(chunk.step.astype(np.int64)),
            "terminated": from_numpy(chunk.terminated.astype(bool)),
            "truncated": from_numpy(chunk.truncated.astype(bool)),
        }
    )


def turn_prompts(template, user: pa.Array, answer: pa.Array, step: np.ndarray) -> pa.Array:
    """Each row's prompt as ``PromptTemplate.build_conversation`` writes it: the last ``turns - 1`` (user text,
    recorded answer) pairs of its episode, then its own user text. Rows of a chunk are whole episodes in order,
    so row i's earlier turns are rows ``i - keep .. i - 1``."""
    n = len(user)
    keep = np.minimum(step.astype(np.int64), template.turns - 1)
    head = 1 if template.system else 0  # the system message (chat) or the system text and a blank line (plain)
    if template.style == "plain":  # pieces: [system], (user + answer + newline) per earlier turn, the user text
        pairs = pc.binary_join_element_wise(user, answer, text_scalar("\n"), text_scalar(""))
        sizes = head + keep + 1
        row, pos = list_positions(sizes)
        earlier = pos - head  # index of the earlier turn inside the row's window; == keep[row]: the current turn
        first = row - keep[row]
        index = np.where(earlier == keep[row], row, n + first + earlier)  # user texts first, then the pairs
        pieces = pa.concat_arrays([user.cast(pa.string()), pairs.cast(pa.string()),
                                   repeat_text(template.system + "\n\n", 1)])
        index = np.where(pos < head, 2 * n, index)
        return pc.binary_join(list_array(pc.take(pieces, from_numpy(index)), sizes), text_scalar(""))
    sizes = head + 2 * keep + 1
    row, pos = list_positions(sizes)
    turn = pos - head  # 0, 1 = first kept turn's user, answer; 2 * keep = the current user text
    current = turn == 2 * keep[row]
    earlier = row - keep[row] + turn // 2
    index = np.where(current, row, np.where(turn % 2 == 0, earlier, n + earlier))
    index = np.where(pos < head, 2 * n, index)
    texts = pa.concat_arrays([user.cast(pa.string()), answer.cast(pa.string()), repeat_text(template.system, 1)])
    role = np.where(pos < head, 0, np.where(current | (turn % 2 == 0), 1, 2))
    roles = pc.take(repeat_text(["system", "user", "assistant"], 1), from_numpy(role))
    struct = pa.StructArray.from_arrays([roles, pc.take(texts, from_numpy(index))], names=["role", "content"])
    return list_array(struct, sizes)

