"""The text summary's "from the endpoint" figure, at P50 and at P90 (issue 18)."""

from __future__ import annotations

import re
from dataclasses import replace

from tests.tui.helpers import make_turn
from voicelat.core.summaries.summary import summarize
from voicelat.report.text import summary_table


def test_from_the_endpoint_is_shown_for_the_p50_and_the_p90_band() -> None:
    # e2e = 500 endpointing + 60 + 100*i ms: from the endpoint a turn takes 60 + 100*i ms.
    turns = [make_turn(i, {"endpointing": 500, "llm_ttft": 100 * i}) for i in range(1, 11)]
    text = summary_table(summarize(turns, run={}, pipeline={}, fixtures=[], stages={}))
    line = next(ln for ln in text.splitlines() if ln.startswith("e2e P50"))
    m = re.search(r"; from the endpoint: P50 band (\d+) ms, P90 band (\d+) ms$", line)
    assert m, line
    p50, p90 = int(m.group(1)), int(m.group(2))
    assert p50 in (560, 660)  # the turn(s) around the median
    assert p90 in (960, 1060)  # ... and around the 90th percentile


def test_a_run_with_no_headline_turn_says_why() -> None:
    # `voicelat run -n 1 -w 0`: the only turn opens the connections, so it is cold.
    cold = [make_turn(0, cold=True, cold_stages=("tts",))]
    text = summary_table(summarize(cold, run={}, pipeline={}, fixtures=[], stages={}))
    assert "no turn in the headline" in text and "--warmup 1" in text
    warm = [make_turn(0), make_turn(1)]
    text = summary_table(summarize(warm, run={}, pipeline={}, fixtures=[], stages={}))
    assert "no turn in the headline" not in text


def _with_lag(lag_ms: float, concurrency: int) -> str:
    turns = []
    for i in range(6):
        t = make_turn(i)
        figures = {
            **t.figures,
            "intended_start_ns": -int(lag_ms * 1e6),
            "schedule_lag_ns": int(lag_ms * 1e6),
        }
        turns.append(replace(t, figures=figures))
    run = {"load": {"mode": "closed", "concurrency": concurrency}}
    return summary_table(summarize(turns, run=run, pipeline={}, fixtures=[], stages={}))


def test_the_coordinated_omission_line_is_for_load_not_one_session() -> None:
    line = "e2e from the intended start"
    assert line not in _with_lag(5, concurrency=1)  # a single session's 3-5 ms gaps
    assert line in _with_lag(5, concurrency=4)  # sessions that can fall behind
    assert line in _with_lag(50, concurrency=1)  # a stall is still shown
