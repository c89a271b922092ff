"""The endpointing screen: the trade-off curve in characters, the Pareto front, every setting.

Opened by ``voicelat endpointing`` after the grid has run (nothing is measured while it shows).
Points from recorded runs (a provider's own end-of-turn) are in the same tables, marked "wire"
in the ``measured`` column, and the turns they cut off are listed under the grid.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Footer, Static

from voicelat.core.base.display import fmt_ms
from voicelat.report.endpointing import TradeOff, curve_text, cut_turn_lines


class EndpointingApp(App[None]):
    """Curve on top, then the front and the whole grid; ``q`` quits."""

    TITLE = "voicelat endpointing"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("q", "quit", "quit")]
    CSS = """
    #front, #grid { height: auto; margin: 1 0; }
    .note { color: $text-muted; }
    """

    def __init__(self, trade: TradeOff) -> None:
        super().__init__()
        self.trade = trade

    def compose(self) -> ComposeResult:
        t = self.trade
        pick = t.pick
        with VerticalScroll():
            yield Static(
                f"{t.fixtures} fixtures, {t.pauses} annotated pauses; budget "
                f"{100 * t.budget:g}% -> "
                + (pick.config.label if pick else "no configuration within the budget"),
                id="title",
            )
            yield Static(curve_text(t.scores), id="curve")
            yield Static("Pareto front, fastest first", classes="note")
            yield DataTable(id="front", zebra_stripes=True, cursor_type="row")
            yield Static("Every configuration", classes="note")
            yield DataTable(id="grid", zebra_stripes=True, cursor_type="row")
            if t.runs:
                yield Static(_runs_text(t), id="runs")
        yield Footer()

    def on_mount(self) -> None:
        head = (
            "configuration",
            "P50 ms",
            "P90 ms",
            "cut fixtures",
            "cut-offs (in pause)",
            "missed",
            "measured",
        )
        for table_id, scores in (("#front", self.trade.front), ("#grid", self.trade.scores)):
            table = self.query_one(table_id, DataTable)
            table.add_columns(*head)
            for s in scores:
                table.add_row(
                    s.config.label,
                    fmt_ms(s.p50_ns),
                    fmt_ms(s.p90_ns),
                    f"{s.cut_fixtures}/{s.n}",
                    f"{s.cutoffs} ({s.cutoffs_in_pause})",
                    str(s.missed),
                    "on the wire" if s.config.measured_on_wire else "offline replay",
                )


def _runs_text(t: TradeOff) -> str:
    """What the recorded runs' points are, and the turns each provider cut off."""
    lines = [
        "Recorded runs (on the wire: network and the provider's processing included; a cut "
        "turn has no latency):"
    ]
    for run in t.runs:
        cut = cut_turn_lines(run)
        stale = f", {len(run.stale)} stale end-of-turn(s) left out" if run.stale else ""
        lines.append(
            f"{run.score.config.label}  {run.run}: {len(cut)}/{run.score.n} turns cut{stale}"
        )
        lines += [f"  {c}" for c in cut]
    return "\n".join(lines)


def show_endpointing(trade: TradeOff) -> None:
    """Open the endpointing screen and block until the user quits."""
    EndpointingApp(trade).run()
