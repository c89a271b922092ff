"""The comparison reports: the SVG waterfall (bars sum to the band's total), Markdown, HTML, text."""

from __future__ import annotations

import itertools
import re
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from voicelat.core.base.contract import SEGMENTS
from voicelat.core.judge.ranking import CombinationSample, rank_combinations
from voicelat.report.comparison import comparison_markdown, comparison_text
from voicelat.report.comparison_html import (
    CHART_W,
    LABEL_W,
    comparison_html,
    shared_scale_ns,
    waterfall_svg,
)

MS = 1_000_000
SVG = "{http://www.w3.org/2000/svg}"

BAND_P50: dict[str, Any] = {
    "n": 10,
    "band_n": 1,
    "e2e_percentile_ns": 905 * MS,
    "mean_e2e_ns": 900 * MS,
    "segments_ns": {
        "endpointing": 500 * MS,
        "stt": 80 * MS,
        "handoff": 1 * MS,
        "llm_ttft": 40 * MS,
        "aggregation": 150 * MS,
        "tts_ttfb": 70 * MS,
        "leading_silence": 59 * MS,
        "playout": 0,
    },
    "turns": [3],
}


def _parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def test_waterfall_bars_sum_to_the_band_mean_and_lie_end_to_end() -> None:
    root = _parse(waterfall_svg(BAND_P50, p=50, scale_ns=1000 * MS, title="a P50"))
    segs = root.findall(f"{SVG}rect[@class='seg']")
    assert [r.get("data-segment") for r in segs] == list(SEGMENTS)
    total = root.find(f"{SVG}rect[@class='total']")
    assert total is not None
    # The numbers behind the bars add up exactly to the drawn total ...
    assert (
        sum(int(r.get("data-ns", "0")) for r in segs) == int(total.get("data-ns", "0")) == 900 * MS
    )
    # ... and so do the drawn widths, each bar starting where the previous one ended.
    widths = [float(r.get("width", "0")) for r in segs]
    assert sum(widths) == pytest.approx(float(total.get("width", "0")), abs=0.05)
    for prev, cur in itertools.pairwise(segs):
        end = float(prev.get("x", "0")) + float(prev.get("width", "0"))
        assert float(cur.get("x", "0")) == pytest.approx(end, abs=0.02)
    # 900 ms on a 1000 ms axis.
    assert float(total.get("width", "0")) == pytest.approx(0.9 * CHART_W, abs=0.01)


def test_the_exact_percentile_is_marked_on_the_same_axis() -> None:
    root = _parse(waterfall_svg(BAND_P50, p=50, scale_ns=1000 * MS))
    line = root.find(f"{SVG}line[@class='pctl']")
    total = root.find(f"{SVG}rect[@class='total']")
    assert line is not None and total is not None
    assert int(line.get("data-ns", "0")) == 905 * MS
    x0 = float(total.get("x", "0"))
    px_per_ns = float(total.get("width", "0")) / (900 * MS)
    assert float(line.get("x1", "0")) == pytest.approx(x0 + 905 * MS * px_per_ns, abs=0.02)
    assert root.get("data-percentile") == "50"
    assert "exact P50 905 ms" in "".join(root.itertext())


def test_the_axis_grows_to_fit_a_longer_band() -> None:
    root = _parse(waterfall_svg(BAND_P50, p=50, scale_ns=450 * MS))
    total = root.find(f"{SVG}rect[@class='total']")
    line = root.find(f"{SVG}line[@class='pctl']")
    assert total is not None and line is not None
    # The exact percentile (905 ms) is the longest thing: it ends the chart, nothing overflows.
    assert float(line.get("x1", "0")) == pytest.approx(LABEL_W + CHART_W, abs=0.02)


def _doc() -> dict[str, Any]:
    samples = [
        CombinationSample(
            "fast", [{"e2e": v * MS, "stt": 80 * MS} for v in (800, 850, 900, 950, 1000)], 5, 0
        ),
        CombinationSample("close", [{"e2e": v * MS} for v in (810, 860, 910, 960, 1010)], 5, 0),
        CombinationSample("slow", [{"e2e": v * MS} for v in (1500, 1550, 1600, 1650, 1700)], 5, 0),
        CombinationSample("dead", [], 5, 5, failure="stt: connection refused"),
    ]
    ranked = rank_combinations(samples, resamples=300)
    band90 = dict(BAND_P50, e2e_percentile_ns=1200 * MS, mean_e2e_ns=900 * MS)
    return {
        "name": "demo",
        "created": "2025-01-01T00:00:00",
        "fixtures": {"count": 5},
        "schedule": {"warmup": 1, "measured_per_combination": 5},
        "statistics": {
            "rank_by": "p50",
            "level": 0.95,
            "resamples": 300,
            "seed": 0,
            "min_turns": 3,
        },
        "combinations": [
            r.to_json()
            | {
                "run_dir": r.name,
                "stages": {"stt": {"stage": "pocketsphinx-stt", "engine_version": "5.1.1"}},
                "waterfall": {} if r.status != "ok" else {"p50": BAND_P50, "p90": band90},
            }
            for r in ranked
        ],
        "excluded": ["x+y"],
    }


def test_markdown_says_significant_or_not_and_keeps_the_failed_combination() -> None:
    md = comparison_markdown(_doc())
    rows = {line.split("|")[2].strip(): line for line in md.splitlines() if line.startswith("| ")}
    assert "best" in rows["fast"]
    assert "not significant" in rows["close"]
    assert re.search(r"\+700 ms \[\+\d+, \+\d+\]", rows["slow"]), rows["slow"]
    assert "FAILED: stt: connection refused" in rows["dead"]
    assert "| - | dead |" in rows["dead"]  # unranked
    assert "percentiles do not add up" in md
    assert "x+y" in md


def test_text_table_matches_the_markdown_ranking() -> None:
    text = comparison_text(_doc())
    lines = [line for line in text.splitlines() if line[:2] in ("1 ", "2 ", "3 ", "- ")]
    assert [line.split()[1] for line in lines if line[0] != "-" or "dead" in line] == [
        "fast",
        "close",
        "slow",
        "dead",
    ]
    assert re.search(r"\n1 +fast +5 +0% +900 \[\d+, \d+\] +best", text), text


def test_html_is_one_page_with_two_parseable_waterfalls_per_ranked_combination() -> None:
    doc = _doc()
    page = comparison_html(doc)
    assert page.startswith("<!DOCTYPE html>")
    assert "<script" not in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    every = re.findall(r"<svg .*?</svg>", page, flags=re.S)
    assert 'class="combos"' in every[0]  # every combination side by side, first
    svgs = [s for s in every if 'class="waterfall"' in s]
    assert len(svgs) == 3 * 2  # fast, close, slow at P50 and P90; the failed one has none
    for svg in svgs:
        root = _parse(svg)
        segs = root.findall(f"{SVG}rect[@class='seg']")
        assert sum(int(r.get("data-ns", "0")) for r in segs) == int(root.get("data-mean-ns", "0"))
    assert "stt: connection refused" in page
    # One axis for all: the longest marker (the P90 exact, 1200 ms) sets it.
    assert shared_scale_ns(doc) == 1200 * MS
