"""The sample outputs in README.md and docs/BENCHMARKS.md print the event-loop lag and trust
lines the way ``voicelat run`` prints them today (they showed an older form: lag without its
P99, and a bare "trust: ok" without what was judged)."""

from __future__ import annotations

import re

import pytest

from tests.helpers import ROOT
from voicelat.core.summaries.run_summary import RunSummary
from voicelat.report.text import summary_table

LAG = re.compile(r"event-loop lag P50 \d+ ms, P99 \d+ ms, max \d+ ms \(n=\d+\)")
TRUST_OK = re.compile(
    r"trust: ok \(event-loop lag P99 [\d.]+ ms <= [\d.]+ ms, pacer late on \d+ turn\(s\)"
    r"(, schedule lag P99 \d+ ms)?"
    r"(, no LLM stall over [\d.]+x the median chunk gap \([\d.]+ ms\))?"
    r", transport checks passed\)"
)


def _sample_lines(doc: str) -> list[str]:
    text = (ROOT / doc).read_text(encoding="utf-8")
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text, re.S)
    return [line for b in blocks for line in b.splitlines()]


@pytest.mark.parametrize("doc", ["README.md", "docs/BENCHMARKS.md"])
def test_sample_lag_and_trust_lines_have_todays_form(doc: str) -> None:
    lines = _sample_lines(doc)
    lag = [ln for ln in lines if ln.startswith("event-loop lag ")]
    trust = [ln for ln in lines if ln.lower().startswith("trust: ")]
    assert lag and trust, f"{doc} shows no event-loop lag or trust line"
    for ln in lag:
        assert LAG.fullmatch(ln), f"{doc}: old event-loop lag line {ln!r}"
    for ln in trust:
        if ln.startswith("TRUST"):
            assert ln == "TRUST: these figures may not be reliable:", ln
        else:
            assert TRUST_OK.fullmatch(ln), f"{doc}: old trust line {ln!r}"


def test_the_patterns_are_what_the_summary_table_prints() -> None:
    summary = RunSummary.from_json(
        {
            "counts": {"turns": 2, "headline": 2},
            "loop_lag": {"n": 100, "p50": 300_000, "p99": 2_100_000, "max": 4_000_000},
            "trust": {
                "trustworthy": True,
                "reasons": [],
                "checks": {
                    "loop_lag_p99_ns": 2_100_000,
                    "pacer_lag_late_turns": 0,
                    "llm_chunk_gap_median_ns": 21_500_000,
                    "llm_starved_turns": 0,
                },
                "thresholds": {"loop_lag_p99_ms": 5.0, "starved_gap_factor": 10.0},
            },
        }
    )
    table = summary_table(summary).splitlines()
    assert any(LAG.fullmatch(ln) for ln in table), table
    assert any(TRUST_OK.fullmatch(ln) for ln in table), table
