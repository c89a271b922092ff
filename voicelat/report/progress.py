"""How far a comparison has got and when it will end (pure: counts and seconds in, a line out).

``voicelat compare`` runs one turn at a time through every combination, each turn as long as
its fixture's audio plus the reply, so a comparison takes minutes; this is its progress line:
turns done of the schedule, combinations finished, the elapsed time and an ETA from the mean
duration of the turns so far (they share the fixtures, so the mean is a fair guess).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CompareProgress:
    """A comparison's progress; ``turn_s`` are the durations of the turns done so far."""

    done: int
    total: int
    combos_done: int
    combos: int
    elapsed_s: float
    turn_s: Sequence[float] = ()
    failed: int = 0

    @property
    def mean_turn_s(self) -> float | None:
        """Mean duration of a turn so far (None before the first)."""
        return sum(self.turn_s) / len(self.turn_s) if self.turn_s else None

    @property
    def eta_s(self) -> float | None:
        """Seconds left: the turns still to run times the mean turn so far."""
        mean = self.mean_turn_s
        return None if mean is None else max(0, self.total - self.done) * mean


def fmt_duration(seconds: float | None) -> str:
    """``42 s``, ``3 min 05 s``, ``1 h 02 min``; ``?`` when unknown."""
    if seconds is None:
        return "?"
    s = round(max(0.0, seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def progress_line(p: CompareProgress) -> str:
    """``compare: 12/30 turns (40%), 1/2 combinations done, 1 failed; elapsed 1 min 32 s,
    ETA 2 min 18 s (7.7 s/turn)``."""
    pct = f" ({p.done / p.total:.0%})" if p.total else ""
    failed = f", {p.failed} failed" if p.failed else ""
    mean = p.mean_turn_s
    per = "" if mean is None else f" ({mean:.1f} s/turn)"
    eta = "done" if p.done >= p.total else f"ETA {fmt_duration(p.eta_s)}{per}"
    return (
        f"compare: {p.done}/{p.total} turns{pct}, {p.combos_done}/{p.combos} combinations "
        f"done{failed}; elapsed {fmt_duration(p.elapsed_s)}, {eta}"
    )


__all__ = ["CompareProgress", "fmt_duration", "progress_line"]
