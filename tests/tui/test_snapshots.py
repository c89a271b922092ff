"""Snapshot tests (pytest-textual-snapshot) of the saved run at a fixed 120x40 terminal.

Update after an intended change with ``pytest tests/tui --snapshot-update`` and look at the
new SVGs in ``__snapshots__`` before committing them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.tui.helpers import MS, saved_model
from voicelat.cli.view import load_comparison
from voicelat.tui.app import VoicelatApp
from voicelat.tui.compare import CompareApp
from voicelat.tui.model import LiveTurn

SIZE = (120, 40)


def test_view_at_p50(snap_compare: Any) -> None:
    assert snap_compare(VoicelatApp(saved_model()), terminal_size=SIZE)


def test_view_at_p90(snap_compare: Any) -> None:
    assert snap_compare(VoicelatApp(saved_model()), press=["p"], terminal_size=SIZE)


def test_over_budget_segment_stands_out(snap_compare: Any) -> None:
    model = saved_model()
    # A budget this run breaks at P90, and an STT limit it breaks on its own.
    model.budget = {"e2e": {"p50_ms": 1100, "p90_ms": 1000}, "stt": {"p90_ms": 300}}
    assert snap_compare(VoicelatApp(model), press=["p"], terminal_size=SIZE)


def test_turn_detail(snap_compare: Any) -> None:
    assert snap_compare(
        VoicelatApp(saved_model()), press=["down", "down", "enter"], terminal_size=SIZE
    )


def test_turns_sorted_by_e2e(snap_compare: Any) -> None:
    assert snap_compare(VoicelatApp(saved_model()), press=["s"], terminal_size=SIZE)


def test_live_turn_in_flight(snap_compare: Any) -> None:
    model = saved_model()
    model.turns = model.turns[:6]
    model.live_mode, model.status, model.planned = True, "running", 15
    # turn 6 is past its STT final and waiting for the LLM's first token
    model.live = LiveTurn(
        6,
        "drive_to_work",
        False,
        2000 * MS,
        {"endpoint": 2500 * MS, "stt_final": 2790 * MS},
        t0_clock_ns=0,
    )
    app = VoicelatApp(model, clock=lambda: 2000 * MS + 850 * MS)
    assert snap_compare(app, terminal_size=SIZE)


def test_terminal_too_small(snap_compare: Any) -> None:
    assert snap_compare(VoicelatApp(saved_model()), terminal_size=(50, 15))


def test_compact_layout_in_80x24(snap_compare: Any) -> None:
    # A default terminal: the whole P50 waterfall over the turns table, no refusal.
    assert snap_compare(VoicelatApp(saved_model()), terminal_size=(80, 24))


# -- pictures (issue 18 item 7) and a saved comparison (item 6) ------------------------------
COMPARE_DIR = Path(__file__).resolve().parent / "data" / "compare"


def test_run_pictures(snap_compare: Any) -> None:
    # g: e2e distribution, e2e over the run, per fixture and WER, in the palette's colours.
    assert snap_compare(VoicelatApp(saved_model()), press=["g"], terminal_size=SIZE)


def _compare_app() -> CompareApp:
    loaded = load_comparison(COMPARE_DIR)
    return CompareApp(loaded.doc, loaded.runs)


def test_saved_comparison(snap_compare: Any) -> None:
    # voicelat view COMPARE_DIR: ranking, every combination at P50 with WER, segments.
    assert snap_compare(_compare_app(), terminal_size=SIZE)


def test_comparison_drill_down(snap_compare: Any) -> None:
    # enter on the second ranking row: that combination's waterfalls and pictures.
    assert snap_compare(_compare_app(), press=["down", "enter"], terminal_size=SIZE)


def test_saved_comparison_in_80x24(snap_compare: Any) -> None:
    # A default terminal: the ranking and the side-by-side bars still fit, scrolling below.
    assert snap_compare(_compare_app(), terminal_size=(80, 24))
