"""Trust looks at server starvation and says what it judged (issue 18)."""

from __future__ import annotations

from dataclasses import replace

from tests.tui.helpers import make_turn
from voicelat.core.summaries.diagnostics import assess_trust
from voicelat.core.summaries.summary import summarize
from voicelat.report.text import summary_table

MS = 1_000_000


def _turns(gap_max_ms: dict[int, float]) -> list:
    out = []
    for i in range(10):
        t = make_turn(i)
        figures = {
            **t.figures,
            "llm_chunk_gap_p50_ns": 15 * MS,
            "llm_chunk_gap_max_ns": int(gap_max_ms.get(i, 30) * MS),
        }
        out.append(replace(t, figures=figures))
    return out


def test_turns_whose_server_stalled_far_beyond_the_runs_median_are_named() -> None:
    trust = assess_trust(_turns({3: 2500, 7: 1800}), [300_000] * 50)
    assert not trust["trustworthy"]
    (reason,) = trust["reasons"]
    assert reason["code"] == "server_starved"
    assert "#3, #7" in reason["message"] and "2500.0 ms" in reason["message"]
    assert trust["checks"]["llm_starved_turns"] == 2
    assert trust["checks"]["llm_chunk_gap_median_ns"] == 15 * MS


def test_ordinary_gaps_and_a_slow_but_steady_model_pass() -> None:
    assert assess_trust(_turns({}), [300_000] * 50)["trustworthy"]
    # 200 ms is 13x the median but under the 250 ms floor: a slow token, not a stall.
    assert assess_trust(_turns({4: 200}), [300_000] * 50)["trustworthy"]


def test_a_passing_trust_line_says_what_it_judged() -> None:
    turns = _turns({})
    summary = summarize(
        turns, run={}, pipeline={}, fixtures=[], stages={}, loop_lag_ns=[2 * MS] * 100
    )
    text = summary_table(summary)
    line = next(ln for ln in text.splitlines() if ln.startswith("trust: ok"))
    assert "event-loop lag P99 2.0 ms <= 5 ms" in line
    assert "pacer late on 0 turn(s)" in line
    assert "15.0 ms" in line  # the median chunk gap the stall check held turns against
    lag = next(ln for ln in text.splitlines() if ln.startswith("event-loop lag"))
    assert ", P99 2 ms," in lag  # the percentile trust judges is printed
