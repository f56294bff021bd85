"""Episodic GRPO with complete answer groups (``rlft train grpo --rollout episode --credit answers``).

What the episodes are for here: experience. Each step the model plays whole episodes in the real environment (as
``--rollout episode`` always does, :class:`rlft.train.grpo.episodes.EpisodeRollout`), every transition goes into the
empirical model of the environment (:class:`rlft.train.grpo.credit.ExperienceModel`), and value iteration on it gives
``Q(s, a)`` for every answer tried at every observation: the return, propagated back to each step that can lead to
it. The training samples are then the states those episodes visited, each as one GRPO group holding **every** valid
answer (:class:`rlft.train.grpo.sampling.ActionSetRollout`), scored by the critic's Q (the ``q-advantage`` reward of
step GRPO, on learned values instead of exact ones). Nothing but the environment's rewards informs it.

Why (docs/results.md, row 9a's notes): with the model's step credit added to sampled episodes (``--credit model``)
the critic learned the lake but the LLM collapsed onto one answer everywhere within 10-30 steps. A sampled episode
shows one answer per visit, so once the shared weights lean, a state visited with one answer only has that answer
as its own baseline and is never turned. A complete group compares every answer of the state at every step,
whatever the policy samples; that is what step GRPO with exact Q needs to reach the optimal policy (rows 2c, 3d).

An answer never tried at a visited observation has no estimate; it is scored as the best answer tried there
(optimism: the policy is pushed to try it, and its first outcomes correct the estimate; without it an untried
answer would sit at the group's bottom for ever, whatever it is worth).

A visited state is prompted as the codec prompts it (the observation alone, unless the dataset was serialized with
``--turns``: then the episode so far, from the occurrence drawn), which is also how evaluation prompts the trained
model; the episodes themselves are played the same way. One occurrence is drawn at random per state, and the states
of a step uniformly among the distinct observations its episodes visited, so a start position that every episode
passes through weighs as much as a rarely reached one near the goal.

Measured first with every turn's prompt being the whole episode so far (the conversation format of ``--credit
model``; FrozenLake 4x4, seed 0): 75 steps left the greedy decisions where they started (4 of 11 positions right,
success of the training episodes 0-2%), each state being shown to the model after a different history every time.
"""

from __future__ import annotations

import numpy as np

from rlft.core.errors import InvalidInputError
from rlft.policy.action_scores import ActionChoices
from rlft.train.grpo.action_targets import action_set_trainer_class
from rlft.train.grpo.credit import action_key
from rlft.train.grpo.episodes import Episode, EpisodeRollout
from rlft.train.grpo.episodic import EpisodicGRPO
from rlft.train.grpo.rewards import QAdvantageReward
from rlft.train.grpo.sampling import ActionSetRollout


class CriticReward(QAdvantageReward):
    """``q-advantage`` (normalized Q of the answer, a bonus for the best) on the critic's values: the rows that
    :class:`EpisodeAnswerRollout` builds carry them as ``q_values``."""

    name = "critic-q"


def answer_values(q: dict[tuple[str, str, str], float], task: str, observation: str, actions: list) -> list[float]:
    """The critic's ``Q`` of each valid answer at ``(task, observation)``; an answer never tried there gets the best
    value tried (optimism), and all get 0 where none was tried."""
    values = [q.get((task, observation, action_key(a))) for a in actions]
    known = [v for v in values if v is not None]
    best = max(known) if known else 0.0
    return [best if v is None else float(v) for v in values]


class EpisodeAnswerRollout(ActionSetRollout):
    """Plays the batch's episodes, learns the critic, and turns the rows into visited states (:meth:`states`);
    TRL then samples through :class:`ActionSetRollout`: every valid answer of each state."""

    def __init__(self, player: EpisodeRollout, choices: ActionChoices, num_generations: int, seed: int):
        super().__init__(choices, num_generations)
        self.player = player
        self.rng = np.random.default_rng(seed)

    # what the run's metrics read of an episodic rollout
    @property
    def episodes(self) -> int:
        return self.player.episodes

    @property
    def retokenized(self) -> int:
        return self.player.retokenized

    def states(self, trainer, rows: list[dict]) -> list[dict]:
        """``rows`` (TRL's batch: each reset seed ``num_generations`` times) -> as many rows, one visited state per
        group of ``num_generations``, each with the critic's ``q_values`` of every answer."""
        player = self.player
        episodes, seconds = player.play_rows(trainer, rows)
        self.seconds += seconds  # the run's rollout share: playing and enumerating answers
        q = player.remember(episodes)
        groups = len(rows) // self.num_generations
        picked = self.pick(episodes, groups)
        out = []
        for (i, t), row in zip(picked, rows[:: self.num_generations], strict=True):
            e = episodes[i]
            prompt = player.template.build_conversation(list(zip(e.users[:t], e.answers[:t], strict=True)),
                                                        e.observations[t])
            values = answer_values(q, player.task(e), e.keys[t], self.choices.actions)
            out += [{**row, "prompt": prompt, "q_values": values}] * self.num_generations
        metrics = trainer._metrics["train" if trainer.model.training else "eval"]
        visited = {(e.first_prompt, o) for e in episodes for o in e.observations}
        metrics["credit/state_groups"].append(float(len(visited)))
        metrics["credit/model_states"].append(float(len({k[:2] for k in q})))
        starts = [max(answer_values(q, player.task(e), e.keys[0], self.choices.actions))
                  for e in episodes if e.keys]
        metrics["credit/start_value"].append(float(np.mean(starts)) if starts else 0.0)
        return out

    def pick(self, episodes: list[Episode], groups: int) -> list[tuple[int, int]]:
        """``groups`` (episode, turn) occurrences: distinct observations drawn uniformly without replacement (again
        from the top when the batch visited fewer), each at one of its turns drawn at random."""
        where: dict[tuple[str, str], list[tuple[int, int]]] = {}
        for i, e in enumerate(episodes):
            for t, obs in enumerate(e.observations[: len(e.answers)]):
                where.setdefault((e.first_prompt, obs), []).append((i, t))
        states = list(where)
        if not states:
            raise RuntimeError("--credit answers: the batch's episodes answered no observation")
        out: list[tuple[int, int]] = []
        while len(out) < groups:
            for k in self.rng.permutation(len(states))[: groups - len(out)]:
                turns = where[states[int(k)]]
                out.append(turns[int(self.rng.integers(len(turns)))])
        return out

    def close(self) -> None:
        self.player.close()


def episode_answers_trainer_class(rollout: EpisodeAnswerRollout, advantage: str, temperature: float):
    """TRL's ``GRPOTrainer`` for ``--group actions`` (:func:`rlft.train.grpo.action_targets.action_set_trainer_class`)
    whose batch rows are replaced, each step, by the states the model's own episodes visited."""
    from trl import GRPOTrainer

    base = action_set_trainer_class(GRPOTrainer, rollout.choices, advantage, temperature)

    class EpisodeAnswersTrainer(base):
        def _generate_and_score_completions(self, inputs):
            return super()._generate_and_score_completions(rollout.states(self, inputs))

    return EpisodeAnswersTrainer


class EpisodeAnswersGRPO(EpisodicGRPO):
    """``--rollout episode --credit answers`` (module doc): episodes for experience, then every valid answer of each
    visited state in one group, scored by the Q that value iteration on the experience gives."""

    name = "episode-answers"
    conversation = False  # a visited state is prompted as the codec prompts it, as evaluation does

    def episode_rewards(self, names: list[str]) -> list:
        if names != ["return"]:
            raise InvalidInputError(f"--credit answers scores each answer by the return it leads to (the critic's "
                                    f"Q): --reward return, not {','.join(names)}",
                                    hint="every answer of its groups is valid, so a format reward carries nothing")
        return [CriticReward(self.inputs.codec, bonus=self.config.q_bonus)]

    def rollout(self, inputs, model, tokenizer):
        episodes = super().rollout(inputs, model, tokenizer)
        return EpisodeAnswerRollout(episodes, ActionChoices(inputs.codec, tokenizer, model),
                                    self.config.num_generations, self.config.seed)

    def trainer_class(self, rollout):
        return episode_answers_trainer_class(rollout, self.config.advantage, self.config.target_temperature)

    def record(self) -> dict:
        return {**super().record(), "advantage": self.config.advantage,
                "target_temperature": self.config.target_temperature}
