"""The instrument error bar (pure): voicelat's stamps of a known-delay reference against the
reference's own ground truth, and the clock's rate check.

Before (and with ``--calibrate full`` also after) the measured turns, ``engine/calibrate.py``
runs a few turns against an in-process emulator that stamps, right before each write, when it
handed the first token / first audio byte to the socket. Per milestone kind, the measurement
error of a reference turn is voicelat's stamp minus the emulator's (the method of
``bench/accuracy.py``'s ``errors_of``):

- ``ttft``: ``llm_first_token`` minus the chat exchange's ``first_content_written``;
- ``ttfa``: ``tts_first_byte`` minus the speech exchange's ``first_audio_written``;
- ``e2e``: the turn's e2e minus the true one (``first_audio_written`` plus the onset of the
  emulator's audio, from voicelat's ``speech_end``).

Each exchange is tied to its turn as the one of its endpoint received nearest to the turn's
request (the reference runs one session, so its requests are sequential, ~1 s apart). The error
bar is the P50/P99 of the errors' magnitude; the summary's ``instrument`` section carries it
(``core/judge/compare.py`` and ``core/judge/gate.py`` read ``error_p99_ns``).

The clock check compares the monotonic clock's advance with the wall clock's over the run:
their rate difference in ppm. An NTP-disciplined wall clock is the best reference a host has
for real time; a difference above :data:`CLOCK_PPM_BOUND` (a stepped or badly slewed clock, a
VM's drifting timer) is warned about, as it scales every duration by that much.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from voicelat.core.base.stats import percentile

__all__ = [
    "ABSURD_ERROR_NS",
    "CLOCK_PPM_BOUND",
    "KINDS",
    "ReferenceTurn",
    "TruthExchange",
    "calibrated_section",
    "clock_ppm",
    "clock_warning",
    "reference_errors",
    "uncalibrated_section",
]

#: The milestone kinds the reference measures.
KINDS: tuple[str, ...] = ("ttft", "ttfa", "e2e")
#: Above this rate difference (ppm) between the monotonic and the wall clock the run is warned:
#: 100 ppm is 0.1 ms on a 1 s figure, the size of the error bar itself, and ten times what a
#: healthy NTP-disciplined host shows (a few ppm).
CLOCK_PPM_BOUND = 100.0
#: A reference error beyond this (ns) is not an error bar but a broken reference (the emulator
#: starved of CPU, a stall): the run is then "uncalibrated" rather than given a meaningless bar.
ABSURD_ERROR_NS = 250_000_000


@dataclass(frozen=True, slots=True)
class ReferenceTurn:
    """voicelat's stamps of one reference turn (absolute ns on the run's clock; None: missing)."""

    llm_request_ns: int | None
    llm_first_token_ns: int | None
    tts_request_ns: int | None
    tts_first_byte_ns: int | None
    speech_end_ns: int | None
    e2e_ns: int | None


@dataclass(frozen=True, slots=True)
class TruthExchange:
    """One exchange as the emulator served it: its endpoint (``chat``, ``speech``), when the
    request was read, and when the first content / audio bytes were written (absolute ns)."""

    endpoint: str
    received_ns: int
    first_written_ns: int | None


def _nearest(exchanges: Sequence[TruthExchange], endpoint: str, t_ns: int) -> TruthExchange | None:
    """The ``endpoint`` exchange received nearest to ``t_ns`` (the request's send, on
    voicelat's clock). Nearest, not "first after": a stamp late by X (the very error being
    measured) must still find its own exchange; the reference's turns are ~1 s apart."""
    found = [ex for ex in exchanges if ex.endpoint == endpoint]
    return min(found, key=lambda ex: abs(ex.received_ns - t_ns)) if found else None


def reference_errors(
    turns: Sequence[ReferenceTurn], truth: Sequence[TruthExchange], onset_ns: int
) -> dict[str, list[int]]:
    """Per kind, the signed error (ns) of every reference turn that matched its exchange.

    ``onset_ns``: how long after its first audio byte the emulator's reply becomes audible
    (leading silence and fade-in), which the true e2e includes.
    """
    ordered = list(truth)
    out: dict[str, list[int]] = {k: [] for k in KINDS}
    for t in turns:
        if t.llm_request_ns is not None and t.llm_first_token_ns is not None:
            chat = _nearest(ordered, "chat", t.llm_request_ns)
            if chat is not None and chat.first_written_ns is not None:
                out["ttft"].append(t.llm_first_token_ns - chat.first_written_ns)
        if t.tts_request_ns is None or t.tts_first_byte_ns is None:
            continue
        speech = _nearest(ordered, "speech", t.tts_request_ns)
        if speech is None or speech.first_written_ns is None:
            continue
        out["ttfa"].append(t.tts_first_byte_ns - speech.first_written_ns)
        if t.e2e_ns is not None and t.speech_end_ns is not None:
            true_e2e = speech.first_written_ns + onset_ns - t.speech_end_ns
            out["e2e"].append(t.e2e_ns - true_e2e)
    return out


def _bar(errors: Sequence[int]) -> dict[str, int]:
    """P50/P99/max of the errors' magnitude (ns) and their count."""
    mags = [abs(e) for e in errors]
    return {
        "n": len(mags),
        "error_p50_ns": round(percentile(mags, 50)),
        "error_p99_ns": round(percentile(mags, 99)),
        "error_max_ns": max(mags),
    }


def calibrated_section(
    errors: Mapping[str, Sequence[int]],
    *,
    turns: int,
    mode: str,
    ppm: float | None,
) -> dict[str, Any]:
    """The summary's ``instrument`` section of a reference that ran; "uncalibrated" (with the
    reason) when it measured nothing or its error is absurd (:data:`ABSURD_ERROR_NS`)."""
    every = [e for k in KINDS for e in errors.get(k, ())]
    if not every:
        return uncalibrated_section("the reference turns matched no emulator exchange", mode, ppm)
    worst = max(abs(e) for e in every)
    if worst > ABSURD_ERROR_NS:
        return uncalibrated_section(
            f"the reference's error is absurd ({worst / 1e6:.0f} ms > "
            f"{ABSURD_ERROR_NS / 1e6:.0f} ms): the machine stalled it",
            mode,
            ppm,
        )
    overall = _bar(every)
    return {
        "status": "calibrated",
        "mode": mode,
        "turns": turns,
        "error_p50_ns": overall["error_p50_ns"],
        "error_p99_ns": overall["error_p99_ns"],
        "error_max_ns": overall["error_max_ns"],
        "by_kind": {k: _bar(v) for k in KINDS if (v := errors.get(k))},
        "clock_ppm": ppm,
        "clock_ppm_bound": CLOCK_PPM_BOUND,
        "reason": clock_warning(ppm),
    }


def uncalibrated_section(reason: str, mode: str, ppm: float | None = None) -> dict[str, Any]:
    """The ``instrument`` section of a run without an error bar, saying why."""
    return {
        "status": "uncalibrated",
        "mode": mode,
        "turns": 0,
        "error_p50_ns": None,
        "error_p99_ns": None,
        "by_kind": {},
        "clock_ppm": ppm,
        "clock_ppm_bound": CLOCK_PPM_BOUND,
        "reason": reason,
    }


def clock_ppm(wall0_ns: int, mono0_ns: int, wall1_ns: int, mono1_ns: int) -> float | None:
    """How much faster (ppm; negative: slower) the wall clock advanced than the monotonic one
    between two paired readings; None over less than 1 ms of monotonic time (no rate to see)."""
    d_mono = mono1_ns - mono0_ns
    if d_mono < 1_000_000:
        return None
    return round((wall1_ns - wall0_ns - d_mono) * 1e6 / d_mono, 2)


def clock_warning(ppm: float | None) -> str | None:
    """The warning for a rate difference above :data:`CLOCK_PPM_BOUND`, else None."""
    if ppm is None or abs(ppm) <= CLOCK_PPM_BOUND:
        return None
    return (
        f"the monotonic clock and the wall clock disagree by {ppm:+.0f} ppm over the run "
        f"(bound ±{CLOCK_PPM_BOUND:.0f} ppm): a stepped or drifting clock scales every figure"
    )
