"""``rlft train grpo`` settings (TRL style: one dataclass, each field documented by its ``help``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from rlft.core.options import MAX_EPISODE_STEPS, MAX_EPISODES
from rlft.train.configs import StageConfig
from rlft.train.trl_config import MAX_ACCUMULATION, MAX_BATCH, MAX_LEARNING_RATE, MAX_TRAIN_STEPS, TrlDefault

# The values of the choice settings (checked when a config is made: rlft.train.configs.check_bounds)
ROLLOUTS = ("step", "episode")
GROUPS = ("auto", "sampled", "actions")
ADVANTAGES = ("group", "target")
CREDITS = ("episode", "state", "action", "model", "answers")  # answers: rlft.train.grpo.episode_answers
CREDIT_KEYS = ("observation", "local")
SCALE_REWARDS = ("group", "batch", "none")
VLLM_MODES = ("colocate", "server")
# TRL's GRPO losses (the same in trl 1.0, rlft's minimum, and 1.16): another name was a ValueError at step 1
LOSS_TYPES = ("grpo", "dapo", "dr_grpo", "bnpo", "cispo", "sapo", "luspo", "vespo")


@dataclass
class GRPOStageConfig(StageConfig):
    """GRPO with the codec-driven control rewards of :mod:`rlft.train.grpo.rewards`."""

    trl_config_class: ClassVar[str] = "GRPOConfig"
    trl_defaults: ClassVar[dict[str, TrlDefault]] = {
        **StageConfig.trl_defaults,
        "reward_weights": TrlDefault(None, "One weight per reward (default 1).", type=list[float] | None),
        "learning_rate": TrlDefault(None, "Peak learning rate (default: 3e-4 for models under 20M parameters, i.e. "
                                          "trained from scratch here; 1e-5 for pretrained ones).", type=float | None,
                                    min=0.0, max=MAX_LEARNING_RATE),
        "max_steps": TrlDefault(500, "Optimizer steps (-1: num_train_epochs passes over the prompts; one pass over a "
                                     "small dataset such as FrozenLake's 11 decision states is a handful of steps).",
                                min=-1, max=MAX_TRAIN_STEPS),
        "num_generations": TrlDefault(4, "Completions sampled per prompt (>= 2).", min=2, max=MAX_BATCH),
        "max_completion_length": TrlDefault(32, "Longest generated completion, in tokens.", min=1, max=1_000_000),
        "temperature": TrlDefault(1.0, "Sampling temperature.", min=0.0, max=100.0),
        "top_p": TrlDefault(1.0, "Nucleus sampling.", min=0.0, max=1.0),
        "beta": TrlDefault(None, "KL coefficient against the reference (start) model (0: none; default: 0.05 for "
                                 "continuous actions, a trust region around the start, 0 for discrete ones).",
                           type=float | None, min=0.0),
        "epsilon": TrlDefault(0.2, "Clipping range of the policy ratio.", min=0.0, max=10.0),
        "num_iterations": TrlDefault(1, "Optimisation passes per generated batch.", min=1, max=MAX_ACCUMULATION),
        "scale_rewards": TrlDefault("group", "Advantage scaling: group, batch or none.", choices=SCALE_REWARDS),
        "loss_type": TrlDefault("dapo", "TRL's GRPO loss.", choices=LOSS_TYPES),
        # an episode's last answer need not end in EOS: rlft turns it off for episode rollouts
        "mask_truncated_completions": TrlDefault(False, "Exclude completions cut at max_completion_length from the "
                                                        "loss.", resolved=True),
        "log_completions": TrlDefault(False, "Print sampled completions at each log."),
        "use_vllm": TrlDefault(False, "Generate with vLLM (GPU; needs the vllm package)."),
        "vllm_mode": TrlDefault("colocate", "vLLM mode: colocate or server.", choices=VLLM_MODES),
        "vllm_gpu_memory_utilization": TrlDefault(0.3, "vLLM colocate GPU memory share.", min=0.0, max=1.0),
    }

    rewards: list[str] = field(
        default_factory=lambda: ["auto"],
        metadata={"help": "Reward names: format, bc, q-advantage, env (see rlft.train.grpo.rewards); auto: format + "
                          "q-advantage on a dataset with Q-values, format + bc on one with recorded actions, return "
                          "for episode rollouts.", "aliases": ["--reward"]},
    )
    group: str = field(
        default="auto",
        metadata={"help": "How a state's group of completions is made: sampled (num_generations samples), actions "
                          "(every valid answer of a small discrete action space equally often: all actions compared "
                          "at every step, no sampling noise; see rlft.train.grpo.sampling), auto (actions for step "
                          "rollouts over discrete actions when num_generations is a multiple of their number).",
                  "choices": GROUPS},
    )
    advantage: str = field(
        default="group",
        metadata={"help": "With --group actions: group (TRL's: each answer's reward against the group's mean, over its "
                          "spread: every answer of every state pushed at a steady rate) or target (each answer's "
                          "probability moved toward the greedy policy of the group's rewards, ties shared: target(a) "
                          "- pi(a), a step that is zero once a state is right; see rlft.train.grpo.action_targets).",
                  "choices": ADVANTAGES},
    )
    target_temperature: float = field(
        default=0.0, metadata={"help": "--advantage target: 0 is greedy (the best answers share the target); above 0, "
                                       "a softmax of the group's standardized rewards at this temperature.",
                               "min": 0.0, "needs": "target"},
    )
    stall_steps: int = field(
        default=20,
        metadata={"help": "Warn, naming the fix, when this many steps in a row had no group with differing rewards "
                          "(TRL's frac_reward_zero_std = 1: no learning signal at all); 0: never.", "min": 0},
    )
    q_bonus: float = field(default=0.1, metadata={"help": "q-advantage: bonus of an optimal action.",
                                                  "needs": "q bonus"})
    critic: str | None = field(default=None, metadata={"help": "critic reward: an rlft train offline RUN on this "
                                                               "dataset whose Q(s, a) scores each answer.",
                                                       "needs": "critic"})
    env_horizon: int = field(default=1, metadata={"help": "env reward: steps rolled out (1: the action only).",
                                                  "needs": "env", "min": 1, "max": MAX_EPISODE_STEPS})
    env_policy: str = field(default="repeat", metadata={
        "help": "env reward lookahead policy: repeat, random or an SB3 checkpoint (.zip, the expert's Q).",
        "needs": "env"})
    env_gamma: float = field(default=1.0, metadata={"help": "env reward: discount of the lookahead steps.",
                                                    "needs": "env", "min": 0.0, "max": 1.0})
    env_samples: int = field(default=1, metadata={"help": "env reward: seeded rollouts averaged per completion.",
                                                  "needs": "env", "min": 1, "max": 10_000})
    rollout: str = field(
        default="step",
        metadata={"help": "step: one answer per recorded state, scored by the rewards; episode: whole episodes "
                          "played in the environment, rewarded by their return (see rlft.train.grpo.episodes).",
                  "choices": ROLLOUTS},
    )
    max_turns: int = field(default=16, metadata={"help": "episode rollout: turns (actions) per episode at most.",
                                                 "min": 1, "max": MAX_EPISODE_STEPS, "needs": "episodic"})
    episode_starts: int = field(default=64, metadata={"help": "episode rollout: distinct reset seeds to train on.",
                                                      "min": 1, "max": MAX_EPISODES, "needs": "episodic"})
    credit: str = field(
        default="episode",
        metadata={"help": "episode rollout: episode (every answer gets its episode's GRPO advantage), state (GiGPO: "
                          "plus a step advantage, the turn's discounted return-to-go against the other turns that "
                          "answered the same observation in episodes of the same start) or action (plus the "
                          "Monte-Carlo Q(s, a) - V(s) of the turn's observation and action over the last "
                          "--credit-window steps: a signal for every turn when returns are sparse) or model "
                          "(plus (Q(s, a) - V(s)) / spread, Q by value iteration on every transition played "
                          "so far: for observations that repeat exactly; see rlft.train.grpo.credit) or answers (the "
                          "episodes only gather experience for that model: each visited state is trained as one "
                          "group of every valid answer, scored by its Q; see rlft.train.grpo.episode_answers).",
                  "choices": CREDITS},
    )
    credit_gamma: float = field(default=0.95, metadata={"help": "--credit state|action|model|answers: discount of the "
                                                                 "return-to-go.", "min": 0.0, "max": 1.0,
                                                                 "needs": "credit"})
    step_weight: float = field(default=1.0, metadata={"help": "--credit state|action|model: weight of the step "
                                                               "advantage.", "min": 0.0, "needs": "step credit"})
    episode_weight: float = field(default=1.0, metadata={"help": "--credit state|action|model: weight of the "
                                                                   "episode's own GRPO advantage (0: the step "
                                                                   "credit alone).", "min": 0.0,
                                                                   "needs": "step credit"})
    credit_window: int = field(default=1, metadata={"help": "--credit action: steps whose turns are pooled into "
                                                             "the estimates (1: this step's only).", "min": 1,
                                                             "needs": "action credit"})
    allow_format_change: bool = field(default=False, metadata={
        "help": "episode rollout: play whole episodes as conversations even when --model was trained on one-step "
                "prompts (refused by default: row 9b's SFT start fell from 24.7 to -1.3 when prompted so).",
        "needs": "episodic"})
    credit_key: str = field(default="observation", metadata={"help": "--credit answers: what the critic's states "
                                                                      "are: observation (the text, within its "
                                                                      "episode's task) or local (the codec's coarser "
                                                                      "key, pooled over tasks: FrozenLake's position "
                                                                      "and 3x3 neighbourhood, for random maps).",
                                                              "choices": CREDIT_KEYS})
    constrained: bool | None = field(
        default=None,
        metadata={"help": "Sample answers within the codec's grammar (default: on for episode rollouts and for "
                          "continuous actions, where an unparsable answer's floor would drown the real actions' "
                          "differences; off for discrete step rollouts, where the format reward teaches the format; "
                          "see rlft.train.grpo.sampling)."},
    )
    env_bounds: list[float] | None = field(
        default=None, metadata={"help": "env reward: per-step reward bounds low,high (default per env).",
                                "needs": "env"}
    )
