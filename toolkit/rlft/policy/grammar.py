"""The answer grammar of a codec: the literal answer prefix, one value per action dimension with its
separators, and the literal suffix, as a deterministic character automaton (used by constrained decoding)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from rlft.codecs.base import Codec
from rlft.core.errors import InvalidInputError


class Segment:
    """One piece of the answer. Sub-states are small hashable values; ``None`` means "rejected"."""

    def regex(self) -> str:
        """The same language as a regular expression (for servers that constrain output by regex: vLLM)."""
        raise NotImplementedError

    def start(self):
        raise NotImplementedError

    def step(self, sub, ch: str):
        raise NotImplementedError

    def final(self, sub) -> bool:
        """The segment may end here."""
        raise NotImplementedError

    def open(self, sub) -> bool:
        """The segment may still continue from here."""
        raise NotImplementedError

    def alphabet(self) -> set[str]:
        raise NotImplementedError

    def max_len(self) -> int:
        raise NotImplementedError


@dataclass
class Literal(Segment):
    text: str

    def regex(self) -> str:
        return re.escape(self.text)

    def start(self):
        return 0

    def step(self, sub, ch):
        return sub + 1 if sub < len(self.text) and self.text[sub] == ch else None

    def final(self, sub):
        return sub == len(self.text)

    def open(self, sub):
        return sub < len(self.text)

    def alphabet(self):
        return set(self.text)

    def max_len(self):
        return len(self.text)


@dataclass
class Choice(Segment):
    """One of a fixed set of strings (action names, integers of a range), as a trie."""

    options: list[str]
    _children: list[dict[str, int]] = field(default_factory=list, repr=False)
    _ends: list[bool] = field(default_factory=list, repr=False)

    def __post_init__(self):
        if not self.options or any(not o for o in self.options):
            raise ValueError("a choice needs non-empty options")
        self._children, self._ends = [{}], [False]
        for option in self.options:
            node = 0
            for ch in option:
                nxt = self._children[node].get(ch)
                if nxt is None:
                    nxt = len(self._children)
                    self._children[node][ch] = nxt
                    self._children.append({})
                    self._ends.append(False)
                node = nxt
            self._ends[node] = True

    def regex(self) -> str:
        return "(?:" + "|".join(re.escape(o) for o in sorted(self.options, key=len, reverse=True)) + ")"

    def start(self):
        return 0

    def step(self, sub, ch):
        return self._children[sub].get(ch)

    def final(self, sub):
        return self._ends[sub]

    def open(self, sub):
        return bool(self._children[sub])

    def alphabet(self):
        return {ch for o in self.options for ch in o}

    def max_len(self):
        return max(len(o) for o in self.options)


@dataclass
class Number(Segment):
    """A decimal ``-?\\d{1,int_digits}(\\.\\d{decimals})?`` (the point and decimals only when decimals > 0)."""

    int_digits: int
    decimals: int

    # sub-states: ("s",) start, ("m",) after the minus sign, ("i", k) k integer digits, ("f", k) k decimals
    # (("f", 0) is just after the point)
    def regex(self) -> str:
        return f"-?[0-9]{{1,{self.int_digits}}}" + (rf"\.[0-9]{{{self.decimals}}}" if self.decimals else "")

    def start(self):
        return ("s",)

    def step(self, sub, ch):
        phase = sub[0]
        if phase == "s" and ch == "-":
            return ("m",)
        if phase in ("s", "m"):
            return ("i", 1) if ch.isdigit() and ch.isascii() else None
        if phase == "i":
            if ch.isdigit() and ch.isascii():
                return ("i", sub[1] + 1) if sub[1] < self.int_digits else None
            return ("f", 0) if ch == "." and self.decimals > 0 else None
        if phase == "f" and ch.isdigit() and ch.isascii() and sub[1] < self.decimals:
            return ("f", sub[1] + 1)
        return None

    def final(self, sub):
        if self.decimals == 0:
            return sub[0] == "i"
        return sub[0] == "f" and sub[1] == self.decimals

    def open(self, sub):
        if sub[0] in ("s", "m"):
            return True
        if sub[0] == "i":
            return sub[1] < self.int_digits or self.decimals > 0
        return sub[1] < self.decimals

    def alphabet(self):
        return set("-0123456789") | ({"."} if self.decimals else set())

    def max_len(self):
        return 1 + self.int_digits + (1 + self.decimals if self.decimals else 0)


@dataclass
class AnswerGrammar:
    """A sequence of segments; a state is ``(segment index, sub-state)``, index ``len(segments)`` = done."""

    segments: list[Segment]
    description: str = ""

    def __post_init__(self):
        self.segments = [s for s in self.segments if not (isinstance(s, Literal) and not s.text)]
        if not self.segments:
            raise ValueError("empty grammar")

    def start(self):
        return self._settle((0, self.segments[0].start()))

    def _settle(self, state):
        """Move past segments that are complete and cannot continue (their next char belongs to the next)."""
        i, sub = state
        while i < len(self.segments) and self.segments[i].final(sub) and not self.segments[i].open(sub):
            i += 1
            sub = self.segments[i].start() if i < len(self.segments) else None
        return (i, sub)

    def step(self, state, ch: str):
        """The state after ``ch``, or None. Inside a segment first; from a complete segment into the next.

        Deterministic because, in the grammars built here, the character that ends a value (a separator, the
        suffix's first character) can never continue it.
        """
        i, sub = state
        if i >= len(self.segments):
            return None
        seg = self.segments[i]
        nxt = seg.step(sub, ch)
        if nxt is not None:
            return self._settle((i, nxt))
        if seg.final(sub) and i + 1 < len(self.segments):
            nseg = self.segments[i + 1]
            nxt = nseg.step(nseg.start(), ch)
            if nxt is not None:
                return self._settle((i + 1, nxt))
        return None

    def accepting(self, state) -> bool:
        i, sub = state
        n = len(self.segments)
        return i >= n or (i == n - 1 and self.segments[i].final(sub))

    def can_continue(self, state) -> bool:
        i, sub = state
        if i >= len(self.segments):
            return False
        return self.segments[i].open(sub) or (self.segments[i].final(sub) and i + 1 < len(self.segments))

    def alphabet(self) -> set[str]:
        return set().union(*(s.alphabet() for s in self.segments))

    def max_chars(self) -> int:
        return sum(s.max_len() for s in self.segments)

    def regex(self) -> str:
        """Every valid answer text as one regular expression (the language :meth:`matches` accepts)."""
        return "".join(segment.regex() for segment in self.segments)

    def matches(self, text: str) -> bool:
        state = self.start()
        for ch in text:
            state = self.step(state, ch)
            if state is None:
                return False
        return self.accepting(state)


def _int_choice(start: int, n: int) -> Choice:
    return Choice([str(v) for v in range(start, start + n)])


def _int_digits(low: float, high: float, default: int = 6) -> int:
    """Integer digits needed for the largest magnitude in [low, high] (``default`` for infinite bounds)."""
    big = max(abs(low), abs(high))
    if not math.isfinite(big):
        return default
    return max(1, len(str(int(math.floor(big)))))


def answer_grammar(codec: Codec) -> AnswerGrammar:
    """The grammar of every valid answer text of ``codec`` (the answer tags included)."""
    template = codec.template
    space = codec.action_space
    kind = codec.kind
    if kind == "frozenlake-grid":
        values = [Choice(list(codec.action_names))]
        what = f"one of {', '.join(codec.action_names)}"
    elif space["type"] == "discrete":
        values = [_int_choice(int(space.get("start", 0)), int(space["n"]))]
        what = f"an integer {space.get('start', 0)}..{space.get('start', 0) + space['n'] - 1}"
    elif kind in ("discretized", "binned"):
        counts = [len(e) - 1 for e in codec.edges["action"]]
        values = [_int_choice(0, c) for c in counts]
        what = f"{len(counts)} bin indices"
    elif kind == "tokenized":
        values = [_int_choice(0, codec.tokens) for _ in range(codec.action_dims)]
        what = f"{codec.action_dims} tokens 0..{codec.tokens - 1}"
    elif kind == "raw":
        low, high = space["low"], space["high"]
        values = [Number(_int_digits(lo, hi), codec.precision) for lo, hi in zip(low, high, strict=True)]
        what = f"{len(values)} decimals with {codec.precision} digits"
    else:
        raise InvalidInputError(f"constrained decoding does not know the answer grammar of codec kind {kind!r}")
    prefix = template.answer_prefix[len(template.prompt_suffix):]  # a prefilled tag is in the prompt already
    separator = getattr(codec, "separator", " ")
    segments: list[Segment] = [Literal(prefix)]
    for j, value in enumerate(values):
        if j:
            segments.append(Literal(separator))
        segments.append(value)
    segments.append(Literal(template.answer_suffix))
    return AnswerGrammar(segments, f"{prefix}{what}{template.answer_suffix}")
