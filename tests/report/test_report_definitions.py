"""report.html's "Every public definition" section and the text of ``--definitions``, on the
saved realtime and cascade runs (tests/export/data/kinds)."""

from __future__ import annotations

from pathlib import Path

from voicelat.core.judge.definitions import DEFINITIONS, compute_definitions
from voicelat.files.results import load_run
from voicelat.report.definitions import definitions_text, instrument_line
from voicelat.report.run_html import run_html

RUNS = Path(__file__).resolve().parents[1] / "export" / "data" / "kinds"


def _page(kind: str) -> str:
    run = load_run(RUNS / kind)
    assert run.run_summary is not None
    return run_html(run.run_summary, run.turns, str(run.path))


def test_report_html_has_a_row_per_definition() -> None:
    page = _page("realtime")
    section = page[page.index("<h2>Every public definition</h2>") : page.index("<h2>Per fixture")]
    assert section.count("<tr><td>") == len(DEFINITIONS)
    for d in DEFINITIONS:
        assert d.who.replace("'", "&#x27;").replace('"', "&quot;") in section, d.key
    # A realtime run: what needs the cascade's STT says why, in the row.
    assert "not computable: a realtime model gives no final transcript" in section
    assert "first_audio − speech_end" in section


def test_instrument_error_is_shown_when_the_summary_has_it() -> None:
    run = load_run(RUNS / "cascade")
    results = compute_definitions(run.turns)
    assert "instrument error" not in definitions_text(results)
    section = {"error_p50_ns": 1_200_000, "error_p99_ns": 3_400_000}
    text = definitions_text(results, instrument=section)
    assert "P50 ±1.2 ms, P99 ±3.4 ms" in text
    assert instrument_line({"error_p50_ns": "x"}) is None
