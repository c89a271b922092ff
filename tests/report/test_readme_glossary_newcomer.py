"""The README's glossary (Pipecat's and LiveKit's words in voicelat's terms) names real figures.

Every backticked name in its "closest voicelat figure" column must be a segment, a figure of a
recorded turn (less its ``_ns``), a network span or e2e: a renamed figure breaks this test
instead of leaving the glossary pointing at nothing.
"""

from __future__ import annotations

import json
import re

from tests.helpers import ROOT
from voicelat.core.base.contract import SEGMENTS

SAVED_TURN = ROOT / "tests" / "tui" / "data" / "run" / "turns.jsonl"


def _glossary_rows() -> list[list[str]]:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Glossary") :]
    section = section[: section.index("\n## ", 1)]
    rows = [ln for ln in section.splitlines() if ln.startswith("| ") and "---" not in ln]
    return [[c.strip() for c in row.strip("|").split(" | ")] for row in rows[1:]]


def test_the_glossary_maps_pipecat_and_livekit_metrics_to_real_figures() -> None:
    turn = json.loads(SAVED_TURN.read_text().splitlines()[0])
    known = {*SEGMENTS, "e2e", *(f.removesuffix("_ns") for f in turn["figures"])}
    known |= {s["name"] for s in turn["spans"]}
    rows = _glossary_rows()
    theirs = " ".join(r[0] for r in rows)
    for term in (
        "Pipecat",
        "TTFB",
        "processing",
        "user-bot latency",
        "LiveKit",
        "end_of_utterance_delay",
        "transcription_delay",
        "ttft",
    ):
        assert term in theirs, term
    for row in rows:
        names = re.findall(r"`([a-z0-9_]+)`", row[1])
        assert names, row
        for name in names:
            assert name in known, f"README glossary names `{name}`, which voicelat does not record"
