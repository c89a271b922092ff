"""A phone leg where the audio is: a ``codec = "pcmu"`` profile (the built-in ``phone``) applied
to the caller's frames and to the reply's audio, not to the stages' connections.

A carrier leg sits between the caller (voicelat's pacer and sink) and the agent (the pipeline):
the caller's voice crosses it on its way in, the reply on its way out. Each way it is
8 kHz G.711 mu-law in 20 ms frames, a one-way delay, and a fixed jitter buffer that holds every
frame to delay + buffer and drops a later one; lost and dropped frames are concealed (the last
received frame once, then silence: ``audio/phone_line.py``). docs/NETWORK.md.

* The caller's leg (:func:`band_limited`, :func:`heard_input`): each fixture is transcoded once
  when it is loaded (``rate -> 8 kHz -> mu-law -> rate``, before any timing starts); each
  turn then draws its frames' loss (seeded by the profile's seed and the turn's index) and
  conceals them (list operations, no signal work on the loop), and the frames are preceded by
  the leg's one-way delay in silence: sample ``i`` of the caller's speech, spoken at
  ``t0 + i / rate``, reaches the agent at ``t0 + delay + i / rate``, while the speech bounds
  stay on the caller's clock (``t0`` is the caller's first sample). The delay is the profile's
  up delay + the jitter buffer + the transcoder's own lookahead (:data:`TRANSCODE_NOTE`).
* The reply's leg (:class:`PhoneSink`): the simulated sink with the reply streamed through a
  :class:`~voicelat.audio.phone_line.PhoneTranscoder` (its frames' loss seeded likewise) and
  each chunk placed at its arrival + the down delay + the jitter buffer (the sink's timeline
  is computed, so a chunk can be placed later than it was fed: no timer on the loop). The
  transcoder holds back its lookahead, which delays the ear only when the reply streams at
  real time. ~0.2 ms of numpy per 20 ms of reply audio.

Per turn the figures ``phone_{up,down}_frames`` and ``phone_{up,down}_lost_frames`` (lost and
late, each concealed) say what the leg did; ``engine/network.py`` sums them into the summary's
``network.realised``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from voicelat.audio.frames import frames as cut_frames
from voicelat.audio.phone_line import PhoneTranscoder, conceal_frames, transcode
from voicelat.audio.sink import SimulatedSink
from voicelat.audio.wav import PCM
from voicelat.core.base.errors import AudioError
from voicelat.core.base.network import Impairer, NetworkProfile
from voicelat.core.measure.recorder import TurnRecorder
from voicelat.engine.turn_input import TurnInput

__all__ = [
    "FIGURES",
    "PhoneLeg",
    "PhoneSink",
    "band_limited",
    "heard_input",
    "phone_leg",
    "realised_from_turns",
]

NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000
#: The per-turn figures the leg records.
FIGURES = (
    "phone_up_frames",
    "phone_up_lost_frames",
    "phone_down_frames",
    "phone_down_lost_frames",
)
TRANSCODE_NOTE = (
    "the transcoding (rate -> 8 kHz -> mu-law -> rate) adds its resamplers' lookahead, ~9 ms "
    "(two Kaiser-sinc filters of ~4.5 ms): on the caller's leg as delay, on the reply's held "
    "back (it reaches the ear only when the reply streams at real time)"
)


@dataclass(frozen=True)
class PhoneLeg:
    """The audio side of a ``pcmu`` profile: delays (ns) and the per-turn, per-way loss draws."""

    profile: NetworkProfile

    def delay_ns(self, way: str) -> int:
        """The leg's one-way delay: the profile's delay + the fixed jitter buffer."""
        return round(self.profile.expected_delay_ms(way) * NS_PER_MS)

    def losses(self, way: str, index: int) -> _FrameLoss:
        """Turn ``index``'s frame-loss draws for ``way`` (seeded: the same every run)."""
        return _FrameLoss(self.profile, way, index)


class _FrameLoss:
    """Frame ``j`` is lost (the profile's loss) or late (its draw of the delay past the jitter
    buffer's depth, which drops it); one draw of each per frame, in order."""

    def __init__(self, profile: NetworkProfile, way: str, index: int) -> None:
        direction = profile.direction(way)
        seed = profile.seed * 1_000_003 + 2 * index + (way == "down")
        self._imp = Impairer(direction, seed)
        self._due_ns = round(profile.expected_delay_ms(way) * NS_PER_MS)
        self._seen: list[bool] = []

    def __call__(self, j: int) -> bool:
        while len(self._seen) <= j:
            lost = self._imp.lost()
            late = self._imp.delay_ns() > self._due_ns
            self._seen.append(lost or late)
        return self._seen[j]


def phone_leg(pipeline: Any) -> PhoneLeg | None:
    """The pipeline's phone leg: its network profile when that carries ``codec = "pcmu"``."""
    profile = getattr(pipeline, "network", None)
    if isinstance(profile, NetworkProfile) and profile.codec == "pcmu":
        return PhoneLeg(profile)
    return None


def band_limited(inp: TurnInput) -> TurnInput:
    """``inp`` as the caller's phone sends it: through the G.711 leg, without loss (once, when
    the fixture is loaded; the frames cut again from the transcoded audio)."""
    if not inp.pcm.n_samples:
        return inp
    pcm = transcode(inp.pcm)
    return dataclasses.replace(inp, pcm=pcm, frames=cut_frames(pcm))


def heard_input(inp: TurnInput, leg: PhoneLeg, rec: TurnRecorder) -> TurnInput:
    """Turn ``rec``'s input as the agent hears it: its frames' loss concealed and the leg's
    delay of silence ahead of them. ``pcm`` and the speech bounds stay the caller's (the
    padding logic of a cascade measures the tail against them)."""
    if not inp.frames:
        return inp
    loss = leg.losses("up", rec.index)
    lost = [loss(j) for j in range(len(inp.frames))]
    concealed = conceal_frames(inp.frames, lost)
    rec.figure("phone_up_frames", len(lost))
    rec.figure("phone_up_lost_frames", sum(lost))
    rate = inp.pcm.rate
    delay_ns = leg.delay_ns("up") + _lookahead_ns(rate)
    lead = bytes(2 * (delay_ns * rate // NS_PER_S))
    return dataclasses.replace(inp, frames=cut_frames(PCM(lead + b"".join(concealed), rate)))


@functools.lru_cache(maxsize=8)
def _lookahead_ns(rate: int) -> int:
    """The transcoder's lookahead at ``rate`` (its filter tables built once per rate)."""
    return PhoneTranscoder(rate).lookahead_ns


class PhoneSink(SimulatedSink):
    """The simulated sink behind the reply's phone leg (see the module docstring).

    Every sample it is fed goes through the transcoder and lands ``delay`` later on the
    sink's timeline; what it plays, records (``save_audio``) and measures (first audible,
    underruns, gaps) is what the caller's phone played."""

    def __init__(self, leg: PhoneLeg, index: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._delay_ns = leg.delay_ns("down")
        self._loss = leg.losses("down", index)
        self._tx: PhoneTranscoder | None = None
        self._placed_ns: int | None = None

    @property
    def transcoder(self) -> PhoneTranscoder | None:
        """The reply's transcoder (None until audio came)."""
        return self._tx

    def feed(self, pcm_bytes: bytes, rate: int, arrival_ns: int) -> None:
        if self.cancelled or not pcm_bytes:
            return
        if self.finished:
            raise RuntimeError("SimulatedSink.feed() after finish()")
        if self._tx is None:
            self._tx = PhoneTranscoder(rate, self._loss)
        elif rate != self._tx.rate:
            raise AudioError(
                f"the sink got {rate} Hz audio after {self._tx.rate} Hz audio in the same "
                "stream; resample it to one rate before playing"
            )
        self._placed_ns = arrival_ns + self._delay_ns
        out = self._tx.feed(pcm_bytes)
        if out:
            super().feed(out, rate, self._placed_ns)

    def finish(self) -> None:
        tx = self._tx
        if tx is not None and not self.finished and not self.cancelled:
            tail = tx.flush()
            if tail and self._placed_ns is not None:
                super().feed(tail, tx.rate, self._placed_ns)
        super().finish()

    def record_figures(self, rec: TurnRecorder) -> None:
        """The reply leg's frame counts on ``rec``."""
        tx = self._tx
        rec.figure("phone_down_frames", tx.frames if tx is not None else 0)
        rec.figure("phone_down_lost_frames", tx.lost if tx is not None else 0)


class PhoneSinks:
    """The phone sinks a turn engine made, by turn index, until the turn's figures are
    recorded (:meth:`record` pops each: the dict holds only turns under way)."""

    def __init__(self) -> None:
        self._by_index: dict[int, PhoneSink] = {}

    def add(self, index: int, sink: PhoneSink) -> PhoneSink:
        self._by_index[index] = sink
        return sink

    def record(self, rec: TurnRecorder) -> None:
        """``rec``'s reply-leg figures, if its turn played through a phone sink."""
        sink = self._by_index.pop(rec.index, None)
        if sink is not None:
            sink.record_figures(rec)


def realised_from_turns(profile: NetworkProfile, turns: Sequence[Any]) -> dict[str, Any]:
    """The leg's realised impairment over ``turns`` (their figures), per way, in the relay's
    shape: frames (packets), lost (lost or late, concealed), the loss %, the delay applied."""
    out: dict[str, Any] = {}
    for way in ("up", "down"):
        n = lost = 0
        for t in turns:
            figures: Mapping[str, Any] = getattr(t, "figures", {}) or {}
            f, lf = figures.get(f"phone_{way}_frames"), figures.get(f"phone_{way}_lost_frames")
            if isinstance(f, int | float) and isinstance(lf, int | float):
                n, lost = n + int(f), lost + int(lf)
        delay = profile.expected_delay_ms(way)
        out[way] = {
            "packets": n,
            "lost": lost,
            "duplicated": 0,
            "stalls": 0,
            "loss_pct": round(100 * lost / n, 3) if n else None,
            # Held by the fixed buffer: every frame that played had exactly this delay.
            "delay_p50_ms": delay if n else None,
            "delay_p90_ms": delay if n else None,
            "delay_p99_ms": delay if n else None,
        }
    return out
