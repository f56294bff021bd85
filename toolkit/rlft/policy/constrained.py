"""Constrained decoding: the model can only write text that is a valid answer of the codec.

The codec's answer grammar (``rlft.policy.grammar``: literal answer prefix, one value per action
dimension with separators, literal suffix) is a deterministic character automaton; its states
reachable from the start are enumerated once, and for each state the tokens that keep the text a valid
prefix are found by walking a trie of the vocabulary's token texts alongside the automaton. The resulting
table ``{state: {token_id: next_state}}`` is built ONCE per (codec, tokenizer); during generation a logits
processor only looks states up. In an accepting state the end-of-sequence token is allowed (and nothing else
when the grammar cannot continue), so every finished generation decodes to a valid action.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlft.codecs.base import Codec
from rlft.core.errors import InvalidInputError
from rlft.policy.grammar import AnswerGrammar, answer_grammar

# -- token table --------------------------------------------------------------------------------------------


def token_texts(tokenizer) -> dict[int, str]:
    """Each non-special token's text as it appears inside decoded output.

    A token is decoded after a fixed anchor token and the anchor's text removed, so tokenizers that drop a
    leading space when decoding a lone token (SentencePiece) still give the text the token adds in context.
    """
    special = set(tokenizer.all_special_ids)
    vocab_size = len(tokenizer)
    ids = [i for i in range(vocab_size) if i not in special]
    anchor_ids = tokenizer.encode("a", add_special_tokens=False)[-1:] or []
    texts: dict[int, str] = {}
    if anchor_ids:
        anchor = tokenizer.decode(anchor_ids, clean_up_tokenization_spaces=False)
        decoded = tokenizer.batch_decode([anchor_ids + [i] for i in ids], clean_up_tokenization_spaces=False)
        for i, text in zip(ids, decoded, strict=True):
            if text.startswith(anchor):
                texts[i] = text[len(anchor):]
    missing = [i for i in ids if i not in texts]
    if missing:
        for i, text in zip(missing, tokenizer.batch_decode([[i] for i in missing],
                                                           clean_up_tokenization_spaces=False), strict=True):
            texts[i] = text
    return texts


def eos_ids(tokenizer, model=None) -> list[int]:
    """Every token id that ends a generation (tokenizer EOS and the model's generation config EOS)."""
    ids: set[int] = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    cfg = getattr(model, "generation_config", None) if model is not None else None
    eos = getattr(cfg, "eos_token_id", None) if cfg is not None else None
    if isinstance(eos, int):
        ids.add(eos)
    elif eos:
        ids.update(int(e) for e in eos)
    if not ids:
        raise InvalidInputError("the tokenizer has no EOS token: constrained decoding cannot end an answer")
    return sorted(ids)


@dataclass
class TokenTable:
    """Token-level states 0..S-1 (0 = start). ``allowed[s]`` are the sorted token ids allowed in state ``s``
    and ``targets[s]`` the state each leads to (``-1``: EOS, the answer is complete)."""

    allowed: list[np.ndarray]
    targets: list[np.ndarray]
    eos: list[int]
    grammar: AnswerGrammar
    vocab_size: int
    candidate_tokens: int
    seconds: float
    max_new_tokens: int

    @property
    def n_states(self) -> int:
        return len(self.allowed)

    def next_state(self, state: int, token: int) -> int:
        """The state after ``token`` in ``state``; -1 when finished or the token is not allowed."""
        if state < 0:
            return -1
        allowed = self.allowed[state]
        i = int(np.searchsorted(allowed, token))
        return int(self.targets[state][i]) if i < len(allowed) and allowed[i] == token else -1

    def describe(self) -> dict[str, Any]:
        return {
            "grammar": self.grammar.description,
            "states": self.n_states,
            "edges": int(sum(len(a) for a in self.allowed)),
            "candidate_tokens": self.candidate_tokens,
            "vocab_size": self.vocab_size,
            "max_new_tokens": self.max_new_tokens,
            "precompute_seconds": round(self.seconds, 4),
        }


def compile_dfa(grammar: AnswerGrammar) -> tuple[list[dict[str, int]], list[bool]]:
    """The grammar as an explicit character DFA: ``delta[state][char] -> state`` (0 = start) and which states
    accept; every later walk is dictionary lookups only."""
    alphabet = sorted(grammar.alphabet())
    start = grammar.start()
    index = {start: 0}
    order = [start]
    delta: list[dict[str, int]] = []
    i = 0
    while i < len(order):
        state = order[i]
        moves: dict[str, int] = {}
        for ch in alphabet:
            nxt = grammar.step(state, ch)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = len(order)
                    order.append(nxt)
                moves[ch] = index[nxt]
        delta.append(moves)
        i += 1
    return delta, [grammar.accepting(s) for s in order]


class _TrieNode:
    __slots__ = ("children", "ids")

    def __init__(self):
        self.children: dict[str, _TrieNode] = {}
        self.ids: list[int] = []


def _walk(root: _TrieNode, delta: list[dict[str, int]], start: int) -> tuple[list[int], list[int]]:
    """Tokens readable from character state ``start`` and the character state each ends in: the token trie
    is walked alongside the automaton, so a dead prefix prunes its whole subtree."""
    tids: list[int] = []
    ends: list[int] = []
    stack = [(root, start)]
    while stack:
        node, cs = stack.pop()
        moves = delta[cs]
        children = node.children
        small, other = (moves, children) if len(moves) < len(children) else (children, moves)
        for ch in small:
            if ch not in other:
                continue
            child, nxt = children[ch], moves[ch]
            if child.ids:
                tids += child.ids
                ends += [nxt] * len(child.ids)
            if child.children:
                stack.append((child, nxt))
    return tids, ends


def build_token_table(codec: Codec, tokenizer, model=None, grammar: AnswerGrammar | None = None) -> TokenTable:
    """Enumerate the grammar's states reachable through whole tokens and, for each, the tokens that keep the
    text a valid prefix of an answer (states that cannot reach a complete answer are removed)."""
    t0 = time.perf_counter()
    grammar = grammar or answer_grammar(codec)
    root, candidates = _token_trie(grammar.alphabet(), token_texts(tokenizer))
    eos = eos_ids(tokenizer, model)
    delta, accepting = compile_dfa(grammar)
    states, tids_of, ends_of = _token_states(root, delta)
    alive = _alive_states(states, ends_of, accepting)
    if not alive[0]:
        raise InvalidInputError(
            f"the tokenizer cannot write any valid answer of the codec ({grammar.description})",
            hint="its vocabulary lacks the characters of the answer format",
        )
    allowed, targets = _allowed_tokens(states, tids_of, ends_of, alive, accepting, eos)
    max_new = _longest_path(targets) + 1
    return TokenTable(allowed, targets, eos, grammar, len(tokenizer), candidates, time.perf_counter() - t0, max_new)


def _token_trie(alphabet, texts: dict[int, str]) -> tuple[_TrieNode, int]:
    """A trie of the tokens written only with characters of the grammar's alphabet, and how many there are."""
    root = _TrieNode()
    candidates = 0
    for tid, text in texts.items():
        if not text or any(ch not in alphabet for ch in text):
            continue
        candidates += 1
        node = root
        for ch in text:
            node = node.children.setdefault(ch, _TrieNode())
        node.ids.append(tid)
    return root, candidates


def _token_states(root: _TrieNode, delta: list[dict[str, int]]
                  ) -> tuple[list[int], list[np.ndarray], list[np.ndarray]]:
    """The token-level states (the character states reachable from the start through whole tokens; token state
    -> character state) and, for each, its readable tokens and the token state each leads to."""
    tok_of_char = np.full(len(delta), -1, dtype=np.int64)
    tok_of_char[0] = 0
    states = [0]  # token state -> character state
    tids_of: list[np.ndarray] = []
    ends_of: list[np.ndarray] = []
    sid = 0
    while sid < len(states):  # breadth first: states found while walking are appended and walked in turn
        tids, ends = _walk(root, delta, states[sid])
        ends_arr = np.asarray(ends, dtype=np.int64)
        for cs in np.unique(ends_arr[tok_of_char[ends_arr] < 0]) if len(ends_arr) else ():
            tok_of_char[cs] = len(states)
            states.append(int(cs))
        tids_of.append(np.asarray(tids, dtype=np.int64))
        ends_of.append(tok_of_char[ends_arr] if len(ends_arr) else ends_arr)
        sid += 1
    return states, tids_of, ends_of


def _alive_states(states: list[int], ends_of: list[np.ndarray], accepting: list[bool]) -> np.ndarray:
    """Which token states can still reach a complete answer (no dead ends), searched backwards from the
    accepting ones."""
    n = len(states)
    alive = np.array([accepting[cs] for cs in states], dtype=bool)
    parents: list[list[int]] = [[] for _ in range(n)]
    for sid in range(n):
        for t in np.unique(ends_of[sid]).tolist():
            parents[t].append(sid)
    todo = deque(np.flatnonzero(alive).tolist())
    while todo:
        t = todo.popleft()
        for p in parents[t]:
            if not alive[p]:
                alive[p] = True
                todo.append(p)
    return alive


def _allowed_tokens(states: list[int], tids_of: list[np.ndarray], ends_of: list[np.ndarray], alive: np.ndarray,
                    accepting: list[bool], eos: list[int]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per token state, the allowed tokens (sorted) and the state each leads to: only tokens into alive states,
    plus EOS (target -1) where the answer may end; dead states allow nothing."""
    allowed, targets = [], []
    eos_arr = np.asarray(eos, dtype=np.int64)
    for sid in range(len(states)):
        if not alive[sid]:
            allowed.append(np.zeros(0, np.int64))
            targets.append(np.zeros(0, np.int64))
            continue
        keep = alive[ends_of[sid]]
        tids, ends = tids_of[sid][keep], ends_of[sid][keep]
        if accepting[states[sid]]:
            tids = np.concatenate([tids, eos_arr])
            ends = np.concatenate([ends, np.full(len(eos_arr), -1, np.int64)])
        order = np.argsort(tids, kind="stable")
        allowed.append(tids[order])
        targets.append(ends[order])
    return allowed, targets


def _longest_path(targets: list[np.ndarray]) -> int:
    """Most tokens from the start to EOS. The state graph is acyclic (every token adds characters), so a
    reverse topological pass computes it."""
    n = len(targets)
    succ = [np.unique(t[t >= 0]).tolist() for t in targets]
    order: list[int] = []
    mark = np.zeros(n, dtype=np.int8)  # 0 new, 1 on the stack, 2 done
    stack = [(0, 0)]
    while stack:  # iterative depth-first post-order from the start
        node, i = stack.pop()
        if i == 0:
            mark[node] = 1
        if i < len(succ[node]):
            stack.append((node, i + 1))
            child = succ[node][i]
            if mark[child] == 0:
                stack.append((child, 0))
        else:
            mark[node] = 2
            order.append(node)
    depth = np.zeros(n, dtype=np.int64)
    for node in order:  # children come before parents in post-order
        if succ[node]:
            depth[node] = 1 + max(depth[c] for c in succ[node])
    return int(depth[0])


class GrammarLogitsProcessor:
    """A ``transformers`` logits processor over a precomputed :class:`TokenTable` (one per generate call).

    Rows are the batch of one ``generate`` call; ``prompt_len`` is the padded prompt length, so the number
    of generated tokens is ``input_ids.shape[1] - prompt_len``.
    """

    def __init__(self, table: TokenTable, batch_size: int, prompt_len: int):
        import torch

        self.table = table
        self.prompt_len = prompt_len
        self.states = [0] * batch_size
        self._allowed = [torch.from_numpy(a) for a in table.allowed]

    def __call__(self, input_ids, scores):
        import torch

        generated = input_ids.shape[1] - self.prompt_len
        if generated > 0:
            last = input_ids[:, -1].tolist()
            for row, tok in enumerate(last):
                s = self.states[row]
                self.states[row] = self.table.next_state(s, tok)
        mask = torch.full_like(scores, float("-inf"))
        for row, s in enumerate(self.states):
            if s >= 0:
                mask[row, self._allowed[s]] = 0.0
            else:  # finished (EOS given, then padding): anything; generate ignores these rows
                mask[row] = 0.0
        return scores + mask
