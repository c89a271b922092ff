"""The gate and the run's own trust section: a latency failure on a machine the run distrusts
is inconclusive when asked (exit 4), a failure otherwise, and always says why (plain integers)."""

from __future__ import annotations

from typing import Any

import pytest

from voicelat.core.base.contract import SEGMENTS
from voicelat.core.base.errors import EXIT_GATE_FAILED, EXIT_GATE_INCONCLUSIVE, EXIT_OK
from voicelat.core.base.turn import Turn
from voicelat.core.judge.budget import Budget, parse_budget
from voicelat.core.judge.gate import MACHINE_TRUST_CODES, evaluate_gate, gate_text
from voicelat.core.summaries.summary import build_summary
from voicelat.report.markdown import markdown_report

MS = 1_000_000
INFLATED = {"code": "machine_inflated", "message": "the machine inflated the figures: stt waited"}
NAGLE = {"code": "nagle_40ms", "message": "llm: first events ~40 ms late (Nagle)"}


def summary(reasons: list[dict[str, str]], *, failed: int = 0) -> dict[str, Any]:
    turns = [Turn(0, "f0", 0, {}, {s: 10 * MS for s in SEGMENTS}, 80 * MS, warmup=True)]
    for i in range(1, 11):
        seg = {s: (10 + i) * MS for s in SEGMENTS}
        turns.append(Turn(i, f"f{i % 3}", 0, {}, seg, sum(seg.values())))
    for i in range(11, 11 + failed):
        turns.append(
            Turn(i, "f1", 0, {}, {}, None, failed=True, failure_stage="stt", failure_reason="x")
        )
    doc = build_summary(turns, run={"status": "complete"}, pipeline={}, fixtures=[], stages={})
    return doc | {"trust": {"trustworthy": not reasons, "reasons": reasons, "checks": {}}}


def budget(p50_ms: float) -> Budget:
    return parse_budget({"min_turns": 3, "e2e": {"p50_ms": p50_ms}})


def test_a_latency_failure_on_a_distrusted_machine_is_inconclusive_when_asked() -> None:
    result = evaluate_gate(summary([INFLATED]), [], budget(1), untrusted="inconclusive")
    assert not result.passed and result.inconclusive and result.verdict == "inconclusive"
    assert result.exit_code == EXIT_GATE_INCONCLUSIVE == 4
    text = gate_text(result).splitlines()
    assert text[-2] == f"distrust: {INFLATED['message']}"
    assert text[-1].startswith("GATE INCONCLUSIVE: 1 of 3 checks failed, each a latency")
    assert "--untrusted fail" in text[-1]
    doc = result.to_json()
    assert doc["verdict"] == "inconclusive" and doc["exit_code"] == 4
    assert doc["distrust"] == [INFLATED]
    assert "⚠️ inconclusive (1 latency check(s)" in markdown_report(result)


def test_by_default_it_is_a_failure_that_names_the_distrust() -> None:
    result = evaluate_gate(summary([INFLATED]), [], budget(1))
    assert result.exit_code == EXIT_GATE_FAILED and result.verdict == "failed"
    text = gate_text(result).splitlines()
    assert text[-2] == f"distrust: {INFLATED['message']}"
    assert text[-1].startswith("GATE FAILED: 1 of 3 checks failed: e2e P50 ")


def test_a_failure_rate_or_a_small_sample_is_never_excused_by_the_machine() -> None:
    # A loaded machine does not make turns fail or vanish without the turn saying so.
    failing = evaluate_gate(summary([INFLATED], failed=2), [], budget(1), untrusted="inconclusive")
    assert [c.name for c in failing.failures] == ["failure rate", "e2e P50"]
    assert failing.exit_code == EXIT_GATE_FAILED and not failing.inconclusive
    small = parse_budget({"min_turns": 50, "e2e": {"p50_ms": 1}})
    short = evaluate_gate(summary([INFLATED]), [], small, untrusted="inconclusive")
    assert short.exit_code == EXIT_GATE_FAILED


def test_only_reasons_that_blame_the_machine_count() -> None:
    # A Nagle hold is the connection's configuration: a rerun gets it again.
    assert "nagle_40ms" not in MACHINE_TRUST_CODES
    result = evaluate_gate(summary([NAGLE]), [], budget(1), untrusted="inconclusive")
    assert result.distrust == [] and result.exit_code == EXIT_GATE_FAILED
    assert "distrust:" not in gate_text(result)
    trusted = evaluate_gate(summary([]), [], budget(1), untrusted="inconclusive")
    assert trusted.exit_code == EXIT_GATE_FAILED


def test_a_pass_stands_on_a_distrusted_machine_and_says_nothing_more() -> None:
    result = evaluate_gate(summary([INFLATED]), [], budget(5000), untrusted="inconclusive")
    assert result.exit_code == EXIT_OK and result.verdict == "passed"
    assert gate_text(result).splitlines()[-1] == "GATE PASSED: 3 checks"


def test_an_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="untrusted must be one of"):
        evaluate_gate(summary([]), [], budget(1), untrusted="ignore")
