"""What the pictures draw, as plain data made from a run's turns (pure; shared by HTML and TUI).

The summary keeps percentiles, not the turns: a histogram, e2e over the run, the per-fixture
breakdown and the transcript accuracy are made here from ``turns.jsonl``'s turns, so the HTML
report and the terminal draw the same numbers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from voicelat.core.base.contract import E2E
from voicelat.core.base.display import NS_PER_MS
from voicelat.core.base.palette import ordered_segments
from voicelat.core.base.stats import PERCENTILES, percentile
from voicelat.core.base.turn import Turn
from voicelat.core.judge.budget import lenient_budget


@dataclass(frozen=True, slots=True)
class TurnPoint:
    """One turn on the "e2e over the run" chart.

    ``kind`` is ``ok`` (a headline turn), ``excluded`` (warm-up, cold or interrupted: drawn,
    but not in the percentiles) or ``failed`` (no e2e: drawn as a mark at the top).
    """

    index: int
    fixture: str
    e2e_ns: int | None
    kind: str
    reason: str = ""


def turn_points(turns: Iterable[Turn]) -> list[TurnPoint]:
    """Every turn in run order, with what it counts as."""
    out = []
    for t in sorted(turns, key=lambda t: t.index):
        if t.failed or t.e2e_ns is None:
            why = f"{t.failure_stage}: {t.failure_reason}" if t.failure_stage else "no e2e"
            out.append(TurnPoint(t.index, t.fixture, None, "failed", why))
        elif t.headline:
            out.append(TurnPoint(t.index, t.fixture, t.e2e_ns, "ok"))
        else:
            why = "warm-up" if t.warmup else "cold" if t.cold else "interrupted"
            out.append(TurnPoint(t.index, t.fixture, t.e2e_ns, "excluded", why))
    return out


def headline_e2e(turns: Iterable[Turn]) -> list[int]:
    """The e2e (ns) of the turns the headline percentiles are made of."""
    return [t.e2e_ns for t in turns if t.headline and t.e2e_ns is not None]


@dataclass(frozen=True, slots=True)
class Bin:
    """One histogram bar: ``count`` values in ``[lo_ns, hi_ns)`` (the last bin is closed)."""

    lo_ns: int
    hi_ns: int
    count: int


def nice_step_ns(span_ns: float, target: int) -> int:
    """A bin width of 1, 2 or 5 times a power of ten ms giving about ``target`` bins."""
    raw = max(span_ns / NS_PER_MS / max(target, 1), 1.0)
    mag = 10.0 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * mag:
            return int(m * mag * NS_PER_MS)
    return int(10 * mag * NS_PER_MS)  # pragma: no cover - the loop always returns


def histogram(values_ns: Sequence[int], *, target_bins: int = 12) -> list[Bin]:
    """Equal-width bins on round ms edges covering every value; empty in, empty out."""
    if not values_ns:
        return []
    lo, hi = min(values_ns), max(values_ns)
    step = nice_step_ns(hi - lo, target_bins)
    start = lo // step * step
    n_bins = max(1, (hi - start) // step + 1)
    counts = [0] * n_bins
    for v in values_ns:
        counts[min((v - start) // step, n_bins - 1)] += 1
    return [Bin(start + i * step, start + (i + 1) * step, c) for i, c in enumerate(counts)]


def percentile_marks(values_ns: Sequence[int]) -> dict[int, float]:
    """P50/P90/P99 of ``values_ns`` (interpolated, as the summary computes them)."""
    return {p: percentile(values_ns, p) for p in PERCENTILES} if values_ns else {}


def budget_lines(budget: Mapping[str, object]) -> dict[int, float]:
    """The e2e limits the run's ``[budget]`` sets, by percentile (ns)."""
    b = lenient_budget(dict(budget))
    out = {}
    for p in PERCENTILES:
        limit = b.limit_ns(E2E, p)
        if limit is not None:
            out[p] = float(limit)
    return out


@dataclass(frozen=True, slots=True)
class FixtureRow:
    """One fixture's headline turns: how many, e2e P50/P90, and the segment that dominates."""

    fixture: str
    n: int
    failed: int
    p50_ns: float | None
    p90_ns: float | None
    dominant: str | None
    dominant_ns: float | None


def fixture_rows(turns: Iterable[Turn]) -> list[FixtureRow]:
    """Per fixture, in the order first run: the dominant segment is the one with the largest
    median over the fixture's headline turns (where the time of that utterance goes)."""
    by: dict[str, list[Turn]] = {}
    for t in turns:
        by.setdefault(t.fixture, []).append(t)
    rows = []
    for fixture, ts in by.items():
        head = [t for t in ts if t.headline and t.e2e_ns is not None]
        e2e = [float(t.e2e_ns) for t in head if t.e2e_ns is not None]
        medians = {
            s: percentile(vals, 50)
            for s in ordered_segments(k for t in head for k in t.segments)
            if (vals := [float(t.segments[s]) for t in head if s in t.segments])
        }
        dominant = max(medians, key=lambda s: medians[s]) if medians else None
        rows.append(
            FixtureRow(
                fixture=fixture,
                n=len(head),
                failed=sum(t.failed for t in ts if not t.warmup),
                p50_ns=percentile(e2e, 50) if e2e else None,
                p90_ns=percentile(e2e, 90) if e2e else None,
                dominant=dominant,
                dominant_ns=medians.get(dominant) if dominant else None,
            )
        )
    return rows


def fixtures_repeat(rows: Sequence[FixtureRow]) -> bool:
    """Whether a per-fixture breakdown says more than the turns table: some fixture ran twice."""
    return any(r.n > 1 for r in rows)


# -- transcript accuracy -----------------------------------------------------------------------
_WORD = re.compile(r"[a-z0-9']+")


def words(text: str) -> list[str]:
    """Lower-case words without punctuation: "Paris?" and "paris" are the same word."""
    return _WORD.findall(text.lower())


def word_errors(reference: str, hypothesis: str) -> int:
    """Substitutions + deletions + insertions turning ``reference`` into ``hypothesis``
    (word-level Levenshtein distance)."""
    ref, hyp = words(reference), words(hypothesis)
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i]
        for j, h in enumerate(hyp, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h)))
        prev = cur
    return prev[-1]


@dataclass(frozen=True, slots=True)
class Accuracy:
    """Word error rate over the turns that have both a transcript and a reference text.

    ``wer`` is errors over reference words, pooled over turns (a long utterance weighs more
    than a short one, as in the usual corpus WER); None when no turn could be scored.
    """

    turns: int
    words: int
    errors: int
    exact: int

    @property
    def wer(self) -> float | None:
        return self.errors / self.words if self.words else None


def accuracy(turns: Iterable[Turn]) -> Accuracy:
    """The transcript accuracy of the measured (not warm-up) turns with a reference."""
    n = n_words = n_errors = exact = 0
    for t in turns:
        if t.warmup or t.transcript is None or not t.expected or not words(t.expected):
            continue
        e = word_errors(t.expected, t.transcript)
        n += 1
        n_words += len(words(t.expected))
        n_errors += e
        exact += e == 0
    return Accuracy(n, n_words, n_errors, exact)


def accuracy_text(acc: Accuracy) -> str:
    """``WER 4.2% (3 errors in 71 words, 12 of 14 turns exact)``, or why there is none."""
    if acc.wer is None:
        return "WER: no turn has both a transcript and a reference text"
    return (
        f"WER {acc.wer:.1%} ({acc.errors} error(s) in {acc.words} reference words; "
        f"{acc.exact} of {acc.turns} turn(s) exact)"
    )


__all__ = [
    "Accuracy",
    "Bin",
    "FixtureRow",
    "TurnPoint",
    "accuracy",
    "accuracy_text",
    "budget_lines",
    "fixture_rows",
    "fixtures_repeat",
    "headline_e2e",
    "histogram",
    "nice_step_ns",
    "percentile_marks",
    "turn_points",
    "word_errors",
    "words",
]
