"""Shared pieces of the TUI tests: the saved run, literal turns, rendering to plain text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console, RenderableType

from voicelat.core.base.contract import SEGMENTS
from voicelat.core.base.turn import SpanRecord, Turn
from voicelat.files.results import load_run
from voicelat.tui.model import RunModel

#: A real run of 15 turns on the embedded stack (1 warm-up, 1 flagged for pacer lag).
SAVED_RUN = Path(__file__).resolve().parent / "data" / "run"
#: How the saved run's path is shown in snapshots (the absolute path differs per checkout).
SHOWN_PATH = Path("tests/tui/data/run")
MS = 1_000_000


def saved_model() -> RunModel:
    """The saved run as ``voicelat view`` loads it, with a checkout-independent path."""
    model = RunModel.from_loaded(load_run(SAVED_RUN))
    model.results_path = SHOWN_PATH
    return model


def text_of(renderable: RenderableType, width: int = 80) -> str:
    """Plain text of a renderable at a fixed width (what a user reads, without colour)."""
    console = Console(width=width, color_system=None, force_terminal=False, record=True)
    console.print(renderable)
    return console.export_text()


def make_turn(index: int, segments_ms: dict[str, float] | None = None, **kw: Any) -> Turn:
    """A literal turn whose milestones sit on the critical path implied by its segments."""
    seg_ns = {s: int((segments_ms or {}).get(s, 10) * MS) for s in SEGMENTS}
    speech_end = 2000 * MS
    milestones = {"speech_start": 500 * MS, "speech_end": speech_end}
    names = (
        "endpoint",
        "stt_final",
        "llm_request",
        "llm_first_token",
        "tts_request",
        "tts_first_byte",
        "tts_first_audible",
        "output_first_audible",
    )
    t = speech_end
    for name, seg in zip(names, SEGMENTS, strict=True):
        t += seg_ns[seg]
        milestones[name] = t
    base: dict[str, Any] = {
        "index": index,
        "fixture": f"fx{index}",
        "t0_ns": 0,
        "milestones": milestones,
        "segments": seg_ns,
        "e2e_ns": sum(seg_ns.values()),
        "figures": {"pacer_lag_max_ns": 1 * MS, "loop_lag_max_ns": 2 * MS},
        "spans": (SpanRecord("llm", "connect", 0, 3 * MS),),
        "transcript": "hello there",
        "expected": "Hello there.",
        "reply": "Hi!",
    }
    base.update(kw)
    return Turn(**base)
