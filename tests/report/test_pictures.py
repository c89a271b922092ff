"""The pictures of the HTML reports, read back with an XML parser from literal turns and
summaries: bars, points and lines where the numbers put them, one colour per segment."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

from voicelat.core.base.palette import (
    FALLBACK_COLOURS,
    SEGMENT_COLOURS,
    ordered_segments,
    segment_colour,
)
from voicelat.core.base.turn import Turn
from voicelat.core.summaries.run_summary import RunSummary
from voicelat.report.chartdata import (
    Bin,
    accuracy,
    fixture_rows,
    histogram,
    percentile_marks,
    turn_points,
    word_errors,
)
from voicelat.report.comparison_html import comparison_html
from voicelat.report.run_html import run_html
from voicelat.report.svg import combos_svg, histogram_svg, timeline_svg

MS = 1_000_000
SVG = "{http://www.w3.org/2000/svg}"


def _turn(
    i: int,
    e2e_ms: int | None,
    fixture: str = "a",
    *,
    stt_ms: int = 100,
    warmup: bool = False,
    transcript: str | None = None,
    expected: str | None = None,
) -> Turn:
    segs = {} if e2e_ms is None else {"stt": stt_ms * MS, "llm_ttft": (e2e_ms - stt_ms) * MS}
    return Turn(
        index=i,
        fixture=fixture,
        t0_ns=0,
        milestones={},
        segments=segs,
        e2e_ns=None if e2e_ms is None else e2e_ms * MS,
        warmup=warmup,
        failed=e2e_ms is None,
        failure_stage="tts" if e2e_ms is None else None,
        failure_reason="connection refused" if e2e_ms is None else None,
        transcript=transcript,
        expected=expected,
    )


def _svg(text: str) -> ET.Element:
    return ET.fromstring(text)


def _all(root: ET.Element, tag: str, cls: str) -> list[ET.Element]:
    return [e for e in root.iter(SVG + tag) if e.get("class") == cls]


# -- the palette -------------------------------------------------------------------------------
def test_known_segments_have_their_colour_and_unknown_ones_a_stable_fallback() -> None:
    assert segment_colour("stt") == SEGMENT_COLOURS["stt"]
    new = segment_colour("a_future_segment")
    assert new in FALLBACK_COLOURS and new == segment_colour("a_future_segment")
    assert not set(FALLBACK_COLOURS) & set(SEGMENT_COLOURS.values())
    # Every known segment is told apart from every other.
    assert len(set(SEGMENT_COLOURS.values())) == len(SEGMENT_COLOURS)


def test_ordered_segments_keeps_contract_order_and_never_drops_a_name() -> None:
    got = ordered_segments(["future_b", "stt", "endpointing", "future_a"])
    assert got[:2] == ("endpointing", "stt")  # the contract's order first
    assert got[-2:] == ("future_b", "future_a")  # unknown names kept, as seen


# -- data ---------------------------------------------------------------------------------------
def test_histogram_bins_cover_every_value_on_round_edges() -> None:
    values = [v * MS for v in (1000, 1010, 1090, 1210, 1480)]
    bins = histogram(values, target_bins=5)
    assert sum(b.count for b in bins) == 5
    assert bins[0].lo_ns <= min(values) and bins[-1].hi_ns > max(values)
    assert all(b.lo_ns % (100 * MS) == 0 for b in bins)  # 100 ms bins for a 480 ms span
    assert [b.count for b in bins] == [3, 0, 1, 0, 1]


def test_fixture_rows_name_the_dominant_segment() -> None:
    turns = [
        _turn(0, 900, "a", stt_ms=600),
        _turn(1, 1000, "a", stt_ms=700),
        _turn(2, 800, "b", stt_ms=100),
        _turn(3, None, "b"),
        _turn(4, 500, "b", warmup=True),
    ]
    rows = {r.fixture: r for r in fixture_rows(turns)}
    assert rows["a"].n == 2 and rows["a"].p50_ns == 950 * MS and rows["a"].dominant == "stt"
    assert rows["b"].n == 1 and rows["b"].failed == 1 and rows["b"].dominant == "llm_ttft"
    assert rows["b"].dominant_ns == 700 * MS


def test_word_error_rate_pools_words_over_turns() -> None:
    assert word_errors("Turn off the lights.", "turn of the lights") == 1
    assert word_errors("a b c", "") == 3
    turns = [
        _turn(0, 900, transcript="What's the weather?", expected="what's the weather"),
        _turn(1, 900, transcript="set a timer", expected="set a timer for ten minutes"),
        _turn(2, 900, transcript="no reference"),
        _turn(3, 900, transcript="warm up", expected="ignored", warmup=True),
    ]
    acc = accuracy(turns)
    assert (acc.turns, acc.words, acc.errors, acc.exact) == (2, 9, 3, 1)
    assert acc.wer == 3 / 9


# -- SVG --------------------------------------------------------------------------------------
def test_histogram_bars_and_percentile_and_budget_lines_in_place() -> None:
    bins = [Bin(1000 * MS, 1100 * MS, 3), Bin(1100 * MS, 1200 * MS, 1)]
    root = _svg(histogram_svg(bins, {50: 1050.0 * MS, 90: 1150.0 * MS}, {90: 1180.0 * MS}))
    bars = _all(root, "rect", "bin")
    assert [int(b.get("data-count", "")) for b in bars] == [3, 1]
    tall, short = (float(b.get("height", "")) for b in bars)
    assert abs(tall - 3 * short) < 0.05  # heights proportional to counts
    assert float(bars[0].get("x", "")) < float(bars[1].get("x", ""))
    lines = {
        (e.get("class"), e.get("data-p")): float(e.get("x1", ""))
        for e in root.iter(SVG + "line")
        if e.get("data-p")
    }
    # P50 halfway through the first bar, P90 halfway through the second, budget past it.
    x0, w = float(bars[0].get("x", "")), float(bars[0].get("width", "")) + 1
    assert abs(lines[("pctl", "50")] - (x0 - 0.5 + w / 2)) < 1
    assert lines[("pctl", "50")] < lines[("pctl", "90")] < lines[("budget", "90")]


def test_timeline_puts_turns_in_order_and_marks_failures() -> None:
    turns = [_turn(0, 1500, warmup=True), _turn(1, 1000), _turn(2, None), _turn(3, 2000)]
    points = turn_points(turns)
    assert [p.kind for p in points] == ["excluded", "ok", "failed", "ok"]
    root = _svg(timeline_svg(points, percentile_marks([1000 * MS, 2000 * MS])))
    dots = {int(c.get("data-index", "")): c for c in _all(root, "circle", "turn")}
    assert set(dots) == {0, 1, 3}
    assert dots[0].get("fill") == "none"  # warm-up: drawn hollow
    xs = [float(dots[i].get("cx", "")) for i in (0, 1, 3)]
    assert xs == sorted(xs)
    # SVG y grows downwards: the 2000 ms turn is drawn above the 1000 ms one.
    assert float(dots[3].get("cy", "")) < float(dots[1].get("cy", ""))
    failed = _all(root, "path", "failed")
    assert [f.get("data-index") for f in failed] == ["2"]
    assert xs[1] < float(failed[0].get("d", "").split(",")[0][1:]) + 4 < xs[2]
    (p50,) = _all(root, "line", "pctl")
    assert int(p50.get("data-ns", "")) == 1500 * MS


def _combo(name: str, rank: int | None, stt: int, llm: int, status: str = "ok") -> dict[str, Any]:
    band = {
        "n": 10,
        "band_n": 3,
        "e2e_percentile_ns": (stt + llm) * MS,
        "mean_e2e_ns": (stt + llm) * MS,
        "segments_ns": {"stt": stt * MS, "llm_ttft": llm * MS},
        "turns": [1, 2, 3],
    }
    return {
        "name": name,
        "rank": rank,
        "status": status,
        "failure": None if status == "ok" else "tts: connection refused",
        "n": 10,
        "e2e": {"p50": {"ns": (stt + llm) * MS}},
        "segments": {"stt": {"p50": stt * MS, "p90": stt * MS}},
        "waterfall": {"p50": band, "p90": band} if status == "ok" else {},
    }


def test_combos_chart_stacks_p50_segments_in_rank_order() -> None:
    combos = [
        _combo("slow", 2, 300, 900),
        _combo("fast", 1, 100, 500),
        _combo("dead", None, 0, 0, "failed"),
    ]
    root = _svg(combos_svg(combos))
    segs = _all(root, "rect", "seg")
    by = {(r.get("data-combo"), r.get("data-segment")): r for r in segs}
    # Rank 1 first (higher up), whatever order the document listed them in.
    assert float(by[("fast", "stt")].get("y", "")) < float(by[("slow", "stt")].get("y", ""))
    # Stacked: llm_ttft starts where stt ends; widths proportional to ns; colours shared.
    stt, llm = by[("slow", "stt")], by[("slow", "llm_ttft")]
    end = float(stt.get("x", "")) + float(stt.get("width", ""))
    assert abs(float(llm.get("x", "")) - end) < 0.01
    assert abs(float(llm.get("width", "")) / float(stt.get("width", "")) - 3) < 0.01
    assert stt.get("fill") == SEGMENT_COLOURS["stt"]
    (dead,) = _all(root, "text", "failed-combo")
    assert dead.get("data-combo") == "dead" and "connection refused" in (dead.text or "")


def test_unknown_segments_get_the_fallback_colour_in_the_chart() -> None:
    c = _combo("agent", 1, 100, 500)
    c["waterfall"]["p50"]["segments_ns"] = {"a_future_segment": 600 * MS}
    (bar,) = _all(_svg(combos_svg([c])), "rect", "seg")
    assert bar.get("data-segment") == "a_future_segment"
    assert bar.get("fill") == segment_colour("a_future_segment") in FALLBACK_COLOURS


def _svgs(page: str) -> list[ET.Element]:
    return [ET.fromstring(s) for s in re.findall(r"<svg.*?</svg>", page, re.S)]


def test_run_page_has_every_picture_and_the_fixture_table() -> None:
    turns = [
        _turn(i, 900 + 50 * i, "ab"[i % 2], transcript="hi there", expected="hi there")
        for i in range(6)
    ]
    turns.append(_turn(6, None, "a"))
    summary = RunSummary.from_json(
        {
            "pipeline": {"name": "demo"},
            "counts": {"turns": 7, "headline": 6, "failed": 1},
            "budget": {"e2e": {"p90_ms": 1100}},
        }
    )
    page = run_html(summary, turns, "runs/demo")
    classes = [s.get("class") for s in _svgs(page)]
    assert classes == ["histogram", "timeline"]  # no waterfall bands in this summary
    hist, timeline = _svgs(page)
    assert sum(int(b.get("data-count", "")) for b in _all(hist, "rect", "bin")) == 6
    assert [b.get("data-ns") for b in _all(hist, "line", "budget")] == [str(1100 * MS)]
    assert len(_all(timeline, "path", "failed")) == 1
    assert page.count('<tr data-fixture="') == 2
    assert "WER 0.0%" in page


def test_comparison_page_adds_the_combination_chart_and_accuracy() -> None:
    doc = {
        "name": "demo",
        "combinations": [_combo("fast", 1, 100, 500), _combo("slow", 2, 300, 900)],
    }
    runs = {
        "fast": [_turn(0, 600, transcript="set a timer", expected="set a timer")],
        "slow": [_turn(0, 1200, transcript="set the timer", expected="set a timer")],
    }
    page = comparison_html(doc, runs)
    kinds = [s.get("class") for s in _svgs(page)]
    assert kinds[0] == "combos" and kinds.count("waterfall") == 4
    assert kinds.count("histogram") == 2 and kinds.count("timeline") == 2
    assert kinds.count("spread") == 1
    assert "Accuracy beside latency" in page and "33.3%" in page
    # Without turns the page is the one it always was, plus the combination chart.
    assert "Accuracy beside latency" not in comparison_html(doc)


def test_spread_puts_every_turn_of_every_combination_on_one_axis() -> None:
    from voicelat.report.svg import spread_svg

    combos = [_combo("slow", 2, 300, 900), _combo("fast", 1, 100, 500)]
    e2e = {"fast": [v * MS for v in (500, 600, 700)], "slow": [v * MS for v in (1100, 1200, 1300)]}
    root = _svg(spread_svg(combos, e2e))
    ticks = _all(root, "line", "tick-turn")
    assert len(ticks) == 6
    x = {int(t.get("data-ns", "")): float(t.get("x1", "")) for t in ticks}
    # One axis: evenly spaced values are evenly spaced ticks, across combinations.
    assert abs((x[600 * MS] - x[500 * MS]) - (x[1200 * MS] - x[1100 * MS])) < 0.01
    assert x[700 * MS] < x[1100 * MS]
    boxes = {b.get("data-combo"): b for b in _all(root, "rect", "box")}
    assert float(boxes["fast"].get("y", "")) < float(boxes["slow"].get("y", ""))  # rank order
    fast = boxes["fast"]
    assert (
        int(fast.get("data-p50-ns", "")) == 600 * MS
        and int(fast.get("data-p90-ns", "")) == 680 * MS
    )
    assert abs(float(fast.get("x", "")) - x[600 * MS]) < 0.01


def test_every_segment_of_the_contract_has_a_colour_of_its_own() -> None:
    from voicelat.core.base.contract import ALL_SEGMENTS

    colours = [segment_colour(s) for s in ALL_SEGMENTS]
    assert len(set(colours)) == len(ALL_SEGMENTS), dict(zip(ALL_SEGMENTS, colours, strict=True))
