"""The rewards of episodic GRPO (``--rollout episode``): the episode's return and the share of valid answers, read from
what the rollout played."""

from __future__ import annotations

from rlft.codecs.base import Codec
from rlft.core.errors import InvalidInputError
from rlft.train.grpo.reward_base import parse_names
from rlft.train.grpo.rewards import step_bounds

EPISODE_REWARDS = ("return", "format")


class EpisodeReward:
    """A reward read from what the rollout played (TRL passes the rollout's extra fields to reward functions)."""

    def __init__(self, name: str, key: str, low: float, high: float):
        self.name = self.__name__ = name
        self.key, self.low, self.high = key, low, high

    def __call__(self, prompts=None, completions=None, completion_ids=None, **kwargs) -> list[float]:
        values = kwargs.get(self.key)
        if values is None:
            raise RuntimeError(f"reward {self.name!r} needs the episode rollout (--rollout episode)")
        return [float(v) for v in values]


def parse_episode_reward_names(text: str | list[str]) -> list[str]:
    """``"return,format"`` -> the names, refused unless they are episode rewards and include ``return``."""
    names = parse_names(text, EPISODE_REWARDS, "--rollout episode: ")
    if "return" not in names:
        raise InvalidInputError("--rollout episode needs the 'return' reward (e.g. --reward return,format)")
    return names


def episode_rewards(names: list[str], codec: Codec, max_turns: int) -> list[EpisodeReward]:
    """The rewards of episodic GRPO: ``return`` (the episode's return) and ``format`` (share of valid answers)."""
    names = parse_episode_reward_names(names)
    lo, hi = step_bounds(codec.env_id)
    out = []
    for name in names:
        if name == "return":
            out.append(EpisodeReward("return", "episode_return", min(lo, max_turns * lo), max(hi, max_turns * hi)))
        else:
            out.append(EpisodeReward("format", "episode_valid", 0.0, 1.0))
    return out
