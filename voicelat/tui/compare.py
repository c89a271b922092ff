"""The compare screen: a finished comparison's ranking and segment tables in the terminal.

Self-contained (it only reads the ``comparison.json`` document) and opened after the last turn,
so it never shares a moment, let alone an event loop, with a measurement.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Footer, Static

from voicelat.report.comparison import comparison_text, ranking_rows, segment_rows


class CompareApp(App[None]):
    """Ranking on top, per-segment P50/P90 below; ``q`` quits."""

    TITLE = "voicelat compare"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("q", "quit", "quit")]
    CSS = """
    #ranking, #segments { height: auto; margin: 1 0; }
    .note { color: $text-muted; }
    """

    def __init__(self, doc: Mapping[str, Any]) -> None:
        super().__init__()
        self.doc = doc

    def compose(self) -> ComposeResult:
        head = comparison_text(self.doc).splitlines()
        with VerticalScroll():
            yield Static(head[0], id="title")
            yield Static(head[1], classes="note")
            yield DataTable(id="ranking", zebra_stripes=True, cursor_type="row")
            yield Static(
                "Per-segment P50 / P90 ms (each on its own: percentiles do not add up to e2e)",
                classes="note",
            )
            yield DataTable(id="segments", zebra_stripes=True, cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        for table_id, rows in (
            ("#ranking", ranking_rows(self.doc)),
            ("#segments", segment_rows(self.doc)),
        ):
            table = self.query_one(table_id, DataTable)
            table.add_columns(*rows[0])
            for r in rows[1:]:
                table.add_row(*r)


def show_comparison(doc: Mapping[str, Any]) -> None:
    """Open the compare screen and block until the user quits."""
    CompareApp(doc).run()


__all__ = ["CompareApp", "show_comparison"]
