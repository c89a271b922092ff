"""What a new user met in the TUI at a default terminal (issue #29): the comparison's P90
columns cut off at 80x24, the status line wrapped, warnings only in red (lost under NO_COLOR),
and a command palette with none of voicelat's actions."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.command import CommandPalette
from textual.widgets import DataTable, Static

from tests.tui.helpers import saved_model, text_of
from voicelat.cli.view import load_comparison
from voicelat.tui.app import VoicelatApp
from voicelat.tui.compare import CompareApp
from voicelat.tui.pictures import PicturesScreen
from voicelat.tui.render import status_line

COMPARE_DIR = Path(__file__).resolve().parent / "data" / "compare"
SMALL = (80, 24)


async def test_the_comparison_at_80x24_shows_both_percentiles_without_scrolling() -> None:
    loaded = load_comparison(COMPARE_DIR)
    app = CompareApp(loaded.doc, loaded.runs)
    async with app.run_test(size=SMALL) as pilot:
        await pilot.pause()
        ranking = app.query_one("#ranking", DataTable)
        headers = [str(c.label) for c in ranking.columns.values()]
        assert "P90 ms" in headers and "P90 vs #1" in headers
        assert ranking.virtual_size.width <= ranking.size.width, "the ranking scrolls sideways"
        assert ranking.get_row_at(1)[5] == "+141 n.s."  # the verdict kept, in short
        note = str(app.query_one("#ranking-note", Static).render())
        assert "no confidence intervals here" in note
    # A wide terminal still gets the intervals.
    app = CompareApp(loaded.doc, loaded.runs)
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        ranking = app.query_one("#ranking", DataTable)
        assert "e2e P90 ms [95% CI]" in [str(c.label) for c in ranking.columns.values()]


async def test_the_status_line_fits_one_row_at_80_columns() -> None:
    app = VoicelatApp(saved_model())
    async with app.run_test(size=SMALL) as pilot:
        await pilot.pause()
        status = app.query_one("#status", Static)
        assert status.size.height == 1, str(status.render())
        text = str(status.render())
        assert "15/15" in text and "failed 0" in text and "complete" in text


def test_a_warning_on_the_status_line_is_in_words_not_only_in_red() -> None:
    model = saved_model()  # its pacer lag (16 ms) is over the pipeline's 10 ms limit
    for width in (None, 78):
        line = status_line(model, width)
        plain = text_of(line, width=200)  # text_of drops the styles, as NO_COLOR does
        assert "16 ms (over)" in plain, plain
        assert width is None or line.cell_len <= width
    assert "19 ms (over)" not in text_of(status_line(model), width=200)  # loop lag is fine


async def test_the_command_palette_offers_voicelats_actions() -> None:
    app = VoicelatApp(saved_model())
    async with app.run_test(size=SMALL) as pilot:
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for title in ("Waterfall: next percentile", "Sort turns", "Pictures", "Quit voicelat"):
            assert title in titles
        await pilot.press("ctrl+p")
        await pilot.pause()
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"Pictures")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await pilot.pause(0.5)
        assert isinstance(app.screen, PicturesScreen)


async def test_the_compare_palette_opens_a_combination_by_name() -> None:
    loaded = load_comparison(COMPARE_DIR)
    app = CompareApp(loaded.doc, loaded.runs)
    async with app.run_test(size=SMALL):
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Open emu-a" in titles and "Open emu-b" in titles


async def test_docs_tui_svg_is_the_screen_the_tests_pin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # docs/tui.svg had fallen behind the TUI; `python -m tests.tui.screenshot` redraws it.
    from tests.tui import screenshot

    monkeypatch.setattr(screenshot, "DOCS", tmp_path)
    await screenshot.main()
    fresh = (tmp_path / "tui.svg").read_text(encoding="utf-8")
    shipped = (screenshot.DOCS_DEFAULT / "tui.svg").read_text(encoding="utf-8")
    assert fresh == shipped, "docs/tui.svg is stale: run `python -m tests.tui.screenshot`"
