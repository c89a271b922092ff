"""The text report says when a long run's percentiles come from histograms, and how exact."""

from __future__ import annotations

import random

from voicelat.core.base.turn import Turn
from voicelat.core.summaries.streaming_summary import SummaryAccumulator
from voicelat.report.text import summary_table

MS = 1_000_000


def _turns(n: int) -> list[Turn]:
    rng = random.Random(1)
    out = []
    for i in range(n):
        segs = {"stt": rng.randint(50, 90) * MS, "llm_ttft": rng.randint(100, 400) * MS}
        out.append(Turn(i, "f", i * 10**9, {}, segs, sum(segs.values())))
    return out


def _table(n: int) -> str:
    acc = SummaryAccumulator.of(_turns(n), exact_cap=100)
    return summary_table(acc.finish(run={}, pipeline={"name": "p"}, fixtures=[], stages={}))


def test_a_histogram_summary_states_its_relative_error() -> None:
    assert "percentiles from histograms past 100 values each: within 0.1% of" in _table(500)


def test_an_exact_summary_says_nothing_about_it() -> None:
    assert "histograms" not in _table(50)
