"""SimulatedSink(spin_after_audible=False): the busy-wait stops once the e2e stamp is taken."""

from __future__ import annotations

import math

import numpy as np

from voicelat.audio import SimulatedSink
from voicelat.core.clock import FakeClock


def _tone(rate: int, ms: int) -> bytes:
    t = np.arange(rate * ms // 1000) / rate
    return (0.5 * np.sin(2 * math.pi * 440 * t) * 32767).astype("<i2").tobytes()


def test_the_spin_stops_after_the_first_audible_frame_only_when_asked() -> None:
    for after, expected in ((True, 1_000_000), (False, 0)):
        sink = SimulatedSink(clock=FakeClock(), spin_ns=1_000_000, spin_after_audible=after)
        assert sink._spin_ns() == 1_000_000  # before the onset: every frame is precise
        sink.feed(_tone(16000, 40), 16000, arrival_ns=0)
        sink.first_audible_ns = 5_000_000  # what _check_audible sets when the frame plays
        assert sink._spin_ns() == expected
