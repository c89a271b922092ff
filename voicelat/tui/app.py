"""The Textual app: a saved run (``voicelat view``) or a live one (``voicelat run``).

Widgets here only place things: what they show comes from :class:`~voicelat.tui.model.RunModel`
and the pure renderables of :mod:`voicelat.tui.render`. In a live run the measuring happens in
another process; the app drains a thread-safe queue of its events on its own timer (see
:mod:`voicelat.tui.live`), so a slow repaint can never hold up a timestamp.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable, Iterable
from typing import ClassVar, Protocol

from rich.text import Text
from textual import events
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Footer, Static

from voicelat.core.base.stats import PERCENTILES
from voicelat.core.base.turn import Turn
from voicelat.core.measure.clock import now_ns
from voicelat.tui.model import (
    SORT_KEYS,
    SORT_LABELS,
    RunEnded,
    RunEvent,
    RunModel,
    TurnFinished,
    next_in,
    sorted_positions,
)
from voicelat.tui.render import (
    NOT_ADDITIVE,
    TURN_COLUMNS,
    band_caption,
    band_view,
    shows_live,
    spans_table,
    stats_view,
    status_line,
    title_line,
    turn_cells,
    turn_detail,
    turn_pane,
)

#: The full layout (the turn and the waterfall side by side, the percentile tables beside the
#: turns). Below it the compact layout shows the waterfall over the turns table, full width.
FULL_WIDTH = 100
FULL_HEIGHT = 30
#: Below this even the compact layout cannot show a waterfall legibly: say so instead.
MIN_WIDTH = 60
MIN_HEIGHT = 18

#: How often the UI drains the event queue (s). Slower than a frame, fast enough to look live.
POLL_S = 0.05
#: At most this many events per drain, so a burst cannot starve input handling.
MAX_EVENTS_PER_POLL = 200
#: How often the live turn's "now" cursor moves when no event arrived (per second).
CURSOR_HZ = 5


class RunController(Protocol):
    """The measuring run as the app sees it (see ``voicelat.tui.live.ChildRun``)."""

    events: queue.SimpleQueue[RunEvent]

    def start(self) -> None:
        """Start measuring (called once the app is up)."""

    def request_stop(self) -> None:
        """Ask the run to stop (finished turns kept, summary written); returns at once."""

    @property
    def done(self) -> bool:
        """The run has finished (summary written, servers stopped)."""


class TurnDetail(ModalScreen[None]):
    """One turn in full: milestones, waterfall, sub-spans, texts, lags, flags."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Back"),
        Binding("enter", "dismiss", "Back", show=False),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self, turn: Turn, model: RunModel, percentile: int) -> None:
        super().__init__()
        self.turn = turn
        self.model = model
        self.percentile = percentile

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="detail"):
            yield Static(
                turn_detail(self.turn, self.model.budget, self.percentile), id="detail-body"
            )
        yield Footer()

    def on_mount(self) -> None:
        box = self.query_one("#detail", VerticalScroll)
        box.border_title = f"turn {self.turn.index}: {self.turn.fixture}"
        box.border_subtitle = "esc: back"


class TurnsTable(DataTable[Text]):
    """The turns table; ``enter`` on a row opens its detail (shown in the footer)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Turn detail"),
    ]


class VoicelatApp(App[None]):
    """Turns, the live turn, the budget waterfall at a percentile, tables and a status line."""

    CSS_PATH = "app.tcss"
    TITLE = "voicelat"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
        Binding("p", "cycle_percentile", "P50/P90/P99"),
        Binding("s", "cycle_sort", "Sort turns"),
        Binding("g", "pictures", "Pictures"),
    ]

    def __init__(
        self,
        model: RunModel,
        controller: RunController | None = None,
        clock: Callable[[], int] = now_ns,
    ) -> None:
        super().__init__()
        self.model = model
        self.controller = controller
        #: The clock of the live turn's "now" cursor (the measuring clock; tests pin it).
        self.clock = clock
        #: Plain attributes, not reactives: each change repaints explicitly, so a repaint can
        #: never re-enter itself through a watcher.
        self.percentile = PERCENTILES[0]
        self.sort_key = SORT_KEYS[0]
        self.selected: int | None = None
        self._quitting = False
        self._cursor_at = 0.0

    # -- layout ------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        with Vertical(id="main"):
            yield Static(id="title")
            with Horizontal(id="top"):
                yield Static(id="turn")
                yield Static(id="waterfall")
            with Horizontal(id="bottom"):
                yield TurnsTable(id="turns", cursor_type="row", zebra_stripes=True)
                with VerticalScroll(id="stats"):
                    yield Static(id="segments")
                    yield Static(NOT_ADDITIVE, id="not-additive")
                    yield Static(id="spans")
            yield Static(id="status")
        yield Static(id="too-small")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#turn", Static).border_title = "Turn"
        self.query_one("#stats", VerticalScroll).border_title = "Percentiles"
        table = self.query_one("#turns", TurnsTable)
        for col in TURN_COLUMNS:
            table.add_column(col, key=col)
        self._check_size(self.size.width, self.size.height)
        self._refresh_all()
        if self.model.skipped_lines:
            self.notify(
                f"{self.model.skipped_lines} unreadable line(s) in turns.jsonl were skipped "
                "(a run killed mid-write); showing the turns that could be read",
                severity="warning",
                timeout=8,
            )
        if self.controller is not None:
            # Anything printed in this process while the screen is up (a library's warning)
            # goes to the turn pane's log instead of scribbling over the screen.
            self.begin_capture_print(self, stdout=True, stderr=True)
            self.controller.start()
            self.set_interval(POLL_S, self.poll_events)
        table.focus()

    def on_resize(self, event: events.Resize) -> None:
        self._check_size(event.size.width, event.size.height)
        self._refresh_status()  # the status line's wording follows the width

    def _check_size(self, width: int, height: int) -> None:
        small = width < MIN_WIDTH or height < MIN_HEIGHT
        # A default 80x24 terminal gets the compact layout, not a refusal.
        self.screen.set_class(
            not small and (width < FULL_WIDTH or height < FULL_HEIGHT), "-compact"
        )
        self.screen.set_class(small, "-too-small")
        if small:
            self.query_one("#too-small", Static).update(
                f"Terminal too small: {width}×{height}.\n"
                f"voicelat needs at least {MIN_WIDTH}×{MIN_HEIGHT}: enlarge the window, "
                "or press q to quit."
            )

    # -- refreshing --------------------------------------------------------------------------
    def _refresh_all(self) -> None:
        self.query_one("#title", Static).update(title_line(self.model))
        self._refresh_table()
        self._refresh_waterfall()
        self._refresh_stats()
        self._refresh_turn()
        self._refresh_status()

    def _refresh_table(self) -> None:
        """Rebuild the turns table in the current sort order, keeping the cursor on its turn.

        Rows are keyed by position in ``model.turns``, not by turn index, so a results file
        that repeats an index (two runs concatenated) still opens.
        """
        table = self.query_one("#turns", TurnsTable)
        keep = self.selected
        table.clear()
        for pos in sorted_positions(self.model.turns, self.sort_key):
            table.add_row(*turn_cells(self.model.turns[pos]), key=str(pos))
        self._table_titles(table)
        if keep is not None and keep < len(self.model.turns):
            table.move_cursor(row=table.get_row_index(str(keep)))

    def _append_row(self, pos: int) -> None:
        """Add the newest turn's row; a full rebuild only when the sort order needs it."""
        table = self.query_one("#turns", TurnsTable)
        turns = self.model.turns
        in_order = self.sort_key == "index" and all(t.index <= turns[pos].index for t in turns)
        if not in_order or table.row_count != pos:
            self._refresh_table()
            return
        # In run order a new turn goes last: one row instead of a rebuild keeps the repaint
        # small (its CPU time is taken from the cores the measuring process and servers use).
        table.add_row(*turn_cells(turns[pos]), key=str(pos))
        self._table_titles(table)
        if self.selected == pos:
            table.move_cursor(row=pos)

    def _table_titles(self, table: TurnsTable) -> None:
        table.border_title = f"Turns ({len(self.model.turns)})"
        table.border_subtitle = f"s: sort by {SORT_LABELS[self.sort_key]} · enter: detail"

    def _refresh_waterfall(self) -> None:
        pane = self.query_one("#waterfall", Static)
        band = self.model.bands().get(self.percentile)
        title = f"P{self.percentile} budget waterfall"
        # n and what the bars average go in the title, leaving the pane's rows to the verdict.
        pane.border_title = f"{title} · {band_caption(band, short=True)}" if band else title
        pane.border_subtitle = "p: P50/P90/P99"
        pane.update(band_view(self.model, self.percentile, with_caption=False))

    def _refresh_stats(self) -> None:
        self.query_one("#segments", Static).update(
            stats_view(self.model.segment_dists(), self.model.instrument)
        )
        self.query_one("#spans", Static).update(spans_table(self.model.span_dists()))

    def _refresh_turn(self) -> None:
        pane = self.query_one("#turn", Static)
        selected = self._selected_turn()
        pane.border_title = "Live turn" if shows_live(self.model, selected) else "Turn"
        pane.update(turn_pane(self.model, selected, self.percentile, self.clock()))

    def _selected_turn(self) -> Turn | None:
        pos = self.selected
        return self.model.turns[pos] if pos is not None and pos < len(self.model.turns) else None

    def _refresh_status(self) -> None:
        # The status bar's padding takes one cell each side: the line must fit the rest.
        width = max(20, self.size.width - 2)
        self.query_one("#status", Static).update(status_line(self.model, width))

    # -- live events -------------------------------------------------------------------------
    def poll_events(self) -> None:
        """Drain what the measuring process reported and repaint only what changed.

        Every repaint is CPU time taken from the cores the measuring process and the servers
        run on, so an idle tick repaints nothing, and the live turn's "now" cursor moves at
        most ``CURSOR_HZ`` times a second.
        """
        controller = self.controller
        if controller is None:
            return
        got = False
        added: list[int] = []
        ended = False
        for _ in range(MAX_EVENTS_PER_POLL):
            try:
                event = controller.events.get_nowait()
            except queue.Empty:
                break
            got = True
            newest = len(self.model.turns) - 1
            self.model.apply(event)
            ended = ended or isinstance(event, RunEnded)
            if isinstance(event, TurnFinished):
                added.append(len(self.model.turns) - 1)
                # Follow the run: keep the cursor on the newest turn unless the user moved it.
                if self.selected is None or self.selected == newest:
                    self.selected = added[-1]
        if added:
            for pos in added:
                self._append_row(pos)
            self._refresh_waterfall()
        if added or ended:
            self._refresh_stats()  # the run's end brings its error bar
        # A redraw throttle, not a measurement: it needs no measuring clock.
        now = time.monotonic()
        if got or (self.model.live is not None and now - self._cursor_at >= 1 / CURSOR_HZ):
            self._cursor_at = now
            self._refresh_turn()
        if got:
            self._refresh_status()
        if self._quitting and controller.done and controller.events.empty():
            self.exit()

    def on_print(self, event: events.Print) -> None:
        for line in event.text.splitlines():
            if line.strip():
                self.model.setup_log.append(line.strip())

    # -- actions -----------------------------------------------------------------------------
    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        """The command palette (ctrl+p) offers voicelat's own actions first, then Textual's."""
        yield SystemCommand(
            "Waterfall: next percentile",
            "show the P50 / P90 / P99 waterfall (key p)",
            self.action_cycle_percentile,
        )
        yield SystemCommand(
            "Sort turns",
            f"sort the turns table by the next key (key s; now {self.sort_key})",
            self.action_cycle_sort,
        )
        yield SystemCommand(
            "Pictures",
            "e2e distribution, e2e over the run, per fixture, WER (key g)",
            self.action_pictures,
        )
        yield SystemCommand(
            "Open the highlighted turn",
            "its milestones, waterfall, spans and texts (enter)",
            self.action_open_turn,
        )
        yield SystemCommand(
            "Quit voicelat",
            "a live run is stopped first: finished turns are kept (key q)",
            self.action_quit,
        )
        yield from super().get_system_commands(screen)

    async def action_quit(self) -> None:
        """Quit; a live run is cancelled first, and the app waits for its summary and servers."""
        controller = self.controller
        if controller is None or controller.done:
            self.exit()
            return
        if not self._quitting:
            self._quitting = True
            self.model.status = "stopping"
            controller.request_stop()
            self.notify("stopping: finished turns are saved; writing the summary, stopping servers")
            self._refresh_status()

    def action_cycle_percentile(self) -> None:
        """Show the waterfall at the next percentile (P50 -> P90 -> P99)."""
        self.percentile = next_in(PERCENTILES, self.percentile)
        self._refresh_waterfall()
        self._refresh_turn()

    def action_cycle_sort(self) -> None:
        """Sort the turns table by the next key."""
        self.set_sort(next_in(SORT_KEYS, self.sort_key))

    def set_sort(self, key: str) -> None:
        """Sort the turns table by ``key`` (one of ``SORT_KEYS``)."""
        self.sort_key = key
        self._refresh_table()

    def action_pictures(self) -> None:
        """Open the run's pictures: e2e distribution, e2e over the run, per fixture, WER."""
        from voicelat.tui.pictures import PicturesScreen

        title = f"{self.model.pipeline_name}: {len(self.model.turns)} turn(s)"
        self.push_screen(PicturesScreen(self.model.turns, self.model.budget, title))

    def action_open_turn(self) -> None:
        """Open the highlighted turn's detail."""
        if (turn := self._selected_turn()) is not None:
            self.push_screen(TurnDetail(turn, self.model, self.percentile))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self.selected = int(event.row_key.value)
            self._refresh_turn()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.selected = int(event.row_key.value)
            self.action_open_turn()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        # Clicking a column header sorts by it, where the column has a sort order.
        by_column = {
            "#": "index",
            "fixture": "fixture",
            "e2e ms": "e2e",
            "largest": "largest",
            "result": "status",
        }
        key = by_column.get(str(event.column_key.value))
        if key is not None:
            self.set_sort(key)
