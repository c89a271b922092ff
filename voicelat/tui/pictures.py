"""Screens of pictures: a run's charts (``g`` in the run view) and one combination of a
comparison in full (``enter`` on the compare screen's ranking).

They only place the pure renderables of :mod:`voicelat.tui.charts` and
:mod:`voicelat.tui.render`; saved results only, so nothing here shares a moment with a
measurement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from rich.console import Group, RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from voicelat.core.base.display import fmt_ms
from voicelat.core.base.palette import ordered_segments
from voicelat.core.base.turn import Turn
from voicelat.tui.charts import legend, run_charts
from voicelat.tui.render import DIM, Waterfall


class PicturesScreen(ModalScreen[None]):
    """A run's pictures: e2e distribution, e2e over the run, per fixture, WER."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Back"),
        Binding("g", "dismiss", "Back", show=False),
        Binding("q", "app.quit", "Quit"),
    ]
    DEFAULT_CSS = """
    PicturesScreen { align: center middle; }
    #pictures { width: 96%; height: 94%; border: round $accent; background: $surface;
                padding: 0 1; }
    """

    def __init__(self, turns: Sequence[Turn], budget: Mapping[str, object], title: str) -> None:
        super().__init__()
        self.turns = list(turns)
        self.budget = dict(budget)
        self.title_text = title

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="pictures"):
            yield Static(run_charts(self.turns, self.budget), id="pictures-body")
        yield Footer()

    def on_mount(self) -> None:
        box = self.query_one("#pictures", VerticalScroll)
        box.border_title = self.title_text
        box.border_subtitle = "esc: back"


def band_waterfall_of(band: Mapping[str, Any], p: int) -> Waterfall:
    """A ``comparison.json`` band (``waterfall.pNN``) as the run view's waterfall."""
    segs = {k: float(v) for k, v in (band.get("segments_ns") or {}).items()}
    return Waterfall(
        segments=segs,
        order=ordered_segments(k for k, v in segs.items() if v),
        total_ns=float(band["mean_e2e_ns"]),
        total_label="band mean e2e",
        marker=(f"P{p} e2e", float(band["e2e_percentile_ns"])),
    )


def combination_view(combo: Mapping[str, Any]) -> RenderableType:
    """One combination's P50 and P90 waterfalls (or why it has none) and what it ran."""
    parts: list[RenderableType] = []
    stages = combo.get("stages") or {}
    ran = "; ".join(
        f"{k}: {v.get('stage', '?')}" for k, v in stages.items() if isinstance(v, Mapping)
    )
    if ran:
        parts.append(Text(ran, style=DIM))
    if combo.get("status") != "ok":
        parts.append(Text(f"{str(combo.get('status')).upper()}: {combo.get('failure')}"))
        return Group(*parts)
    for key in ("p50", "p90"):
        band = (combo.get("waterfall") or {}).get(key)
        if not band:
            continue
        p = int(key[1:])
        parts.append(
            Text(
                f"P{p} waterfall: mean of {band.get('band_n', '?')} turn(s) of "
                f"{band.get('n', '?')} around P{p}; exact P{p} "
                f"{fmt_ms(band['e2e_percentile_ns'])} ms",
                style="bold",
            )
        )
        parts.append(band_waterfall_of(band, p))
        parts.append(Text())
    segs = [s for b in (combo.get("waterfall") or {}).values() for s in b.get("segments_ns", {})]
    parts.append(legend(ordered_segments(segs)))
    return Group(*parts)


class CombinationScreen(ModalScreen[None]):
    """One combination of a comparison: its waterfalls, then its run's pictures."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Back"),
        Binding("q", "app.quit", "Quit"),
    ]
    DEFAULT_CSS = """
    CombinationScreen { align: center middle; }
    #combination { width: 96%; height: 94%; border: round $accent; background: $surface;
                   padding: 0 1; }
    """

    def __init__(self, combo: Mapping[str, Any], turns: Sequence[Turn] | None) -> None:
        super().__init__()
        self.combo = combo
        self.turns = list(turns) if turns else []

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="combination"):
            yield Static(combination_view(self.combo), id="combination-waterfalls")
            if self.turns:
                yield Static(run_charts(self.turns, {}), id="combination-pictures")
            else:
                yield Static(
                    Text("its turns.jsonl was not found: no distribution to draw", style=DIM)
                )
        yield Footer()

    def on_mount(self) -> None:
        box = self.query_one("#combination", VerticalScroll)
        box.border_title = f"{self.combo.get('rank') or '-'}. {self.combo.get('name')}"
        box.border_subtitle = "esc: back to the ranking"


__all__ = ["CombinationScreen", "PicturesScreen", "band_waterfall_of", "combination_view"]
