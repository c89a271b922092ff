"""The smallest resolvable difference on literal summaries and turns: the sampling interval
widened by both runs' instrument error."""

from __future__ import annotations

from voicelat.core.base.turn import Turn
from voicelat.core.judge.compare import (
    NOT_RESOLVABLE,
    NOT_SIGNIFICANT,
    REGRESSION,
    Tolerance,
    combined_instrument_ns,
    compare_turns,
    instrument_error_ns,
    resolvable,
)
from voicelat.core.summaries.run_summary import RunSummary

MS = 1_000_000
TIGHT = Tolerance(abs_ms=1, rel_pct=0)


def turns(base_ms: int, n: int = 20) -> list[Turn]:
    # e2e base .. base + 9 ms, alternating: a narrow sample, so a 12 ms shift is significant.
    return [Turn(i, "fx", 0, {}, {"stt": (base_ms + i % 10) * MS}, (base_ms + i % 10) * MS)
            for i in range(n)]  # fmt: skip


def test_instrument_error_is_read_from_the_summary_section() -> None:
    section = {"instrument": {"error_p50_ns": 2 * MS, "error_p99_ns": 6 * MS}}
    assert instrument_error_ns(section) == 6 * MS
    assert instrument_error_ns(RunSummary.from_json({"schema_version": 1, **section})) == 6 * MS
    assert instrument_error_ns({}) is None and instrument_error_ns(None) is None
    assert instrument_error_ns({"instrument": {"error_p99_ns": "x"}}) is None
    assert instrument_error_ns({"instrument": {"error_p99_ns": -1}}) is None
    assert combined_instrument_ns(section, section) == 12 * MS
    assert combined_instrument_ns(section, {}) == 6 * MS
    assert combined_instrument_ns({}, None) is None


def test_resolvable_widens_the_interval_by_the_instrument() -> None:
    assert resolvable(5 * MS, 20 * MS, None) and resolvable(5 * MS, 20 * MS, 4 * MS)
    assert not resolvable(5 * MS, 20 * MS, 5 * MS)
    assert resolvable(-20 * MS, -5 * MS, 4 * MS) and not resolvable(-20 * MS, -5 * MS, 6 * MS)
    assert not resolvable(-1, 1, None)


def test_a_12_ms_shift_is_a_regression_unless_the_instrument_hides_it() -> None:
    base, slow = turns(1000), turns(1012)
    (plain,) = compare_turns(base, slow, tolerance=TIGHT, metrics=("e2e",), percentiles=(50,))
    assert plain.verdict == REGRESSION and plain.instrument_ns is None
    assert plain.resolvable_ns == plain.sampling_ns
    (hidden,) = compare_turns(base, slow, tolerance=TIGHT, metrics=("e2e",), percentiles=(50,),
                              instrument_ns=12 * MS)  # fmt: skip
    assert hidden.verdict == NOT_RESOLVABLE and not hidden.resolvable
    assert hidden.resolvable_ns == hidden.sampling_ns + 12 * MS
    check = hidden.to_check()
    assert check.passed and "not resolvable on this machine" in check.message
    assert "instrument error ±12.0 ms" in hidden.change_text() or "±12 ms" in hidden.change_text()
    # Same runs: not significant by sampling, whatever the instrument.
    (same,) = compare_turns(base, base, metrics=("e2e",), percentiles=(50,), instrument_ns=MS)
    assert same.verdict == NOT_SIGNIFICANT


def test_a_ranking_gap_under_the_instrument_error_is_not_resolvable() -> None:
    from voicelat.core.judge.compare import metric_rows
    from voicelat.core.judge.ranking import CombinationSample, rank_combinations
    from voicelat.report.comparison import vs_cell

    def sample(name: str, base_ms: int, error_ms: float | None) -> CombinationSample:
        rows = metric_rows(turns(base_ms))
        error = None if error_ms is None else error_ms * MS
        return CombinationSample(name, rows, len(rows), 0, instrument_ns=error)

    plain = rank_combinations([sample("a", 1000, None), sample("b", 1012, None)])
    assert plain[1].vs_best[50].text().startswith("+12") and plain[1].vs_best[50].resolvable
    hidden = rank_combinations([sample("a", 1000, 6.0), sample("b", 1012, 6.0)])
    vs = hidden[1].vs_best[50]
    assert vs.significant and not vs.resolvable and vs.instrument_ns == 12 * MS
    assert vs.text() == "not resolvable on this machine"
    doc = hidden[1].to_json()
    assert doc["vs_best"]["p50"]["resolvable"] is False
    assert doc["vs_best"]["p50"]["instrument_ns"] == 12 * MS
    assert vs_cell(doc, 50) == "not resolvable on this machine (+12 ms)"


def test_a_budget_under_the_instrument_error_is_flagged_unenforceable() -> None:
    from voicelat.core.judge.budget import parse_budget
    from voicelat.core.judge.gate import evaluate_gate, gate_text, unenforceable_notes

    budget = parse_budget({"min_turns": 1, "e2e": {"p50_ms": 5, "p90_ms": 2000}}, source="b")
    calibrated = {"schema_version": 1, "instrument": {"error_p50_ns": MS, "error_p99_ns": 6 * MS}}
    (note,) = unenforceable_notes(budget, calibrated)
    assert note.startswith("budget e2e P50 limit 5 ms is within this run's instrument error")
    assert "±6.0 ms P99" in note and "unenforceable" in note
    # Uncalibrated, or every limit above the error bar: no note.
    assert unenforceable_notes(budget, {"schema_version": 1}) == []
    roomy = parse_budget({"e2e": {"p50_ms": 7}}, source="b")
    assert unenforceable_notes(roomy, calibrated) == []
    # The gate carries it in its notes (text and gate.json) without changing its verdict.
    rows = turns(1000)
    summary = RunSummary.from_json({**calibrated, "counts": {"turns": 20, "headline": 20}})
    result = evaluate_gate(summary, rows, budget)
    assert note in result.notes and note in result.to_json()["notes"]
    assert f"note: {note}" in gate_text(result)
    assert not result.passed  # e2e P50 ~1004 ms breaks the 5 ms line: still a failure
