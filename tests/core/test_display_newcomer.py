"""No "-0 ms [-0, -0]": zero has no sign, sub-10 ms differences keep a decimal (issue 18)."""

from __future__ import annotations

from voicelat.core.base.display import fmt_ms
from voicelat.core.base.stats import Interval
from voicelat.core.judge.compare import Comparison

MS = 1_000_000


def test_a_rounded_zero_prints_without_a_minus() -> None:
    assert fmt_ms(-300_000) == "0"
    assert fmt_ms(-300_000, sign=True) == "+0"
    assert fmt_ms(-40_000, sign=True, decimals=1) == "+0.0"
    assert fmt_ms(-600_000, sign=True) == "-1"  # a real negative keeps its sign
    assert fmt_ms(-2 * MS) == "-2"


def test_a_sub_millisecond_change_is_printed_with_a_decimal() -> None:
    change = Comparison(
        metric="handoff",
        percentile=50,
        baseline_ns=1.2 * MS,
        current_ns=1.0 * MS,
        n_baseline=14,
        n_current=14,
        interval=Interval(-0.2 * MS, -0.3 * MS, -0.1 * MS, 0.95),
        tolerance_ns=20 * MS,
        verdict="within tolerance",
    )
    assert change.change_text() == "-0.2 ms [-0.3, -0.1] 1.20x faster"
