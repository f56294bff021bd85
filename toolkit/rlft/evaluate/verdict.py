"""Did the LLM play like the optimal policy? One plain sentence per LLM report of a FrozenLake Q evaluation.

An LLM matches the optimal policy when every decision it took was optimal (agreement 1.0, tied actions
counting) and its success rate is within the noise of the optimal policy's on the same episodes: two binomial
standard errors (of the exact optimal rate, for that many episodes) from the q-greedy report on the same episode
seeds when one is given, else from the exact optimal rate. The optimal policy itself lands outside two standard
errors of its exact rate on about one set of episodes in twenty, which is why the same episodes are preferred.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rich.markup import escape

NOISE_STDERRS = 2.0


@dataclass
class Verdict:
    name: str
    matched: bool
    agreement: float
    success: float
    optimal: float
    tolerance: float
    episodes: int
    same_episodes_optimal: float | None = None  # q-greedy's success on the same seeds, when compared

    @property
    def reference(self) -> float:
        """The success rate the LLM's is held against: q-greedy's on the same episodes, else the exact rate."""
        return self.optimal if self.same_episodes_optimal is None else self.same_episodes_optimal

    def line(self) -> str:
        head = ("[green]MATCHES the optimal policy[/]" if self.matched
                else "[red]does NOT match the optimal policy[/]")
        text = (f"{escape(self.name)}: {head}: agreement {self.agreement:.3f} with the optimal actions; "
                f"success {self.success:.3f}")
        if self.same_episodes_optimal is not None:
            text += f" vs {self.same_episodes_optimal:.3f} for q-greedy on the same episodes"
        return text + (f", exact optimal rate {self.optimal:.3f} (noise of {self.episodes} episodes: "
                       f"+-{self.tolerance:.3f})")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "matched": self.matched, "agreement": self.agreement, "success": self.success,
                "optimal_success_exact": self.optimal, "tolerance": self.tolerance, "episodes": self.episodes,
                "q_greedy_same_episodes": self.same_episodes_optimal, "reference": self.reference}


def noise_tolerance(optimal: float, episodes: int) -> float:
    """Two binomial standard errors of a success rate ``optimal`` measured over ``episodes`` episodes."""
    return NOISE_STDERRS * math.sqrt(max(optimal * (1.0 - optimal), 0.0) / max(episodes, 1))


def verdicts(named_reports: list[tuple[str, dict[str, Any]]]) -> list[Verdict]:
    """A verdict for each LLM report that carries FrozenLake agreement and the exact optimal rate."""
    greedy = {(r.get("seed"), r.get("episodes")): r.get("success_rate") for _, r in named_reports
              if r.get("policy_kind") == "q-greedy"}
    out = []
    for name, report in named_reports:
        optimal, agreement = report.get("optimal_success_exact"), report.get("expert_agreement")
        if report.get("policy_kind") != "llm" or optimal is None or agreement is None:
            continue
        episodes = int(report["episodes"])
        tolerance = noise_tolerance(optimal, episodes)
        success = float(report["success_rate"])
        verdict = Verdict(name, False, float(agreement), success, float(optimal), tolerance, episodes,
                          greedy.get((report.get("seed"), report.get("episodes"))))
        verdict.matched = agreement >= 1.0 - 1e-12 and abs(success - verdict.reference) <= tolerance
        out.append(verdict)
    return out
