"""Realistic-looking turns without a pipeline: segments drawn per turn, milestones that add up."""

from __future__ import annotations

import random

from voicelat.core.base.contract import CRITICAL_PATH, SEGMENTS
from voicelat.core.base.turn import Turn

#: (low, high) seconds per segment: uniform draws, roughly a local voice stack.
RANGES_S: dict[str, tuple[float, float]] = {
    "endpointing": (0.45, 0.52),
    "stt": (0.10, 0.50),
    "handoff": (0.0003, 0.001),
    "llm_ttft": (0.03, 0.30),
    "aggregation": (0.04, 0.25),
    "tts_ttfb": (0.04, 0.15),
    "leading_silence": (0.02, 0.08),
    "playout": (0.0001, 0.0005),
}


def synthetic_turns(n: int, *, seed: int = 7, failed_every: int = 0) -> list[Turn]:
    """``n`` turns; turn 0 is a warm-up; every ``failed_every``-th turn fails in the LLM."""
    rng = random.Random(seed)
    turns: list[Turn] = []
    for i in range(n):
        failed = bool(failed_every) and i > 0 and i % failed_every == 0
        segments = {s: int(rng.uniform(*RANGES_S[s]) * 1e9) for s in SEGMENTS}
        t = 2_000_000_000  # speech_end
        milestones = {"speech_start": 400_000_000, "speech_end": t}
        for name, seg in zip(CRITICAL_PATH[1:], SEGMENTS, strict=True):
            t += segments[seg]
            milestones[name] = t
        e2e = sum(segments.values())
        turns.append(
            Turn(
                index=i,
                fixture=f"fx{i % 5}",
                t0_ns=1_000_000_000 + i * 10_000_000_000,
                milestones={} if failed else milestones,
                segments={} if failed else segments,
                e2e_ns=None if failed else e2e,
                figures={"loop_lag_max_ns": rng.randint(100_000, 3_000_000)},
                warmup=i == 0,
                failed=failed,
                failure_stage="llm" if failed else None,
                failure_reason="HTTP 500" if failed else None,
                wall_time_ns=1_796_000_000_000_000_000 + i * 10_000_000_000,
            )
        )
    return turns
