"""The demo's verdict: an LLM matches the optimal policy with every decision optimal and a success rate within
the noise of the optimal policy's on the same episodes (else of the exact optimal rate)."""

from __future__ import annotations

import pytest

from rlft.evaluate.verdict import noise_tolerance, verdicts


def _report(kind: str, success: float, agreement: float | None = 1.0, seed: int = 0, episodes: int = 100) -> dict:
    return {"policy_kind": kind, "success_rate": success, "expert_agreement": agreement, "seed": seed,
            "episodes": episodes, "optimal_success_exact": 0.74}


def test_two_standard_errors_of_the_exact_rate():
    assert noise_tolerance(0.74, 100) == pytest.approx(2 * (0.74 * 0.26 / 100) ** 0.5)


def test_unlucky_episodes_shared_with_q_greedy_still_match():
    # seed 3 of the demo: both policies scored 0.63 on the same episodes, 2.5 standard errors under 0.740
    alone, = verdicts([("llm", _report("llm", 0.63))])
    assert not alone.matched  # against the exact rate only, these episodes look like a miss
    paired, = verdicts([("llm", _report("llm", 0.63)), ("q", _report("q-greedy", 0.63))])
    assert paired.matched and paired.reference == 0.63
    assert "0.630 for q-greedy on the same episodes" in paired.line() and "MATCHES" in paired.line()


@pytest.mark.parametrize("llm,greedy,agreement,matched", [
    (0.75, 0.75, 1.0, True),
    (0.75, 0.75, 0.99, False),  # one non-optimal decision is not the optimal policy
    (0.55, 0.75, 1.0, False),  # beyond the noise of the same episodes
    (0.70, 0.75, 1.0, True),  # a tied action taken differently: within noise
])
def test_verdict_needs_every_decision_optimal_and_success_within_noise(llm, greedy, agreement, matched):
    verdict, = verdicts([("llm", _report("llm", llm, agreement)), ("q", _report("q-greedy", greedy))])
    assert verdict.matched is matched
    assert ("does NOT match" in verdict.line()) is not matched


def test_only_llm_reports_with_frozenlake_agreement_get_a_verdict():
    other_seed = _report("q-greedy", 0.1, seed=5)
    found = verdicts([("q", _report("q-greedy", 0.74)), ("r", _report("random", 0.01, 0.2)),
                      ("cartpole", {**_report("llm", 0.0), "optimal_success_exact": None}),
                      ("llm", _report("llm", 0.74)), ("q5", other_seed)])
    assert [v.name for v in found] == ["llm"] and found[0].same_episodes_optimal == 0.74
