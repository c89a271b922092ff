"""The pure renderables, printed to a plain rich Console of a fixed width (no App)."""

from __future__ import annotations

import re

from tests.tui.helpers import MS, make_turn, saved_model, text_of
from voicelat.core.base.contract import SEGMENTS
from voicelat.core.base.stats import Band
from voicelat.tui.model import LiveTurn, judge
from voicelat.tui.render import (
    LABEL_WIDTH,
    LiveTimeline,
    Waterfall,
    band_caption,
    band_view,
    band_waterfall,
    instrument_text,
    nice_ceiling,
    segment_table,
    spans_table,
    stats_view,
    status_line,
    transcript_diff,
    turn_cells,
    turn_detail,
    turn_pane,
    verdict_text,
)

ROW = re.compile(r"^(?P<flag>[▶! ]) (?P<name>\S+)\s+(?P<ms>-?\d+) ms (?P<bar>.*)$")


def _rows(text: str) -> dict[str, tuple[str, int, str]]:
    """Waterfall rows by segment name: (flag, printed ms, bar cells)."""
    out = {}
    for line in text.splitlines():
        m = ROW.match(line)
        if m and m["name"] in SEGMENTS:
            out[m["name"]] = (m["flag"], int(m["ms"]), line[LABEL_WIDTH:])
    return out


def _total(text: str, label: str) -> int:
    m = re.search(rf"{label}\s+(\d+) ms", text)
    assert m, text
    return int(m.group(1))


def test_nice_ceiling_picks_round_axis_ends() -> None:
    assert nice_ceiling(2600 * MS) == 3000 * MS
    assert nice_ceiling(1040 * MS) == 1200 * MS
    assert nice_ceiling(99) == 100
    assert nice_ceiling(0) == 1.0


def test_band_waterfall_labels_add_up_to_the_total_it_prints() -> None:
    model = saved_model()
    for p, band in model.bands().items():
        verdict = judge(p, band.e2e_percentile, band.segments, model.budget)
        text = text_of(band_waterfall(band, verdict), width=100)
        rows = _rows(text)
        assert list(rows) == list(SEGMENTS)
        total = _total(text, "band mean e2e")
        assert total == round(band.mean_e2e / MS)
        assert sum(ms for _, ms, _ in rows.values()) == total
        assert f"P{p} e2e {band.e2e_percentile / MS:.0f} ms" in text


def test_waterfall_bars_are_contiguous_and_the_budget_line_sits_at_its_time() -> None:
    segments = {s: 100.0 * MS for s in SEGMENTS}
    wf = Waterfall(segments, 800.0 * MS, budget_ns=300.0 * MS, budget_label="budget 300")
    text = text_of(wf, width=LABEL_WIDTH + 60)
    rows = _rows(text)
    # axis 0..1000 ms (a round number past 800 ms) over 60 cells: 6 cells per 100 ms segment,
    # each starting where the one before ended
    prev_end = 0
    for name in SEGMENTS:
        cells = [i for i, ch in enumerate(rows[name][2]) if ch in "█╋"]
        assert cells == list(range(prev_end, prev_end + 6)), (name, rows[name][2])
        prev_end += 6
    # the budget line crosses every row at 300 ms (cell 18), through the bar that holds it
    assert all(rows[n][2][18] in "┃╋" for n in SEGMENTS)
    assert rows["llm_ttft"][2][18] == "╋" and rows["playout"][2][18] == "┃"
    axis = text.splitlines()[-1]
    assert axis.split() == ["0", "budget", "300", "500", "1000", "ms"]


def test_a_segment_shorter_than_a_cell_still_shows() -> None:
    segments = dict.fromkeys(SEGMENTS, 0.0) | {"endpointing": 900.0 * MS, "handoff": 0.5 * MS}
    text = text_of(Waterfall(segments, 900.5 * MS), width=LABEL_WIDTH + 40)
    assert "▏" in _rows(text)["handoff"][2]
    assert _rows(text)["playout"][2].strip() == ""


def _band(segments_ms: dict[str, float], e2e_pct_ms: float) -> Band:
    segs = {s: segments_ms.get(s, 0.0) * MS for s in SEGMENTS}
    mean = sum(segs.values())
    return Band(90, 20, 2, e2e_pct_ms * MS, mean, segs, (3, 4))


def test_the_segment_that_pushes_over_budget_is_marked_and_named() -> None:
    band = _band({"endpointing": 500, "stt": 300, "llm_ttft": 400, "tts_ttfb": 100}, 1310)
    budget = {"e2e": {"p90_ms": 1000}, "stt": {"p90_ms": 250}}
    verdict = judge(90, band.e2e_percentile, band.segments, budget)
    text = text_of(band_waterfall(band, verdict), width=100)
    rows = _rows(text)
    assert rows["llm_ttft"][0] == "▶"  # 500 + 300 = 800 < 1000 < 1200
    assert rows["stt"][0] == "!"  # over its own 250 ms limit
    assert rows["endpointing"][0] == " "
    words = text_of(verdict_text(band, verdict), width=100)
    assert "✗ P90 over budget 1000 ms by 310 ms ▶ llm_ttft" in words
    assert "! over own limit: stt 300 > 250 ms" in words
    assert band_caption(band) == "n=20 warm · bars: mean of 2 turns around P90"
    assert band_caption(band, short=True) == "n=20 · bars: mean of 2 turns"


def test_band_view_without_budget_or_turns_says_why() -> None:
    model = saved_model()
    assert "no P99 e2e budget set" in text_of(band_view(model, 99), width=100)
    assert "✓ P50 within budget 2500 ms (1434 ms headroom)" in text_of(band_view(model, 50), 100)
    model.turns = [t for t in model.turns if t.warmup]
    assert "no warm, complete turn" in text_of(band_view(model, 50), width=100)


def test_segment_table_is_labelled_not_additive_and_shows_p50_p90_p99_max_n() -> None:
    model = saved_model()
    text = text_of(segment_table(model.segment_dists()), width=60)
    assert "not additive" in text
    header = next(line for line in text.splitlines() if line.startswith("segment"))
    assert header.split() == ["segment", "P50", "P90", "P99", "max", "n"]
    e2e = next(line for line in text.splitlines() if line.startswith("e2e")).split()
    assert e2e == ["e2e", "1066", "1186", "1248", "1255", "14"]
    handoff = next(line for line in text.splitlines() if line.startswith("handoff")).split()
    assert handoff[1] == "0.6"  # sub-10 ms values keep a decimal


CALIBRATED = {
    "status": "calibrated",
    "mode": "quick",
    "turns": 3,
    "error_p50_ns": 310_000,
    "error_p99_ns": 1_240_000,
    "by_kind": {"ttft": {"n": 3, "error_p50_ns": 300_000, "error_p99_ns": 1_240_000}},
    "clock_ppm": 1.5,
    "reason": None,
}


def test_the_percentiles_pane_carries_the_instrument_error_p99() -> None:
    model = saved_model()
    text = text_of(stats_view(model.segment_dists(), CALIBRATED), width=60)
    lines = text.splitlines()
    e2e = next(i for i, line in enumerate(lines) if line.startswith("e2e"))
    bar = next(i for i, line in enumerate(lines) if "instrument error" in line)
    assert bar > e2e  # under the table it qualifies
    assert "± instrument error P99 1.2 ms (P50 0.3 ms, 3 reference turns)" in " ".join(
        " ".join(lines[bar:]).split()
    )
    # a run without the section (older, or live until its summary): the table alone
    assert text_of(stats_view(model.segment_dists(), None), width=60) == text_of(
        segment_table(model.segment_dists()), width=60
    )


def test_an_uncalibrated_or_warned_error_bar_says_so() -> None:
    off = {"status": "uncalibrated", "reason": "--calibrate off", "error_p99_ns": None}
    line = instrument_text(off)
    assert line is not None and line.plain == "± instrument error: uncalibrated (--calibrate off)"
    warned = instrument_text(CALIBRATED | {"reason": "clock drift 120 ppm"})
    assert warned is not None and warned.plain.endswith("; WARNING: clock drift 120 ppm")
    assert instrument_text(None) is None and instrument_text("calibrated") is None


def test_spans_table_lists_connect_and_ttfb_per_stage() -> None:
    model = saved_model()
    text = text_of(spans_table(model.span_dists()), width=60)
    lines = text.splitlines()
    assert any(line.split()[:2] == ["stt", "connect"] for line in lines if line.strip())
    ttfb = next(line for line in lines if "response headers" in line).split()
    assert ttfb[-4:] == ["2.8", "3.3", "3.4", "14"]
    assert "TTFB" not in text  # read as "first token" by Pipecat/LiveKit users (issue 18)
    assert "no network sub-spans" in text_of(spans_table({}))


def test_turn_cells_spell_out_failures_cold_stages_and_flags() -> None:
    ok = [c.plain for c in turn_cells(make_turn(4, {"llm_ttft": 700}))]
    assert ok[:3] == ["4", "fx4", "770"] and ok[3] == "llm_ttft 700" and ok[4:] == ["warm", "ok"]
    failed = [
        c.plain
        for c in turn_cells(
            make_turn(5, failed=True, failure_stage="stt", failure_reason="empty transcript")
        )
    ]
    assert failed[-1] == "FAILED stt: empty transcript" and failed[3] == "-"
    cold = [c.plain for c in turn_cells(make_turn(6, cold=True, cold_stages=("tts",)))]
    assert cold[4] == "cold: tts"
    flagged = [c.plain for c in turn_cells(make_turn(7, flags=("pacer_lag",)))]
    assert flagged[-1] == "⚑ pacer_lag"


def test_transcript_diff_ignores_case_and_punctuation_but_not_words() -> None:
    assert "✓ matches expected" in transcript_diff("hello, There", "Hello there.").plain
    diff = transcript_diff("Set a timer for 10 minutes.", "Set a timer for ten minutes.")
    assert diff.plain.startswith("Set a timer for 10 minutes.")
    assert "✗ 1 word(s) differ" in diff.plain
    highlighted = [diff.plain[s.start : s.end] for s in diff.spans if "yellow" in str(s.style)]
    assert "10 " in highlighted
    assert transcript_diff(None, "x").plain == "(no transcript)"


def test_turn_detail_shows_milestones_spans_texts_and_lags() -> None:
    turn = saved_model().turns[2]
    text = text_of(turn_detail(turn, {"e2e": {"p50_ms": 2500}}, 50), width=110)
    for name in turn.milestones:
        assert name in text
    assert "stt_first_partial" in text  # absent milestones are listed too, as '-'
    assert "✗ 1 word(s) differ" in text  # Whisper wrote "10" for "ten"
    assert turn.reply and turn.reply in text
    assert "pacer lag       max 1.0 ms" in text
    assert "response headers" in text and "connect" in text
    assert _total(text, "e2e") == round(turn.e2e_ns / MS)  # type: ignore[operator]


def test_turn_detail_of_a_failed_turn_says_where_it_stopped() -> None:
    turn = make_turn(
        3,
        failed=True,
        failure_stage="llm",
        failure_reason="timed out after 60 s",
        segments={},
        e2e_ns=None,
    )
    text = text_of(turn_detail(turn, {}, 50), width=100)
    assert "FAILED llm: timed out after 60 s" in text
    assert "no complete critical path (last milestone: output_first_audible)" in text


def test_live_timeline_shows_seen_milestones_and_waits_for_the_rest() -> None:
    live = LiveTurn(
        2, "book_table", False, 2000 * MS, {"endpoint": 2480 * MS, "stt_final": 2790 * MS}
    )
    text = text_of(LiveTimeline(live, now_ns=900 * MS, budget_ns=1500 * MS), width=90)
    lines = {line.split()[0]: line for line in text.splitlines() if line.strip()}
    assert "+480" in lines["endpoint"] and "●" in lines["endpoint"]
    assert "+790" in lines["stt_final"]
    assert "…" in lines["llm_first_token"] and "●" not in lines["llm_first_token"]
    assert "now +900 ms" in text and "budget 1500" in text
    # the endpoint dot lies left of the STT-final dot: the same time axis
    assert lines["endpoint"].index("●") < lines["stt_final"].index("●")


def test_turn_pane_switches_from_live_timeline_to_settled_waterfall() -> None:
    model = saved_model()
    model.live = LiveTurn(99, "call_mom", False, 2000 * MS, {"endpoint": 2500 * MS})
    assert "turn 99" in text_of(turn_pane(model, model.turns[3], 50, None), width=90)
    model.live = None
    text = text_of(turn_pane(model, model.turns[3], 50, None), width=90)
    assert "turn 3  book_table  e2e 979 ms  warm" in text
    assert sum(ms for _, ms, _ in _rows(text).values()) == 979
    # the next turn has started but its audio is still playing: the finished turn stays
    model.live = LiveTurn(100, "call_mom", False, 2000 * MS, {})
    text = text_of(turn_pane(model, model.turns[3], 50, None), width=90)
    assert "turn 3  book_table" in text and "next: turn 100 call_mom, audio playing" in text
    model.live = None
    model.setup_log.append("embedded stack: checking / starting servers")
    assert "starting servers" in text_of(turn_pane(model, None, 50, None), width=90)


def test_status_line_counts_lags_skipped_lines_and_where_results_are() -> None:
    model = saved_model()
    text = text_of(status_line(model), width=200)
    assert "turns 15/15" in text and "failed 0" in text
    assert "excluded 1 warm-up + 0 cold" in text
    assert "pacer lag max 16 ms" in text and "loop lag max 19 ms" in text
    assert "results tests/tui/data/run" in text and "complete" in text
    # the pacer lag is over the pipeline's 10 ms limit: it is drawn as a warning
    line = status_line(model)
    start = line.plain.index("16 ms")
    assert any(s.start <= start < s.end and "red" in str(s.style) for s in line.spans)
    model.skipped_lines = 2
    assert "2 unreadable line(s) skipped" in text_of(status_line(model), width=200)
