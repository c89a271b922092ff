"""The compare screen: a finished comparison in the terminal.

The ranking, every combination side by side (stacked P50 bars in rank order, WER beside the
latency when the fixtures have transcripts), the per-segment table; ``enter`` on a ranking row
opens that combination: its P50/P90 waterfalls and its run's pictures. Opened after the last
turn (``voicelat compare``) or on a saved comparison (``voicelat view COMPARE_DIR``), so it
never shares a moment, let alone an event loop, with a measurement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Footer, Static

from voicelat.core.turn import Turn
from voicelat.report.chartdata import accuracy
from voicelat.report.comparison import comparison_text, ranking_rows, segment_rows, trust_lines
from voicelat.report.comparison_html import accuracy_rows
from voicelat.tui.charts import CombosView
from voicelat.tui.pictures import CombinationScreen


class CompareApp(App[None]):
    """Ranking on top, every combination's P50 bar, per-segment P50/P90 below; ``enter``
    opens a combination, ``q`` quits."""

    TITLE = "voicelat compare"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("q", "quit", "quit")]
    CSS = """
    #ranking, #segments, #accuracy { height: auto; margin: 1 0; }
    #combos { height: auto; margin: 1 0 0 0; }
    .note { color: $text-muted; }
    .warn { color: $error; text-style: bold; }
    """

    def __init__(
        self, doc: Mapping[str, Any], runs: Mapping[str, Sequence[Turn]] | None = None
    ) -> None:
        super().__init__()
        self.doc = doc
        #: Combination name -> its turns (from its run directory), when they could be read.
        self.runs = dict(runs or {})
        self.accuracy = {name: accuracy(turns) for name, turns in self.runs.items()}

    def compose(self) -> ComposeResult:
        head = comparison_text(self.doc).splitlines()
        scored = any(a.wer is not None for a in self.accuracy.values())
        with VerticalScroll():
            yield Static(head[0], id="title")
            yield Static(head[1], classes="note")
            yield DataTable(id="ranking", zebra_stripes=True, cursor_type="row")
            for line in trust_lines(self.doc):
                yield Static(line, classes="warn")
            yield Static("enter: open a combination (its waterfalls and pictures)", classes="note")
            yield Static(CombosView(self.doc.get("combinations", []), self.accuracy), id="combos")
            if scored:
                yield Static("Transcript accuracy beside latency", classes="note")
                yield DataTable(id="accuracy", zebra_stripes=True, cursor_type="row")
            yield Static(
                "Per-segment P50 / P90 ms (each on its own: percentiles do not add up to e2e)",
                classes="note",
            )
            yield DataTable(id="segments", zebra_stripes=True, cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        tables = [("#ranking", ranking_rows(self.doc)), ("#segments", segment_rows(self.doc))]
        if self.query("#accuracy"):
            combos = self.doc.get("combinations", [])
            tables.append(("#accuracy", accuracy_rows(combos, self.accuracy)))
        for table_id, rows in tables:
            table = self.query_one(table_id, DataTable)
            table.add_columns(*rows[0])
            for r in rows[1:]:
                table.add_row(*r)
        self.query_one("#ranking", DataTable).focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id != "ranking":
            return
        combos = list(self.doc.get("combinations", []))
        if 0 <= event.cursor_row < len(combos):
            combo = combos[event.cursor_row]
            self.push_screen(CombinationScreen(combo, self.runs.get(str(combo.get("name")))))


def show_comparison(
    doc: Mapping[str, Any], runs: Mapping[str, Sequence[Turn]] | None = None
) -> int:
    """Open the compare screen and block until the user quits; Textual's return code."""
    app = CompareApp(doc, runs)
    app.run()
    return app.return_code or 0


__all__ = ["CompareApp", "show_comparison"]
