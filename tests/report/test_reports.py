"""JUnit XML and Markdown of a gate verdict, parsed back; the plain-text verdict and waterfall."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from voicelat.core.base.contract import SEGMENTS
from voicelat.core.base.turn import Turn
from voicelat.core.judge.budget import parse_budget
from voicelat.core.judge.gate import GateResult, evaluate_gate, gate_text, waterfall_lines
from voicelat.core.summaries.summary import build_summary
from voicelat.report.junit import junit_error_xml, junit_xml
from voicelat.report.markdown import markdown_error, markdown_report

MS = 1_000_000


def turns(shift_ms: int = 0, n: int = 10) -> list[Turn]:
    out = [Turn(0, "f0", 0, {}, {s: 900 * MS for s in SEGMENTS}, 8 * 900 * MS, warmup=True)]
    for i in range(1, n + 1):
        seg = {s: (10 + i) * MS for s in SEGMENTS}
        seg["endpointing"] = 500 * MS
        seg["stt"] = (300 + 7 * i + shift_ms) * MS
        out.append(Turn(i, f"f{i % 3}", 0, {}, seg, sum(seg.values())))
    return out


def summary_of(ts: list[Turn]) -> dict[str, Any]:
    s = build_summary(
        ts,
        run={"duration_s": 12.5},
        pipeline={"name": "local", "sha256": "ab" * 32},
        fixtures=[],
        stages={},
    )
    return s | {"fixture_set_sha256": "cd" * 32}


def gate(budget: dict[str, Any], *, shift_ms: int | None = None) -> GateResult:
    ts = turns(shift_ms or 0)
    base = turns() if shift_ms is not None else None
    return evaluate_gate(
        summary_of(ts),
        ts,
        parse_budget(budget, source="budget.toml"),
        baseline_turns=base,
        baseline=None if base is None else "runs/base",
        run_dir="runs/now",
    )


def cases(xml: str) -> dict[tuple[str, str], ET.Element]:
    root = ET.fromstring(xml)
    return {(c.get("classname", ""), c.get("name", "")): c for c in root.iter("testcase")}


def test_junit_failure_names_segment_percentile_value_and_limit() -> None:
    result = gate({"min_turns": 3, "e2e": {"p50_ms": 1, "p90_ms": 99999}})
    e2e_p50 = result.summary.e2e.p50 / MS
    xml = junit_xml(result)
    root = ET.fromstring(xml)
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("4", "1", "0")
    found = cases(xml)
    assert set(found) == {
        ("voicelat.sample", "min_turns"),
        ("voicelat.budget", "failure rate"),
        ("voicelat.budget", "e2e P50"),
        ("voicelat.budget", "e2e P90"),
    }
    failure = found["voicelat.budget", "e2e P50"].find("failure")
    assert failure is not None
    assert failure.get("type") == "BudgetExceeded"
    assert failure.get("message") == f"e2e P50 {e2e_p50:.0f} ms > limit 1 ms (n=10 warm turns)"
    assert "waterfall at P50" in (failure.text or "")
    assert found["voicelat.budget", "e2e P90"].find("failure") is None
    out = found["voicelat.budget", "e2e P90"].find("system-out")
    assert out is not None and "<= limit 99999 ms" in (out.text or "")
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert suites["voicelat.budget"].get("failures") == "1"
    props = {p.get("name"): p.get("value") for p in suites["voicelat.budget"].iter("property")}
    assert props["pipeline"] == "local"
    assert props["run_dir"] == "runs/now"


def test_junit_has_one_case_per_regression_check() -> None:
    result = gate({"min_turns": 3}, shift_ms=200)
    found = cases(junit_xml(result))
    regression = {name for cls, name in found if cls == "voicelat.regression"}
    assert regression == {f"{m} P{p}" for m in ("e2e", *SEGMENTS) for p in (50, 90)}
    failure = found["voicelat.regression", "stt P50"].find("failure")
    assert failure is not None and failure.get("type") == "Regression"
    message = failure.get("message", "")
    assert message.startswith("stt P50 ")
    assert "regression" in message
    assert found["voicelat.regression", "playout P90"].find("failure") is None


def test_junit_escapes_what_xml_cannot_hold_raw() -> None:
    result = gate({"min_turns": 3})
    result = GateResult(result.checks, result.summary, run_dir='runs/<a & "b">')
    root = ET.fromstring(junit_xml(result))  # parses: & < " were escaped
    assert {p.get("value") for p in root.iter("property")} >= {'runs/<a & "b">'}


def test_junit_error_document_for_infrastructure_failures() -> None:
    root = ET.fromstring(junit_error_xml("every measured turn failed (3); first reason: stt: down"))
    assert (root.get("tests"), root.get("errors"), root.get("failures")) == ("1", "1", "0")
    (error,) = list(root.iter("error"))
    assert error.get("message") == "every measured turn failed (3); first reason: stt: down"


def test_markdown_budget_table_and_verdict() -> None:
    result = gate({"min_turns": 3, "e2e": {"p50_ms": 1, "p90_ms": 99999}})
    md = markdown_report(result)
    assert md.startswith("### voicelat latency gate: ❌ failed (1 check(s))")
    assert "| check | measured | limit | result |" in md
    p50 = round(result.summary.e2e.p50 / MS)
    assert f"| e2e P50 | {p50} ms | ≤ 1 ms | ❌ e2e P50 {p50} ms > limit 1 ms" in md
    assert "| e2e P90 |" in md and "| ≤ 99999 ms | ✅ pass |" in md
    assert "| min_turns | 10 | ≥ 3 | ✅ pass |" in md
    assert "| failure rate | 0.0% | ≤ 0.0% | ✅ pass |" in md
    assert "| endpointing | 500 ms | 500 ms |" in md  # the waterfall table
    assert "Results: `runs/now`" in md


def test_markdown_comparison_prints_not_significant_instead_of_a_ratio() -> None:
    same = markdown_report(gate({"min_turns": 3}, shift_ms=0))
    assert same.startswith("### voicelat latency gate: ✅ passed")
    assert "| e2e P90 |" in same and "| not significant | ✅ |" in same
    assert "x slower" not in same
    slow = markdown_report(gate({"min_turns": 3}, shift_ms=200))
    stt = next(line for line in slow.splitlines() if line.startswith("| stt P50 |"))
    assert "x slower" in stt and stt.endswith("| ❌ regression |")


def test_markdown_escapes_pipes_and_reports_errors() -> None:
    result = gate({"min_turns": 3})
    md = markdown_report(GateResult(result.checks, result.summary, notes=("a | b",)))
    assert "> a \\| b" in md
    assert markdown_error("stack down").startswith("### voicelat latency gate: 💥 could not run")


def test_gate_text_lists_every_check_and_sums_up_failures() -> None:
    text = gate_text(gate({"min_turns": 30, "e2e": {"p50_ms": 1}}))
    lines = text.splitlines()
    assert lines[0].startswith("gate: e2e P50 ")
    assert "  FAIL  sample too small: 10 warm turns < min_turns 30; run more turns" in text
    assert lines[-1].startswith("GATE FAILED: 2 of 3 checks failed: sample too small")
    passed = gate_text(gate({"min_turns": 3}, shift_ms=0))
    assert passed.splitlines()[-1] == "GATE PASSED: 20 checks"
    assert "vs baseline runs/base (95% CI, tolerance 20 ms / 10 %):" in passed


def test_waterfall_lines_show_each_band_in_contract_order() -> None:
    s = summary_of(turns())
    lines = waterfall_lines(s, width=40)
    assert lines[0].startswith("waterfall at P50: mean of 1 turn(s) around it = ")
    assert [ln.split()[0] for ln in lines[1:9]] == list(SEGMENTS)
    # The longest bar belongs to the largest segment (endpointing, 500 of ~1000 ms).
    bars = {ln.split()[0]: ln.count("#") for ln in lines[1:9]}
    assert max(bars, key=lambda k: bars[k]) == "endpointing"
    assert 15 <= bars["endpointing"] <= 25
    assert any(ln.startswith("waterfall at P90") for ln in lines)
