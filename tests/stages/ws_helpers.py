"""Shared by the websocket stage tests: fixture audio, text pieces, collecting events, and the
fault matrix every websocket stage must survive (each fault: one Failed line, last, bounded)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

from tests.helpers import ROOT
from voicelat.audio import PCM, frames, load_for_stage
from voicelat.core.measure.events import Done, Failed, StageEvent

KEY_ENV = "VOICELAT_TEST_WS_KEY"
KEY = "test-key-9f8e7d"
FIXTURE = ROOT / "fixtures" / "weather_paris.wav"
FIXTURE_TEXT = "What's the weather like in Paris today?"


def fixture_pcm(rate: int = 16000) -> PCM:
    return load_for_stage(FIXTURE, rate)


async def audio(pcm: PCM, frame_ms: int = 20, pace_s: float = 0.0) -> AsyncIterable[bytes]:
    """The runner's 20 ms frames; ``pace_s`` sleeps between them (0: as fast as possible)."""
    for frame in frames(pcm, frame_ms):
        yield frame
        if pace_s:
            await asyncio.sleep(pace_s)


async def texts(*pieces: str, gap_s: float = 0.0) -> AsyncIterator[str]:
    for piece in pieces:
        if gap_s:
            await asyncio.sleep(gap_s)
        yield piece


async def collect(events: AsyncIterator[StageEvent], limit_s: float = 10.0) -> list[StageEvent]:
    async def run() -> list[StageEvent]:
        return [e async for e in events]

    return await asyncio.wait_for(run(), limit_s)


#: (profile faults, what the Failed reason must contain). Handshake faults strike every
#: connection attempt (p = 1): the stage's warm-up in __aenter__ and prepare() tolerate them,
#: and the request that needs the connection reports them.
WS_FAULT_MATRIX: list[tuple[dict[str, Any], str]] = [
    ({"http_429": 1.0}, "HTTP 429 from"),
    ({"http_500": 1.0}, "HTTP 500 from"),
    ({"refuse": {"p": 1.0, "seconds": 1.0}}, "connection refused"),
    ({"slow_handshake": {"p": 1.0, "seconds": 2.0}}, "no websocket handshake"),
    ({"stall": {"p": 1.0, "after": 1, "seconds": 3.0}}, "read timeout"),
    ({"truncate": {"p": 1.0, "after": 1}}, "without a websocket close frame (1006)"),
    ({"close_1011": {"p": 1.0, "after": 1}}, "closed the websocket"),
    ({"close_1008": {"p": 1.0, "after": 1}}, "closed the websocket"),
    ({"error_event": {"p": 1.0, "after": 1}}, "error"),
]


def check_one_failure(events: list[StageEvent], expected: str) -> str:
    """Exactly one Failed, the last event, one line, no key, no Done; returns its reason."""
    failed = [e for e in events if isinstance(e, Failed)]
    assert len(failed) == 1, events
    assert events[-1] is failed[0]
    reason = failed[0].reason
    assert expected in reason, reason
    assert "\n" not in reason and KEY not in reason
    assert "Traceback" not in reason
    assert not any(isinstance(e, Done) for e in events)
    return reason
