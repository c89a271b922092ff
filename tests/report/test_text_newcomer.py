"""The text summary's "from the endpoint" figure, at P50 and at P90 (issue 18)."""

from __future__ import annotations

import re

from tests.tui.helpers import make_turn
from voicelat.core.summary import summarize
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
