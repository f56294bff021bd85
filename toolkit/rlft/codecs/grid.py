"""FrozenLake codec: the grid as text with the agent marked, actions as names (LEFT, DOWN, RIGHT, UP).

One map for the whole dataset (``map_rows``; the observation is the position), or a new map every episode
(``map_rows=None``, :mod:`rlft.envs.random_lake`: the observation carries the map, and the grid is drawn from it).
"""

from __future__ import annotations

from typing import Any

from rlft.codecs.base import ActionParseError, Codec, register_codec
from rlft.codecs.choices import WORDINGS
from rlft.codecs.template import PromptTemplate
from rlft.envs.frozenlake import (
    ACTION_NAMES,
    ENV_ID,
    RANDOM_LAKE_ID,
    LakeMap,
    decode_lake,
    render_grid,
    validate_rows,
)

FROZENLAKE_SYSTEM = (
    "You are an expert at solving the Frozen Lake environment. Analyze the state and provide your reasoning "
    "before giving the action."
)
FROZENLAKE_INSTRUCTION = (
    "Current Frozen Lake state:\n{observation}\n\n"
    "S is your position, F is frozen ice, H is a hole, G is the goal. The ice is {slip}.\n"
    "What action should I take to maximize my chances of reaching the goal safely?\n"
    "Respond with one of: LEFT, DOWN, RIGHT, UP.\n"
    "You may think inside <think></think> tags first; then give your final answer inside <answer></answer> tags."
)


# The compact wording: the constant instructions in the system message, the user turn is the grid and position
# alone. SmolLM2's tokenizer: 83 prompt tokens with its chat template, against 169 for the Gemma wording.
FROZENLAKE_COMPACT_SYSTEM = (
    "FrozenLake: S you, F ice, H hole, G goal; the ice is {slip}. Answer <answer>LEFT</answer>, DOWN, RIGHT or UP."
)
# The position wording: the map once in the system message, the user turn is the position alone. Made for episodes
# played as conversations (episodic GRPO), where every turn is another user message: 100 FrozenLake turns with the
# tiny model's chat template took about 6,050 tokens with the grid in each turn, about 2,900 with the position.
FROZENLAKE_POSITION_SYSTEM = (
    "FrozenLake map, row 0 at the top:\n{map}\nS start, F ice, H hole, G goal; the ice is {slip}. "
    "Answer <answer>LEFT</answer>, DOWN, RIGHT or UP."
)
RANDOM_MAPS_NEED_GRID = ("random maps need the grid in every prompt (the map changes each episode): use the compact "
                         "or gemma wording, not position")


def frozenlake_template(slippery: bool, style: str = "chat", wording: str = "gemma",
                        lake: LakeMap | None = None) -> PromptTemplate:
    """The FrozenLake prompt. ``gemma``: the Gemma FrozenLake GRPO experiment's wording plus a legend of the
    cells; ``compact``: the legend and answer format in one short system line, the grid alone in the user turn;
    ``position``: the map (``lake``) in the system message, the row and column alone in the user turn."""
    if wording not in WORDINGS:
        raise ValueError(f"wording must be one of {WORDINGS}, got {wording!r}")
    slippery_word = "slippery" if slippery else "not slippery"
    if wording == "position":
        if lake is None:
            raise ValueError("the position wording needs the map")
        return PromptTemplate(
            style=style,
            system=FROZENLAKE_POSITION_SYSTEM.replace("{map}", "\n".join(" ".join(row) for row in lake.rows))
            .replace("{slip}", slippery_word),
            instruction="{observation}",
            answer_format="<answer>{action}</answer>",
            allow_think=True,
        )
    if wording == "compact":
        return PromptTemplate(
            style=style,
            system=FROZENLAKE_COMPACT_SYSTEM.replace("{slip}", slippery_word),
            instruction="{observation}",
            answer_format="<answer>{action}</answer>",
            allow_think=True,
        )
    slip = "slippery: you may slide to a side" if slippery else "not slippery: you move where you choose"
    return PromptTemplate(
        style=style,
        system=FROZENLAKE_SYSTEM,
        instruction=FROZENLAKE_INSTRUCTION.replace("{slip}", slip),
        answer_format="<answer>{action}</answer>",
        allow_think=True,
    )


@register_codec
class FrozenLakeGridCodec(Codec):
    kind = "frozenlake-grid"

    def __init__(
        self,
        *args,
        map_rows: list[str] | None,
        action_names: list[str] = ACTION_NAMES,
        show_position: bool = True,
        show_grid: bool = True,
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        if map_rows and not all(isinstance(row, str) for row in map_rows):
            raise ValueError(f"map_rows must be rows of S/F/H/G text, got {map_rows!r:.80}")
        # the map the prompts and the Q-table are drawn from passes a --map file's checks (a ragged one played on)
        self.lake = LakeMap("codec", validate_rows(map_rows, "map_rows")) if map_rows else None  # None: per episode
        self.action_names = [a.upper() for a in action_names]
        if len(set(self.action_names)) != len(self.action_names) or not all(a.strip() for a in self.action_names):
            # an answer must name one action: repeated names made every answer invalid at evaluation
            raise ValueError(f"action_names must be distinct, non-empty words, got {action_names!r:.80}")
        # The grid alone differs between states in one token out of ~240; stating the row and column too lets
        # even a tiny from-scratch model learn the policy (measured: 11/11 states memorised in 300 SFT steps
        # with the line, 6/11 and unstable without it).
        self.show_position = show_position
        self.show_grid = show_grid  # False: the map is in the prompt template (the position wording)
        if not (show_grid or show_position):
            raise ValueError("a FrozenLake codec must show the grid, the position or both")
        if self.lake is None and not show_grid:
            raise ValueError(RANDOM_MAPS_NEED_GRID)

    @classmethod
    def for_map(cls, lake: LakeMap, slippery: bool, style: str = "chat", wording: str = "gemma") -> FrozenLakeGridCodec:
        from gymnasium import spaces

        return cls(
            spaces.Discrete(lake.n_states),
            spaces.Discrete(len(ACTION_NAMES)),
            frozenlake_template(slippery, style, wording, lake),
            env_id=ENV_ID,
            env_kwargs={"desc": list(lake.rows), "is_slippery": slippery},
            map_rows=list(lake.rows),
            show_grid=wording != "position",
        )

    @classmethod
    def for_random_maps(cls, size: int, p: float, slippery: bool, style: str = "chat",
                        wording: str = "compact", pool: int | None = None) -> FrozenLakeGridCodec:
        """The codec of :data:`RANDOM_LAKE_ID`: a new ``size`` x ``size`` map each episode, drawn into each prompt."""
        from gymnasium import spaces

        if wording == "position":
            raise ValueError(RANDOM_MAPS_NEED_GRID)
        n = size * size
        return cls(
            spaces.MultiDiscrete([4] * n + [n]),
            spaces.Discrete(len(ACTION_NAMES)),
            frozenlake_template(slippery, style, wording),
            env_id=RANDOM_LAKE_ID,
            env_kwargs={"size": size, "p": p, "is_slippery": slippery, **({"maps": pool} if pool else {})},
            map_rows=None,
        )

    def observed(self, obs) -> tuple[LakeMap, int]:
        """(map, position) of an observation: the codec's map, or the one the observation carries."""
        if self.lake is None:
            return decode_lake(obs)
        return self.lake, int(obs)

    def credit_key(self, obs) -> str:
        """The agent's row and column and the 3x3 cells around it (``#`` beyond the edge): the same key on every map
        where the agent stands at the same place with the same neighbours, so a critic learned from episodes on
        random maps pools them (a map met once leaves too little to value its own states)."""
        lake, state = self.observed(obs)
        row, col = divmod(state, lake.ncol)
        cells = []
        for r in (row - 1, row, row + 1):
            for c in (col - 1, col, col + 1):
                inside = 0 <= r < lake.nrow and 0 <= c < lake.ncol
                cells.append(("F" if lake.rows[r][c] == "S" else lake.rows[r][c]) if inside else "#")
        return f"{row},{col}:{''.join(cells)}"

    def params(self) -> dict[str, Any]:
        return {"map_rows": list(self.lake.rows) if self.lake else None, "action_names": self.action_names,
                "show_position": self.show_position, "show_grid": self.show_grid}

    def describe(self) -> str:
        if self.lake is None:
            return f"{self.kind} (random {self.env_kwargs.get('size', '?')}x{self.env_kwargs.get('size', '?')} maps)"
        return f"{self.kind} ({self.lake.nrow}x{self.lake.ncol})"

    def encode_observation(self, obs) -> str:
        lake, state = self.observed(obs)
        row, col = divmod(state, lake.ncol)
        position = f"You are at row {row}, column {col}."
        if not self.show_grid:
            return position
        grid = render_grid(lake, state)
        return f"{grid}\n{position}" if self.show_position else grid

    def encode_action(self, action) -> str:
        return self.action_names[int(action)]

    def parse_action_text(self, text: str) -> int:
        word = text.strip().strip(".!").strip().upper()
        if word in self.action_names:
            return self.action_names.index(word)
        raise ActionParseError(f"{text!r} is not one of {', '.join(self.action_names)}", text)
