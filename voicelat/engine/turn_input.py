"""What a turn is fed from and plays into: its prepared input, frame source and sink.

:class:`TurnInput` is a fixture read and cut into 20 ms frames before any timing starts;
:class:`FrameSource` delivers those frames (the real-time :class:`~voicelat.audio.Pacer`, a
microphone, a call's open line); :class:`Sink` plays the reply and stamps its first audible
sample. Every turn shape (cascade, realtime, agent) and the call engine share them.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from voicelat.audio import PCM, first_audible_sample, frames, load_for_stage
from voicelat.audio.fixture_check import check_fixture_audio
from voicelat.files.fixtures import Fixture

__all__ = [
    "FRAME_MS",
    "NS_PER_MS",
    "TAIL_MS",
    "FrameSource",
    "Sink",
    "TurnInput",
    "silence_frame",
    "with_silence_tail",
]

FRAME_MS = 20
NS_PER_MS = 1_000_000
#: How much silence follows a fixture's audio while a server's VAD has not ended the turn.
TAIL_MS = 3000


class FrameSource(Protocol):
    """Where a turn's input frames come from: the :class:`~voicelat.audio.Pacer` replaying a
    fixture in real time (the default), or a live microphone (``voicelat.engine.live``).

    ``run`` calls ``send(k, frame)`` for frame ``k`` of the turn as it becomes available and
    stops early when ``send`` raises :class:`~voicelat.audio.StopPacing`. ``t0_ns`` is the
    clock time of the turn's first sample (known before ``send(0, ...)``), ``time_of_sample``
    places a sample of the turn on the clock, ``lags_ns`` are the per-frame delivery lags.
    """

    t0_ns: int | None

    async def run(
        self, frames: Sequence[bytes], send: Callable[[int, bytes], Awaitable[None]]
    ) -> int: ...

    def time_of_sample(self, sample_index: int, rate: int) -> int: ...

    @property
    def lags_ns(self) -> list[int]: ...


class Sink(Protocol):
    """Where a reply plays: :class:`~voicelat.audio.SimulatedSink` (the default) or a real
    output device (``voicelat.audio.device.DeviceSink``). Times are on the measuring clock."""

    audible: asyncio.Event
    first_audible_ns: int | None
    started_ns: int | None
    underruns: int
    underrun_total_ns: int

    def feed(self, pcm_bytes: bytes, rate: int, arrival_ns: int) -> None: ...

    def finish(self) -> None: ...

    def cancel(self) -> None: ...

    async def play(self) -> None: ...


@dataclass(frozen=True)
class TurnInput:
    """A turn's prepared input: the fixture, its audio at the STT rate cut into 20 ms frames,
    and where its speech starts and ends (ms from the first sample; None: the VAD finds it)."""

    fixture: Fixture
    pcm: PCM
    frames: Sequence[bytes]
    speech_start_ms: int | None
    speech_end_ms: int | None

    @classmethod
    def from_fixture(cls, fixture: Fixture, rate: int) -> TurnInput:
        """Read and resample ``fixture`` for an STT taking ``rate`` Hz (before any timing)."""
        pcm = load_for_stage(fixture.path, rate)
        check_fixture_audio(fixture, pcm)
        start, end = fixture.speech_start_ms, fixture.speech_end_ms
        if start is None or end is None:
            # Not annotated: the first and last audible samples stand in for ground truth.
            first = first_audible_sample(pcm)
            start = None if first is None else first * 1000 // pcm.rate
            end = _last_audible_ms(pcm)
        return cls(fixture, pcm, frames(pcm, FRAME_MS), start, end)

    @classmethod
    def live(cls, fixture_id: str, rate: int) -> TurnInput:
        """An input with no audio of its own: its frames come from a :class:`FrameSource`,
        its speech bounds from the turn's VAD."""
        fixture = Fixture(fixture_id, Path(), None, None, None, "", annotated=False)
        return cls(fixture, PCM(b"", rate), [], None, None)

    @property
    def duration_ns(self) -> int:
        """The length of the input audio."""
        return self.pcm.n_samples * 1_000_000_000 // self.pcm.rate


def silence_frame(rate: int) -> bytes:
    """One 20 ms frame of PCM16 silence at ``rate``."""
    return bytes(rate * FRAME_MS // 1000 * 2)


def with_silence_tail(inp: TurnInput, tail_ms: int = TAIL_MS) -> TurnInput:
    """``inp`` with ``tail_ms`` of silence frames after its audio (same frame size)."""
    tail = [silence_frame(inp.pcm.rate)] * (tail_ms // FRAME_MS)
    return dataclasses.replace(inp, frames=[*inp.frames, *tail])


def _last_audible_ms(pcm: PCM) -> int | None:
    reversed_pcm = PCM(pcm.to_array()[::-1].tobytes(), pcm.rate)
    idx = first_audible_sample(reversed_pcm)
    if idx is None:
        return None
    return (pcm.n_samples - idx) * 1000 // pcm.rate
