"""The compare screen: a finished comparison in the terminal.

The ranking, every combination side by side (stacked P50 bars in rank order, WER beside the
latency when the fixtures have transcripts), the per-segment table; ``enter`` on a ranking row
opens that combination: its P50/P90 waterfalls and its run's pictures. Opened after the last
turn (``voicelat compare``) or on a saved comparison (``voicelat view COMPARE_DIR``), so it
never shares a moment, let alone an event loop, with a measurement.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from voicelat.core.base.display import fmt_ms
from voicelat.core.base.turn import Turn
from voicelat.report.chartdata import accuracy
from voicelat.report.comparison import (
    UNTRUSTED_MARK,
    comparison_text,
    ranking_rows,
    segment_rows,
    trust_lines,
)
from voicelat.report.comparison_html import accuracy_rows
from voicelat.tui.charts import CombosView
from voicelat.tui.pictures import CombinationScreen


def _table_width(rows: Sequence[Sequence[str]]) -> int:
    """Cells a DataTable needs for ``rows``: each column's widest cell plus its padding."""
    return sum(max(len(r[i]) for r in rows) + 2 for i in range(len(rows[0])))


def _compact_vs(combo: Mapping[str, Any], p: int) -> str:
    if combo.get("rank") == 1:
        return "best"
    v = (combo.get("vs_best") or {}).get(f"p{p}")
    if not v:
        return "-"
    if not v.get("tested"):
        return "n too small"
    diff = fmt_ms(v["diff_ns"], sign=True)
    return f"{diff} ms" if v.get("significant") else f"{diff} n.s."


def compact_ranking_rows(doc: Mapping[str, Any]) -> list[list[str]]:
    """The ranking for a narrow terminal (80 columns): both percentiles and their verdicts
    without the intervals (comparison.md and report.html have them); ``n.s.``: not
    significant."""
    rows = [["#", "combination", "n", "fail", "P50 ms", "P50 vs #1", "P90 ms", "P90 vs #1"]]
    for c in doc.get("combinations", []):
        trust = c.get("trust")
        name = str(c["name"]) + (
            UNTRUSTED_MARK
            if isinstance(trust, Mapping) and trust.get("trustworthy") is False
            else ""
        )
        rank = "-" if c.get("rank") is None else str(c["rank"])
        rate = c.get("failure_rate")
        fail = "-" if rate is None else f"{rate:.0%}"
        if c.get("status") != "ok":
            status = f"{str(c.get('status')).upper()}: {c.get('failure') or c.get('status')}"
            rows.append([rank, name, str(c.get("n", 0)), fail, status, "", "", ""])
            continue
        e2e = c.get("e2e") or {}
        rows.append(
            [
                rank,
                name,
                str(c["n"]),
                fail,
                fmt_ms((e2e.get("p50") or {}).get("ns")),
                _compact_vs(c, 50),
                fmt_ms((e2e.get("p90") or {}).get("ns")),
                _compact_vs(c, 90),
            ]
        )
    return rows


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
            note = Static("", id="ranking-note", classes="note")
            note.display = False  # shown with the compact ranking only
            yield note
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

    def _ranking(self) -> list[list[str]]:
        """The full ranking when it fits the terminal, else the compact one (no P90 column
        cut off at 80x24: it used to need a horizontal scroll nobody finds)."""
        rows = ranking_rows(self.doc)
        return rows if _table_width(rows) <= self.size.width - 2 else compact_ranking_rows(self.doc)

    def on_mount(self) -> None:
        tables = [("#ranking", self._ranking()), ("#segments", segment_rows(self.doc))]
        if self.query("#accuracy"):
            combos = self.doc.get("combinations", [])
            tables.append(("#accuracy", accuracy_rows(combos, self.accuracy)))
        for table_id, rows in tables:
            table = self.query_one(table_id, DataTable)
            table.add_columns(*rows[0])
            for r in rows[1:]:
                table.add_row(*r)
        if tables[0][1][0][-1] == "P90 vs #1":  # the compact ranking: say where the rest is
            note = self.query_one("#ranking-note", Static)
            note.display = True
            note.update(
                "narrow terminal: no confidence intervals here (n.s. = not significant); "
                "comparison.md, report.html or a wider terminal have them"
            )
        self.query_one("#ranking", DataTable).focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "ranking":
            self.open_combination(event.cursor_row)

    def open_combination(self, row: int) -> None:
        """Open the combination on ranking row ``row``: its waterfalls and its run's pictures."""
        combos = list(self.doc.get("combinations", []))
        if 0 <= row < len(combos):
            combo = combos[row]
            self.push_screen(CombinationScreen(combo, self.runs.get(str(combo.get("name")))))

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        """The command palette (ctrl+p): open any combination by name, then Textual's own."""
        for row, combo in enumerate(self.doc.get("combinations", [])):
            yield SystemCommand(
                f"Open {combo.get('name')}",
                f"rank {combo.get('rank') or '-'}: its P50/P90 waterfalls and pictures",
                lambda row=row: self.open_combination(row),
            )
        yield SystemCommand("Quit", "leave the comparison (key q)", self.exit)
        yield from super().get_system_commands(screen)


def show_comparison(
    doc: Mapping[str, Any], runs: Mapping[str, Sequence[Turn]] | None = None
) -> int:
    """Open the compare screen and block until the user quits; Textual's return code."""
    app = CompareApp(doc, runs)
    app.run()
    return app.return_code or 0


__all__ = ["CompareApp", "compact_ranking_rows", "show_comparison"]
