"""The terminal pictures: the pure renderables printed at a known width (what lands on which
row and column, in which colour), and the screens driven with Pilot."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text
from textual.widgets import DataTable, Static

from tests.tui.helpers import MS, make_turn, saved_model, text_of
from voicelat.core.base.palette import SEGMENT_COLOURS, segment_colour
from voicelat.core.judge.ranking import CombinationSample, rank_combinations
from voicelat.report.chartdata import Bin, accuracy, histogram, turn_points
from voicelat.tui.app import VoicelatApp
from voicelat.tui.charts import CombosView, HistogramView, TimelineView, fixture_table
from voicelat.tui.compare import CompareApp
from voicelat.tui.pictures import CombinationScreen, PicturesScreen
from voicelat.tui.render import Waterfall


def _styled(renderable: Any, width: int = 100) -> list[Text]:
    console = Console(width=width, color_system="truecolor", force_terminal=True)
    return [
        Text.assemble(*((seg.text, seg.style) for seg in line))
        for line in console.render_lines(renderable, pad=False)
    ]


def _colours(line: Text) -> set[str]:
    out = set()
    for span in line.spans:
        style = span.style
        colour = getattr(style, "color", None)
        if colour is not None and colour.triplet is not None:
            out.add(colour.triplet.hex.upper())
    return out


def test_histogram_rows_are_bins_and_marks_land_on_their_bin() -> None:
    bins = [Bin(900 * MS, 1000 * MS, 4), Bin(1000 * MS, 1100 * MS, 2), Bin(1100 * MS, 1200 * MS, 1)]
    view = HistogramView(bins, {50: 950.0 * MS, 90: 1150.0 * MS}, {90: 1050.0 * MS})
    lines = text_of(view, 80).splitlines()
    assert len(lines) == 3
    assert lines[0].startswith(" 900–1000 ms") and "◀ P50 950" in lines[0]
    assert "◀ budget P90 1050" in lines[1] and "◀ P90 1150" in lines[2]
    bars = [line.count("█") for line in lines]
    assert bars[0] > bars[1] > bars[2] > 0  # lengths follow the counts (4, 2, 1)


def test_timeline_one_column_per_turn_with_failures_on_top() -> None:
    turns = [make_turn(i) for i in range(5)]
    turns[2] = make_turn(2, failed=True, e2e_ns=None, failure_stage="tts", failure_reason="x")
    view = TimelineView(turn_points(turns), height=4)
    lines = text_of(view, 60).splitlines()
    plot = [line[7:12] for line in lines[:4]]
    assert plot[0][2] == "✗"  # the failed turn's column, top row
    assert all(row[2] in " ┄" for row in plot[1:])  # and nothing under it
    assert all(plot[3][i] != " " for i in (0, 1, 3, 4))  # every other turn has a column
    assert lines[4].strip().startswith("turn 0") and lines[4].strip().endswith("turn 4")


def test_timeline_groups_turns_when_they_outnumber_the_columns() -> None:
    points = turn_points([make_turn(i) for i in range(300)])
    cols = TimelineView(points).columns(100)
    assert len(cols) == 100 and sum(len(c) for c in cols) == 300
    assert [p.index for c in cols for p in c] == list(range(300))


def test_one_colour_per_segment_in_the_tui_and_the_html() -> None:
    wf = Waterfall(
        segments={"stt": 300.0 * MS, "a_future_segment": 500.0 * MS},
        total_ns=800.0 * MS,
        order=("stt", "a_future_segment"),
    )
    lines = _styled(wf)
    stt = next(line for line in lines if "stt" in line.plain)
    agent = next(line for line in lines if "a_future_segment" in line.plain)
    assert SEGMENT_COLOURS["stt"] in _colours(stt)
    assert segment_colour("a_future_segment") in _colours(agent)  # the fallback, as in the SVG


def _doc() -> dict[str, Any]:
    def turns(base: int) -> list[dict[str, int]]:
        return [
            {"e2e": (base + d) * MS, "stt": 100 * MS, "llm_ttft": (base + d - 100) * MS}
            for d in (0, 50, 100)
        ]

    samples = [
        CombinationSample("fast", turns(800), 3, 0),
        CombinationSample("slow", turns(1500), 3, 0),
        CombinationSample("dead", [], 3, 3, failure="tts: connection refused"),
    ]
    combos = []
    for r in rank_combinations(samples, resamples=200):
        base = 850 if r.name == "fast" else 1550
        band = {
            "n": 3,
            "band_n": 1,
            "e2e_percentile_ns": base * MS,
            "mean_e2e_ns": base * MS,
            "segments_ns": {"stt": 100 * MS, "llm_ttft": (base - 100) * MS},
            "turns": [1],
        }
        combos.append(
            r.to_json()
            | {
                "run_dir": r.name,
                "waterfall": {"p50": band, "p90": band} if r.name != "dead" else {},
            }
        )
    return {
        "name": "demo",
        "kind": "voicelat-comparison",
        "statistics": {"rank_by": "p50"},
        "combinations": combos,
    }


def test_combos_view_in_rank_order_with_segment_colours_and_wer() -> None:
    doc = _doc()
    runs = {"fast": [make_turn(0, transcript="set a timer", expected="set the timer")]}
    lines = _styled(CombosView(doc["combinations"], {n: accuracy(t) for n, t in runs.items()}))
    plain = [line.plain for line in lines]
    assert plain[0].startswith("1. fast") and "WER 33.3%" in plain[0]
    assert plain[1].startswith("2. slow") and plain[2].startswith("-. dead")
    assert "connection refused" in plain[2]
    assert plain[0].count("█") < plain[1].count("█")  # one axis: the slower bar is longer
    assert {SEGMENT_COLOURS["stt"], SEGMENT_COLOURS["llm_ttft"]} <= _colours(lines[1])


def test_fixture_table_names_the_dominant_segment() -> None:
    from voicelat.report.chartdata import fixture_rows

    turns = [make_turn(i, {"stt": 500}, fixture="a") for i in range(3)]
    text = text_of(fixture_table(fixture_rows(turns)), 100)
    assert "a " in text and "stt 500 ms" in text
    assert histogram([]) == []


async def test_g_opens_the_run_pictures_and_escape_goes_back() -> None:
    app = VoicelatApp(saved_model())
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("g")
        assert isinstance(app.screen, PicturesScreen)
        body = text_of(app.screen.query_one("#pictures-body", Static).content, 110)
        assert "e2e distribution (n=14 headline turns)" in body
        assert "◀ P50" in body and "turn 0" in body and "turn 14" in body
        assert "WER" in body and "weather_paris" in body
        await pilot.press("escape")
        assert not isinstance(app.screen, PicturesScreen)


async def test_enter_on_a_ranking_row_opens_that_combination() -> None:
    runs = {"slow": [make_turn(i, fixture="a") for i in range(4)]}
    app = CompareApp(_doc(), runs)
    async with app.run_test(size=(140, 45)) as pilot:
        assert "1. fast" in text_of(app.query_one("#combos", Static).content, 130)
        ranking = app.query_one("#ranking", DataTable)
        assert ranking.has_focus
        await pilot.press("down", "enter")
        screen = app.screen
        assert isinstance(screen, CombinationScreen) and screen.combo["name"] == "slow"
        waterfalls = text_of(screen.query_one("#combination-waterfalls", Static).content, 120)
        assert "P50 waterfall" in waterfalls and "P90 waterfall" in waterfalls
        assert "1550 ms" in waterfalls
        pictures = text_of(screen.query_one("#combination-pictures", Static).content, 120)
        assert "e2e distribution (n=4 headline turns)" in pictures
        await pilot.press("escape", "down", "enter")
        assert isinstance(app.screen, CombinationScreen) and app.screen.combo["name"] == "dead"
        await pilot.press("q")
    assert app.return_code == 0


def test_pictures_of_a_run_with_no_headline_turn_say_so() -> None:
    from voicelat.core.summaries.run_summary import RunSummary
    from voicelat.report.run_html import run_html
    from voicelat.tui.charts import run_charts

    failed = [make_turn(0, failed=True, e2e_ns=None, failure_stage="stt", failure_reason="x")]
    text = text_of(run_charts(failed, {}), 80)
    assert "no headline turn: nothing to draw" in text
    assert "✗" in text and "turn 0" in text and "turn 0turn" not in text
    page = run_html(RunSummary(), failed)
    assert "no headline turn to draw" in page and 'class="failed"' in page
    assert "no turn yet" in text_of(run_charts([], {}), 80)
