"""Can a run's figures be trusted? Pure checks over turns and probe samples (no I/O, no clock).

A latency profiler measures with the same CPU and event loop it stamps events on. When that loop
is late to wake up, or the pacer could not send the input audio on time, every stamp of the run
may be late by as much: the figures then describe the profiler, not the pipeline. And a server
that writes small pieces without TCP_NODELAY meets the client's delayed ACK: the piece after a
short one waits ~40 ms in the kernel (Nagle + delayed ACK, MEASUREMENT.md §3.5). The client then
measures that wait faithfully, but it is an artifact of the server's socket options, not of the
model, so it is flagged as suspicious.

Thresholds (defaults of :class:`TrustThresholds`; documented in docs/BENCHMARKS.md):

=============================  ==========  ====================================================
check                          default     why
=============================  ==========  ====================================================
event-loop lag P99             > 5 ms      a stamp can be late by the loop's lag; 5 ms is
                                           several times the ~1 ms timer granularity of an
                                           idle loop, and larger than the accuracy voicelat
                                           claims (docs/BENCHMARKS.md)
pacer lag max, share of turns  > 10 ms on  the input audio reached the STT late, and the
                               > 5 %       endpoint with it; a few late turns are kept (each
                                           is flagged ``pacer_lag``), many are a trend
schedule lag P99               > 500 ms    an open-loop run did not offer the load it was
                                           asked for (AIPerf's "degraded" criterion)
header → first event gaps      ≥ 50 % of   gaps of a quantum near 40 ms, tightly clustered
                               ≥ 3 gaps in (P90 - P10 ≤ 5 ms): Linux's delayed-ACK timer (40 ms)
                               36-47 ms    holding a segment Nagle did not send (measured on
                                           loopback: 42-43 ms median, 44-47 ms P99,
                                           bench/accuracy.py --wire); check the server's
                                           TCP_NODELAY. Over a network the wait shows as
                                           40 ms + RTT, which this window does not look for.
LLM chunk gap max, per turn    > 10x the   the server was starved mid-reply (a loaded machine:
                               run's       1.4 tokens/s, 2.5 s gaps were seen with a 15 ms
                               median gap  median): that turn's figures describe the machine,
                               and 250 ms  not the model; the turns are named
=============================  ==========  ====================================================

A server that really takes a fixed ~40 ms between its headers and its first event trips the
last check too: it says "suspicious", and the message says what to check.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from voicelat.core.display import NS_PER_MS, fmt_ms
from voicelat.core.stats import percentile
from voicelat.core.turn import Turn

#: Milestones that are the first event of each HTTP stage's response body.
FIRST_EVENT: Mapping[str, tuple[str, ...]] = {
    "stt": ("stt_first_partial", "stt_final"),
    "llm": ("llm_first_delta",),
    "tts": ("tts_first_byte",),
}


@dataclass(frozen=True)
class TrustThresholds:
    loop_lag_p99_ns: int = 5 * NS_PER_MS
    pacer_lag_max_ns: int = 10 * NS_PER_MS
    pacer_lag_turn_share: float = 0.05
    schedule_lag_p99_ns: int = 500 * NS_PER_MS
    quantum_lo_ns: int = 36 * NS_PER_MS
    quantum_hi_ns: int = 47 * NS_PER_MS
    quantum_min_count: int = 3
    quantum_min_share: float = 0.5
    quantum_max_spread_ns: int = 5 * NS_PER_MS
    starved_gap_factor: float = 10.0
    starved_gap_floor_ns: int = 250 * NS_PER_MS


@dataclass(frozen=True)
class Quantization:
    """A cluster of gaps near the delayed-ACK quantum."""

    n_gaps: int
    n_near: int
    share: float
    median_ns: float
    spread_ns: float


def quantized_near_40ms(
    gaps_ns: Sequence[int], thresholds: TrustThresholds = TrustThresholds()
) -> Quantization | None:
    """Flag ``gaps_ns`` that cluster near 40 ms (Nagle on the server meeting delayed ACK).

    Flagged when at least ``quantum_min_count`` gaps, and at least ``quantum_min_share`` of
    all gaps, lie in ``[quantum_lo_ns, quantum_hi_ns]``, and those gaps are tightly packed (P90 -
    P10 within ``quantum_max_spread_ns``): a model's prefill time varies from request to
    request; a kernel timer does not. Returns None when the gaps look ordinary.
    """
    t = thresholds
    gaps = [g for g in gaps_ns if g >= 0]
    near = [g for g in gaps if t.quantum_lo_ns <= g <= t.quantum_hi_ns]
    if not gaps or len(near) < t.quantum_min_count:
        return None
    share = len(near) / len(gaps)
    spread = percentile(near, 90) - percentile(near, 10)
    if share < t.quantum_min_share or spread > t.quantum_max_spread_ns:
        return None
    return Quantization(len(gaps), len(near), share, percentile(near, 50), spread)


def first_event_gaps(turns: Iterable[Turn]) -> dict[str, list[int]]:
    """Per HTTP stage, the gap from the response headers to the first body event of each turn.

    When the server writes the headers and the first event as two small segments without
    TCP_NODELAY, this gap is where the ~40 ms shows (the headers arrive at once, the event waits
    for the client's delayed ACK). Stages without a ``response_headers`` span (Wyoming,
    websockets) give no gaps.
    """
    out: dict[str, list[int]] = {}
    for turn in turns:
        headers: dict[str, int] = {}
        for span in turn.spans:
            if span.name == "response_headers":
                headers.setdefault(span.stage, span.end_ns)
        for stage, names in FIRST_EVENT.items():
            if stage not in headers:
                continue
            firsts = [turn.milestones[m] for m in names if m in turn.milestones]
            if firsts:
                out.setdefault(stage, []).append(min(firsts) - headers[stage])
    return out


def _ms(ns: float) -> str:
    return fmt_ms(ns, decimals=1, unit=" ms")


_Reasons = list[dict[str, str]]
_Checks = dict[str, Any]


def _reason(code: str, message: str) -> dict[str, str]:
    return {"code": code, "message": message}


def _p99_over(values: Sequence[float], limit_ns: int, checks: _Checks, key: str) -> float | None:
    """Record the P99 of ``values`` under ``key``; return it when it is over ``limit_ns``."""
    if not values:
        return None
    p99 = percentile([float(v) for v in values], 99)
    checks[key] = round(p99)
    return p99 if p99 > limit_ns else None


def _loop_lag(loop_lag_ns: Sequence[int], t: TrustThresholds, checks: _Checks) -> _Reasons:
    p99 = _p99_over(loop_lag_ns, t.loop_lag_p99_ns, checks, "loop_lag_p99_ns")
    if p99 is None:
        return []
    return [
        _reason(
            "loop_lag",
            f"event-loop lag P99 {_ms(p99)} > {_ms(t.loop_lag_p99_ns)}: "
            "stamps may be late by as much (the measuring process is overloaded)",
        )
    ]


def _pacer_lag(measured: Sequence[Turn], t: TrustThresholds, checks: _Checks) -> _Reasons:
    pacer = [v for x in measured if isinstance(v := x.figures.get("pacer_lag_max_ns"), int | float)]
    if not pacer:
        return []
    late = sum(v > t.pacer_lag_max_ns for v in pacer)
    share = late / len(pacer)
    checks["pacer_lag_late_turns"] = late
    checks["pacer_lag_turn_share"] = round(share, 4)
    if share <= t.pacer_lag_turn_share:
        return []
    return [
        _reason(
            "pacer_lag",
            f"pacer lag max > {_ms(t.pacer_lag_max_ns)} on {late} of "
            f"{len(pacer)} turns ({share:.0%} > {t.pacer_lag_turn_share:.0%}): the input "
            "audio was not sent in real time",
        )
    ]


def _schedule_lag(measured: Sequence[Turn], t: TrustThresholds, checks: _Checks) -> _Reasons:
    lags = [v for x in measured if isinstance(v := x.figures.get("schedule_lag_ns"), int | float)]
    p99 = _p99_over(lags, t.schedule_lag_p99_ns, checks, "schedule_lag_p99_ns")
    if p99 is None:
        return []
    return [
        _reason(
            "schedule_lag",
            f"schedule lag P99 {_ms(p99)} > {_ms(t.schedule_lag_p99_ns)}: the "
            "client could not start turns on time; read latency from the intended start",
        )
    ]


def _nagle(measured: Sequence[Turn], t: TrustThresholds, checks: _Checks) -> _Reasons:
    reasons: _Reasons = []
    gaps = first_event_gaps(x for x in measured if x.ok)
    for stage, values in sorted(gaps.items()):
        found = quantized_near_40ms(values, t)
        checks[f"{stage}_first_event_gaps_near_40ms"] = sum(
            t.quantum_lo_ns <= v <= t.quantum_hi_ns for v in values
        )
        checks[f"{stage}_first_event_gaps"] = len(values)
        if found is not None:
            reasons.append(
                _reason(
                    "nagle_40ms",
                    f"{stage}: {found.n_near} of {found.n_gaps} header → first-event "
                    f"gaps cluster at {_ms(found.median_ns)} (Nagle + delayed ACK?): check "
                    "TCP_NODELAY on the server; the figures include this wait",
                )
            )
    return reasons


def _starved(measured: Sequence[Turn], t: TrustThresholds, checks: _Checks) -> _Reasons:
    # Against the run's own median gap: a slow model streams slowly everywhere, a starved
    # server stops for seconds in some turns.
    medians = [
        v for x in measured if isinstance(v := x.figures.get("llm_chunk_gap_p50_ns"), int | float)
    ]
    if not medians:
        return []
    median = percentile([float(v) for v in medians], 50)
    limit = max(t.starved_gap_factor * median, t.starved_gap_floor_ns)
    starved = [
        (x.index, float(g))
        for x in measured
        if isinstance(g := x.figures.get("llm_chunk_gap_max_ns"), int | float) and g > limit
    ]
    checks["llm_chunk_gap_median_ns"] = round(median)
    checks["llm_starved_turns"] = len(starved)
    if not starved:
        return []
    worst = max(g for _, g in starved)
    names = ", ".join(f"#{i}" for i, _ in starved[:8]) + (" ..." if len(starved) > 8 else "")
    return [
        _reason(
            "server_starved",
            f"llm: chunk gaps up to {_ms(worst)} on {len(starved)} turn(s) ({names}), over "
            f"{t.starved_gap_factor:g}x the run's median gap of {_ms(median)}: the server was "
            "starved mid-reply (a loaded machine?); distrust those turns",
        )
    ]


def assess_trust(
    turns: Sequence[Turn],
    loop_lag_ns: Sequence[int],
    thresholds: TrustThresholds = TrustThresholds(),
) -> dict[str, Any]:
    """The ``trust`` section of ``summary.json``: ``trustworthy``, ``reasons`` (each with a
    ``code`` and a one-line ``message``), the ``checks`` measured and the ``thresholds``.

    ``turns`` are the measured turns (warm-up turns are left out by the caller or here).
    """
    t = thresholds
    measured = [x for x in turns if not x.warmup]
    checks: _Checks = {}
    # Each check adds what it measured to ``checks`` (in this order: the section's key order).
    reasons = [
        *_loop_lag(loop_lag_ns, t, checks),
        *_pacer_lag(measured, t, checks),
        *_schedule_lag(measured, t, checks),
        *_nagle(measured, t, checks),
        *_starved(measured, t, checks),
    ]
    return {
        "trustworthy": not reasons,
        "reasons": reasons,
        "checks": checks,
        # Thresholds in ms (keys renamed to say so): people read this section.
        "thresholds": {
            (k[:-3] + "_ms" if k.endswith("_ns") else k): (
                v / NS_PER_MS if k.endswith("_ns") else v
            )
            for k, v in asdict(t).items()
        },
    }


__all__ = [
    "FIRST_EVENT",
    "Quantization",
    "TrustThresholds",
    "assess_trust",
    "first_event_gaps",
    "quantized_near_40ms",
]
