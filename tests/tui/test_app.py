"""The App driven with Pilot: keys, the turn detail, the too-small message, a live run's events."""

from __future__ import annotations

import queue
import threading
from dataclasses import replace

from textual.geometry import Region
from textual.widget import Widget
from textual.widgets import DataTable, Static

from tests.tui.helpers import MS, make_turn, saved_model
from voicelat.tui.app import TurnDetail, VoicelatApp
from voicelat.tui.model import (
    MilestoneSeen,
    RunEnded,
    RunEvent,
    RunModel,
    SetupLine,
    TurnFinished,
    TurnStarted,
)

SIZE = (120, 40)


def _shown(widget: Widget) -> str:
    """What a widget shows on screen right now, as plain text (one line per row)."""
    size = widget.outer_size
    lines = widget.render_lines(Region(0, 0, size.width, size.height))
    return "\n".join(line.text for line in lines)


def _text(app: VoicelatApp, selector: str) -> str:
    """What the widget ``selector`` of the current screen shows."""
    return _shown(app.screen.query_one(selector))


def _status(app: VoicelatApp) -> str:
    """The status line, its wrapped rows joined back into one line."""
    return " ".join(row.strip() for row in _text(app, "#status").splitlines())


def _first_column(app: VoicelatApp) -> list[str]:
    table = app.query_one("#turns", DataTable)
    return [str(table.get_row_at(i)[0]) for i in range(table.row_count)]


async def test_view_shows_every_turn_and_the_p50_waterfall() -> None:
    app = VoicelatApp(saved_model())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.query_one("#turns", DataTable).row_count == 15
        assert app.query_one("#waterfall").border_title == (
            "P50 budget waterfall · n=14 · bars: mean of 1 turn"
        )
        assert "▼ P50 e2e 1066 ms" in _text(app, "#waterfall")
        assert "band mean e2e     1059 ms" in _text(app, "#waterfall")
        assert "not additive" in _text(app, "#segments")
        assert "turns 15/15" in _status(app)


async def test_p_cycles_the_waterfall_through_p50_p90_p99() -> None:
    app = VoicelatApp(saved_model())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("p")
        assert str(app.query_one("#waterfall").border_title).startswith("P90 budget waterfall")
        assert "▼ P90 e2e 1186 ms" in _text(app, "#waterfall")
        await pilot.press("p")
        assert "no P99 e2e budget set" in _text(app, "#waterfall")
        await pilot.press("p")
        assert app.percentile == 50


async def test_s_sorts_the_turns_and_the_cursor_keeps_its_turn() -> None:
    app = VoicelatApp(saved_model())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("down", "down")
        assert app.selected == 2
        await pilot.press("s")  # e2e, slowest first
        assert app.sort_key == "e2e"
        assert _first_column(app)[:3] == ["12", "13", "11"]
        table = app.query_one("#turns", DataTable)
        assert str(table.get_row_at(table.cursor_row)[0]) == "2"
        assert "sort by e2e" in str(table.border_subtitle)


async def test_clicking_a_header_sorts_by_that_column() -> None:
    app = VoicelatApp(saved_model())
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one("#turns", DataTable)
        table.post_message(
            DataTable.HeaderSelected(
                table, table.ordered_columns[1].key, 1, table.ordered_columns[1].label
            )
        )
        await pilot.pause()
        assert app.sort_key == "fixture"
        assert _first_column(app)[:2] == ["3", "14"]  # book_table, calendar_afternoon


async def test_the_highlighted_turn_fills_the_turn_pane() -> None:
    app = VoicelatApp(saved_model())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("down", "down", "down")
        assert "turn 3  book_table  e2e 979 ms  warm" in _text(app, "#turn")


async def test_enter_opens_the_turn_detail_and_escape_closes_it() -> None:
    app = VoicelatApp(saved_model())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("down", "down", "enter")
        assert isinstance(app.screen, TurnDetail)
        assert app.screen.turn.index == 2
        body = _shown(app.screen.query_one("#detail-body", Static))
        assert "timer_ten_minutes" in body and "✗ 1 word(s) differ" in body
        assert "Milestones" in body and "pacer lag" in body
        await pilot.press("escape")
        assert not isinstance(app.screen, TurnDetail)


async def test_q_quits_from_the_main_screen_and_from_the_detail() -> None:
    app = VoicelatApp(saved_model())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running
    app = VoicelatApp(saved_model())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("enter")
        assert isinstance(app.screen, TurnDetail)
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running


async def test_a_terminal_too_small_gets_a_message_not_a_garbled_screen() -> None:
    app = VoicelatApp(saved_model())
    async with app.run_test(size=(50, 15)) as pilot:
        await pilot.pause()
        assert app.screen.has_class("-too-small")
        assert not app.query_one("#main").display
        message = _text(app, "#too-small")
        assert "Terminal too small: 50×15" in message and "at least 60×18" in message
        await pilot.resize_terminal(*SIZE)
        await pilot.pause()
        assert not app.screen.has_class("-too-small")
        assert app.query_one("#main").display


async def test_a_default_80x24_terminal_gets_the_compact_layout() -> None:
    app = VoicelatApp(saved_model())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.screen.has_class("-compact") and not app.screen.has_class("-too-small")
        assert app.query_one("#main").display
        # The waterfall and the turns table, full width; the side panes need the full layout.
        assert app.query_one("#waterfall").display and app.query_one("#turns").display
        assert not app.query_one("#turn").display and not app.query_one("#stats").display
        assert app.query_one("#waterfall").region.width == 80
        await pilot.resize_terminal(*SIZE)
        await pilot.pause()
        assert not app.screen.has_class("-compact")
        assert app.query_one("#turn").display and app.query_one("#stats").display


async def test_skipped_lines_are_announced() -> None:
    model = saved_model()
    model.skipped_lines = 1
    app = VoicelatApp(model)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert any("1 unreadable line(s)" in str(n.message) for n in app._notifications)
        assert "1 unreadable line(s) skipped" in _status(app)


class FakeRun:
    """Stands in for the measuring thread: the test puts events, the app drains them."""

    def __init__(self) -> None:
        self.events: queue.SimpleQueue[RunEvent] = queue.SimpleQueue()
        self.started = threading.Event()
        self.stop_requested = threading.Event()
        self.finished = False

    def start(self) -> None:
        self.started.set()

    def request_stop(self) -> None:
        self.stop_requested.set()

    @property
    def done(self) -> bool:
        return self.finished


def _live_model() -> RunModel:
    return RunModel(
        results_path=saved_model().results_path,
        planned=3,
        budget={"e2e": {"p50_ms": 2500}},
        pipeline_name="fake",
        live_mode=True,
        pacer_lag_limit_ns=10 * MS,
    )


async def test_a_live_run_shows_milestones_as_they_arrive_then_the_settled_turn() -> None:
    run = FakeRun()
    clock = [10_000 * MS]
    app = VoicelatApp(_live_model(), controller=run, clock=lambda: clock[0])
    async with app.run_test(size=SIZE) as pilot:
        assert run.started.is_set()
        run.events.put(SetupLine("embedded stack ready in 0.1 s"))
        await pilot.pause(0.15)
        assert "embedded stack ready" in _text(app, "#turn")
        run.events.put(TurnStarted(0, "alpha", 3, False, 2000 * MS))
        # endpoint seen 480 ms after speech_end; the UI clock then reads 10 s
        run.events.put(MilestoneSeen(0, "endpoint", 2480 * MS, 10_000 * MS))
        await pilot.pause(0.15)
        assert app.query_one("#turn").border_title == "Live turn"
        pane = _text(app, "#turn")
        assert "turn 0  alpha" in pane and "+480" in pane and "now +480 ms" in pane
        assert "stt_final" in pane and "…" in pane
        clock[0] += 300 * MS  # the cursor moves with the clock while nothing arrives
        await pilot.pause(0.3)
        assert "now +780 ms" in _text(app, "#turn")
        turn = make_turn(0, {"llm_ttft": 300}, fixture="alpha")
        run.events.put(TurnFinished(turn, 3))
        await pilot.pause(0.15)
        assert app.query_one("#turns", DataTable).row_count == 1
        assert "turn 0  alpha  e2e 370 ms" in _text(app, "#turn")
        assert "turns 1/3" in _status(app) and "running" in _status(app)
        # the next turn starts: while its audio plays, the finished turn stays on screen
        run.events.put(TurnStarted(1, "beta", 3, False, 2000 * MS))
        await pilot.pause(0.15)
        assert app.query_one("#turn").border_title == "Turn"
        assert "turn 0  alpha  e2e 370 ms" in _text(app, "#turn")
        assert "next: turn 1 beta" in _text(app, "#turn")
        run.events.put(MilestoneSeen(1, "endpoint", 2500 * MS, 20_000 * MS))
        await pilot.pause(0.15)
        assert app.query_one("#turn").border_title == "Live turn"
        # the second turn finishes: the cursor follows the newest turn
        run.events.put(TurnFinished(replace(turn, index=1, fixture="beta"), 3))
        await pilot.pause(0.15)
        assert app.selected == 1
        assert "n=2 · bars: mean of 1 turn" in _text(app, "#waterfall")


async def test_q_during_a_live_run_stops_it_and_waits_for_the_runner() -> None:
    run = FakeRun()
    app = VoicelatApp(_live_model(), controller=run)
    async with app.run_test(size=SIZE) as pilot:
        run.events.put(TurnStarted(0, "alpha", 3, False, 2000 * MS))
        await pilot.pause(0.1)
        await pilot.press("q")
        await pilot.pause(0.1)
        assert run.stop_requested.is_set()
        # still up: the runner has not written its summary yet
        assert app.is_running and "stopping" in _status(app)
        run.events.put(RunEnded("interrupted", "stopped by the user"))
        run.finished = True
        await pilot.pause(0.2)
        assert not app.is_running
    assert app.model.status == "interrupted"


async def test_ctrl_c_stops_a_live_run_like_q() -> None:
    run = FakeRun()
    app = VoicelatApp(_live_model(), controller=run)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+c")
        await pilot.pause(0.1)
        assert run.stop_requested.is_set() and app.is_running
        run.events.put(RunEnded("interrupted"))
        run.finished = True
        await pilot.pause(0.2)
        assert not app.is_running


async def test_q_after_the_run_completed_quits_at_once() -> None:
    run = FakeRun()
    app = VoicelatApp(_live_model(), controller=run)
    async with app.run_test(size=SIZE) as pilot:
        run.events.put(RunEnded("complete"))
        run.finished = True
        await pilot.pause(0.15)
        assert "complete" in _status(app)
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running
        assert not run.stop_requested.is_set()


async def test_a_failed_run_shows_its_reason_on_the_status_line() -> None:
    run = FakeRun()
    app = VoicelatApp(_live_model(), controller=run)
    async with app.run_test(size=SIZE) as pilot:
        run.events.put(RunEnded("failed", "embedded stack: llm did not start"))
        run.finished = True
        await pilot.pause(0.15)
        assert "failed: embedded stack: llm did not start" in _status(app)


async def test_turns_sharing_an_index_still_open() -> None:
    model = saved_model()
    model.turns = model.turns[:3] + model.turns[:3]  # two runs' lines in one file
    app = VoicelatApp(model)
    async with app.run_test(size=SIZE) as pilot:
        assert app.query_one("#turns", DataTable).row_count == 6
        await pilot.press("down", "down", "down", "down", "enter")
        # rows in index order: 0 0 1 1 2 2
        assert isinstance(app.screen, TurnDetail) and app.screen.turn.index == 2


async def test_live_rows_keep_the_chosen_sort_order() -> None:
    run = FakeRun()
    app = VoicelatApp(_live_model(), controller=run)
    async with app.run_test(size=SIZE) as pilot:
        for i, llm_ms in enumerate((100, 900, 300)):
            run.events.put(TurnFinished(make_turn(i, {"llm_ttft": llm_ms}), 3))
        await pilot.pause(0.15)
        assert _first_column(app) == ["0", "1", "2"]  # run order: rows appended
        await pilot.press("s")  # slowest first
        run.events.put(TurnFinished(make_turn(3, {"llm_ttft": 500}), 4))
        await pilot.pause(0.15)
        assert _first_column(app) == ["1", "3", "2", "0"]


async def test_the_error_bar_appears_under_the_percentiles_when_the_run_ends() -> None:
    """A live run's percentiles pane has no error bar until its RunEnded brings the summary's
    instrument section; then "± instrument error P99" is under the table."""
    run = FakeRun()
    app = VoicelatApp(_live_model(), controller=run)
    section = {"status": "calibrated", "turns": 3, "error_p50_ns": 300_000, "error_p99_ns": 900_000}
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.1)
        assert "instrument error" not in _text(app, "#segments")
        run.events.put(RunEnded("complete", None, section))
        run.finished = True
        await pilot.pause(0.15)
        assert "± instrument error P99 0.9 ms" in _text(app, "#segments")
