"""The endpointing reports on hand-made scores: table rows, front marks, picks, the SVG."""

from __future__ import annotations

import re

from voicelat.core.measure.endpointing import Config, ConfigScore
from voicelat.report.endpointing import TradeOff, curve_svg, document, html, markdown

MS = 1_000_000


def _s(name: str, hang: int, p50_ms: int, cut: int) -> ConfigScore:
    return ConfigScore(
        Config(name, -40, hang), 10, p50_ms * MS, (p50_ms + 9) * MS, cut, cut, cut, 0
    )


SCORES = (_s("energy", 300, 300, 6), _s("energy", 800, 800, 1), _s("silero", 500, 560, 7))


def _t(budget: float) -> TradeOff:
    return TradeOff(SCORES, budget, 10, 8, 12, 50.0, 2.0)


def test_markdown_rows_front_and_picks() -> None:
    text = markdown(_t(0.1))
    assert "| energy | -40 | 300 | 300 | 309 | 60% (6/10) | 6 (6) | 0 | * |" in text
    assert "| silero | -40 | 500 | 560 | 569 | 70% (7/10) | 7 (7) | 0 |  |" in text  # dominated
    assert "**energy thr=-40 hang=800ms**" in text
    assert '`[endpointing] mode = "vad", hangover_ms = 800, threshold_dbfs = -40`' in text
    assert "25x real time" in text
    front = text.split("Pareto front")[1]
    assert front.index("hang=300ms") < front.index("hang=800ms") and "silero" not in front


def test_document_and_no_pick() -> None:
    doc = document(_t(0.05))
    assert doc["pick"] is None and doc["pipeline_pick"] is None
    assert [r["hangover_ms"] for r in doc["front"]] == [300, 800]
    assert "No configuration keeps false cut-offs within 5%" in markdown(_t(0.05))


def test_curve_places_points_on_their_axes() -> None:
    svg = curve_svg(SCORES, 0.1)
    xs = [float(x) for x in re.findall(r'<circle cx="([\d.]+)" cy="[\d.]+" r="3.5"', svg)]
    ys = [float(y) for y in re.findall(r'<circle cx="[\d.]+" cy="([\d.]+)" r="3.5"', svg)]
    # more cut-offs -> further right; more latency -> higher up (smaller y)
    assert xs[0] > xs[1] and ys[0] > ys[1]
    assert svg.count("<polyline") == 1 and "budget 10%" in svg
    assert "<svg" in html(_t(0.1)) and "Every configuration" in html(_t(0.1))


def test_wire_points_drawn_apart_and_never_the_pipeline_pick() -> None:
    from voicelat.core.measure.endpointing import Config as C
    from voicelat.report.endpointing import curve_text

    wire = ConfigScore(
        C("deepgram", 0.0, 300, (("endpointing", "300"),), "wire"),
        10,
        420 * MS,
        430 * MS,
        0,
        0,
        0,
        0,
    )
    t = TradeOff((*SCORES, wire), 0.1, 10, 8, 12, 50.0, 2.0)
    text = markdown(t)
    assert (
        "| deepgram (wire) | — | endpointing=300 | 420 | 430 | 0% (0/10) | 0 (0) | 0 | * |" in text
    )
    assert (
        "Provider setting (measured on the wire) within 10%: **deepgram endpointing=300 (wire)**"
        in text
    )
    assert (
        t.pick is wire
        and t.pipeline_pick is not None
        and t.pipeline_pick.config.endpointer == "energy"
    )
    svg = curve_svg(t.scores, 0.1)
    assert (
        svg.count('r="3.5"') == 3
        and 'width="9" height="9"' in svg
        and "squares: recorded runs" in svg
    )
    assert "on the wire (recorded runs) D: deepgram" in curve_text(t.scores)
    assert document(t)["configs"][-1]["source"] == "wire"
