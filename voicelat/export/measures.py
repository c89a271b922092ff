"""What the metric exporters measure from a turn, and the buckets they count it in (pure).

OTel and Prometheus export the same figures with the same bucket bounds, so a dashboard built on
either reads the same numbers. Histograms hold the headline turns only (measured, warm, not
warm-up, not interrupted), as summary.json's percentiles do; the counters count every turn.
"""

from __future__ import annotations

from dataclasses import dataclass

from voicelat.core.base.contract import ALL_SEGMENTS
from voicelat.core.base.turn import Turn

NS_PER_S = 1_000_000_000

#: Upper bounds (seconds) for e2e, segment, TTFT and TTFA histograms. Dense below 1.5 s, where a
#: voice turn's latency lives, so ``histogram_quantile`` lands within tens of ms of the truth.
LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45,
    0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 5.0, 7.5,
    10.0, 15.0, 30.0, 60.0,
)  # fmt: skip

#: Upper bounds (seconds) for the measuring loop's lag (a healthy loop stays under 5 ms).
LOOP_LAG_BUCKETS_S: tuple[float, ...] = (
    0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0,
)  # fmt: skip

#: Failure stages a counter label may take; anything else counts as "other" (labels stay bounded).
FAILURE_STAGES: tuple[str, ...] = ("stt", "llm", "tts", "turn", "runner", "other")


def seconds(ns: int | float) -> float:
    return ns / NS_PER_S


def ttft_ns(turn: Turn) -> int | None:
    """Time to first token: the LLM stage's own figure, else ``llm_first_token - llm_request``."""
    v = turn.figures.get("llm_ttft_ns")
    if isinstance(v, int | float) and not isinstance(v, bool):
        return int(v)
    return _between(turn, "llm_request", "llm_first_token")


def ttfa_ns(turn: Turn) -> int | None:
    """Time to first audio: ``tts_first_byte - tts_request`` (the TTS request's first audio)."""
    return _between(turn, "tts_request", "tts_first_byte")


def _between(turn: Turn, start: str, end: str) -> int | None:
    a, b = turn.milestones.get(start), turn.milestones.get(end)
    return None if a is None or b is None else b - a


def failure_label(stage: str | None) -> str:
    return stage if stage in FAILURE_STAGES else "other"


@dataclass(frozen=True, slots=True)
class TurnMeasures:
    """One turn's histogram observations in seconds (empty for a non-headline turn)."""

    e2e_s: float | None
    segments_s: dict[str, float]
    ttft_s: float | None
    ttfa_s: float | None
    loop_lag_max_s: float | None


def measures(turn: Turn) -> TurnMeasures:
    """The observations a turn contributes to the histograms."""
    lag = turn.figures.get("loop_lag_max_ns")
    lag_s = seconds(lag) if isinstance(lag, int | float) and not isinstance(lag, bool) else None
    if not turn.headline or turn.e2e_ns is None:
        return TurnMeasures(None, {}, None, None, lag_s)
    first_token, first_audio = ttft_ns(turn), ttfa_ns(turn)
    return TurnMeasures(
        e2e_s=seconds(turn.e2e_ns),
        segments_s={s: seconds(turn.segments[s]) for s in ALL_SEGMENTS if s in turn.segments},
        ttft_s=None if first_token is None else seconds(first_token),
        ttfa_s=None if first_audio is None else seconds(first_audio),
        loop_lag_max_s=lag_s,
    )


def bucket_width_s(value_s: float, buckets: tuple[float, ...] = LATENCY_BUCKETS_S) -> float:
    """Width of the bucket ``value_s`` falls in: how far ``histogram_quantile`` may be off."""
    lower = 0.0
    for upper in buckets:
        if value_s <= upper:
            return upper - lower
        lower = upper
    return float("inf")
