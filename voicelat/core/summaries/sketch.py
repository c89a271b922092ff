"""Bounded, mergeable value streams: exact up to a cap, then a log-bucketed histogram (pure).

A run's summary needs percentiles of many per-turn figures. Keeping every value makes memory grow
with the run's length (a 1-hour run at 100 sessions has ~100k turns); a histogram keeps memory
bounded by the range of the values, not their count, and two histograms merge by adding counts
(workers, nodes). :class:`ValueStream` keeps the values EXACTLY (a flat ``array('d')``: 8 bytes a
value) until it holds ``cap`` of them, so short runs keep exact percentiles, then moves them into
a :class:`LogHistogram` and counts from there on.

The histogram is DDSketch's log-bucketing (Masson, Rim, Lee, VLDB 2019): value ``x > 0`` goes to
bucket ``ceil(log_gamma(x))`` with ``gamma = (1 + a) / (1 - a)``, and the bucket's representative
``2 gamma^i / (gamma + 1)`` is within relative error ``a`` of every value in it; negative values
mirror it, zero has a bucket of its own. Any quantile read from it (the rank's bucket) is within
``a`` of the exact order statistic, so within ``a`` of the exact interpolated percentile too.
``n``, ``min``, ``max`` and the mean stay exact (float rounding aside).

Why not the ``hdrhistogram`` package: it records positive integers inside a range fixed in
advance (values outside it are dropped), while voicelat's figures include floats (RTF, tokens/s)
and zeros; it is untyped and brings a C extension plus ``ctypes``/``zlib`` codecs into a core that
must stay small and pure. What is needed here is fifty lines.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Iterator

from voicelat.core.base.stats import Distribution, percentile

#: Relative error of a quantile read from a histogram (0.1 %: 1 ms at a 1 s e2e).
RELATIVE_ERROR = 0.001
#: Values a stream keeps exactly before it switches to its histogram.
EXACT_CAP = 2048
#: Values smaller than this in magnitude count as zero (ns figures are integers; ratios are
#: far above it).
_ZERO = 1e-9


class LogHistogram:
    """A mergeable log-bucketed histogram with relative error ``alpha`` (see the module)."""

    __slots__ = ("_gamma", "_log_gamma", "alpha", "neg", "pos", "zero")

    def __init__(self, alpha: float = RELATIVE_ERROR) -> None:
        if not 0 < alpha < 1:
            raise ValueError(f"relative error must be within (0, 1), not {alpha}")
        self.alpha = alpha
        self._gamma = (1 + alpha) / (1 - alpha)
        self._log_gamma = math.log(self._gamma)
        self.pos: dict[int, int] = {}
        self.neg: dict[int, int] = {}
        self.zero = 0

    def key(self, value: float) -> tuple[int, int]:
        """The bucket of ``value``: ``(sign, index)``, sign -1, 0 or 1."""
        if abs(value) < _ZERO:
            return 0, 0
        return (1 if value > 0 else -1), math.ceil(math.log(abs(value)) / self._log_gamma)

    def value_of(self, key: tuple[int, int]) -> float:
        """The representative value of bucket ``key`` (within ``alpha`` of its values)."""
        sign, i = key
        return sign * 2 * self._gamma**i / (self._gamma + 1) if sign else 0.0

    def add(self, value: float, count: int = 1) -> None:
        sign, i = self.key(value)
        if sign == 0:
            self.zero += count
        else:
            buckets = self.pos if sign > 0 else self.neg
            buckets[i] = buckets.get(i, 0) + count

    def merge(self, other: LogHistogram) -> None:
        """Add ``other``'s counts (same ``alpha``)."""
        if other.alpha != self.alpha:
            raise ValueError("cannot merge histograms of different relative errors")
        for mine, theirs in ((self.pos, other.pos), (self.neg, other.neg)):
            for i, c in theirs.items():
                mine[i] = mine.get(i, 0) + c
        self.zero += other.zero

    def buckets(self) -> Iterator[tuple[tuple[int, int], int]]:
        """``(key, count)`` in increasing order of value."""
        for i in sorted(self.neg, reverse=True):
            yield (-1, i), self.neg[i]
        if self.zero:
            yield (0, 0), self.zero
        for i in sorted(self.pos):
            yield (1, i), self.pos[i]

    def __len__(self) -> int:
        """How many buckets hold values (what its memory grows with)."""
        return len(self.pos) + len(self.neg) + (1 if self.zero else 0)


def rank_values(hist: LogHistogram, ranks: Iterable[int]) -> dict[int, float]:
    """The representative value of the ``r``-th smallest value (0-based) for each rank."""
    wanted = sorted(set(ranks))
    out: dict[int, float] = {}
    seen = 0
    j = 0
    for key, count in hist.buckets():
        seen += count
        while j < len(wanted) and wanted[j] < seen:
            out[wanted[j]] = hist.value_of(key)
            j += 1
        if j == len(wanted):
            break
    return out


class ValueStream:
    """One figure's values: exact up to ``cap`` (None: no cap), then a :class:`LogHistogram`."""

    __slots__ = ("_hist", "_max", "_min", "_sum", "_values", "alpha", "cap", "n")

    def __init__(self, cap: int | None = EXACT_CAP, alpha: float = RELATIVE_ERROR) -> None:
        self.cap = cap
        self.alpha = alpha
        self.n = 0
        self._values: array[float] | None = array("d")
        self._hist: LogHistogram | None = None
        self._sum = 0.0
        self._min = math.inf
        self._max = -math.inf

    @property
    def exact(self) -> bool:
        """Every value is kept (percentiles are exact)."""
        return self._values is not None

    @property
    def buckets(self) -> int:
        """Histogram buckets in use (0 while exact)."""
        return 0 if self._hist is None else len(self._hist)

    def add(self, value: float) -> None:
        self.n += 1
        self._sum += value
        self._min = min(self._min, value)
        self._max = max(self._max, value)
        if self._values is not None:
            self._values.append(value)
            if self.cap is not None and len(self._values) > self.cap:
                self._spill()
        else:
            assert self._hist is not None
            self._hist.add(value)

    def _spill(self) -> None:
        """Move the exact values into the histogram (from now on memory stays bounded)."""
        hist = LogHistogram(self.alpha)
        for v in self._values or ():
            hist.add(v)
        self._hist, self._values = hist, None

    def merge(self, other: ValueStream) -> None:
        """Add ``other``'s values after this stream's own (exact while both fit the cap)."""
        if other.n == 0:
            return
        self._sum += other._sum
        self._min = min(self._min, other._min)
        self._max = max(self._max, other._max)
        self.n += other.n
        if self._values is not None and other._values is not None:
            self._values.extend(other._values)
            if self.cap is not None and len(self._values) > self.cap:
                self._spill()
            return
        if self._values is not None:
            self._spill()
        assert self._hist is not None
        if other._values is not None:
            for v in other._values:
                self._hist.add(v)
        else:
            assert other._hist is not None
            self._hist.merge(other._hist)

    def values(self) -> list[float]:
        """The exact values, in the order added (only while :attr:`exact`)."""
        if self._values is None:
            raise ValueError("the stream keeps a histogram, not its values")
        return list(self._values)

    def quantile(self, p: float) -> float:
        """The ``p``-th percentile: exact (linear interpolation, as :func:`percentile`), or
        within :attr:`alpha` of it from the histogram."""
        if self.n == 0:
            raise ValueError("percentile of an empty sample")
        if self._values is not None:
            return percentile(self._values, p)
        assert self._hist is not None
        rank = (self.n - 1) * p / 100
        lo = math.floor(rank)
        hi = min(lo + 1, self.n - 1)
        at = rank_values(self._hist, (lo, hi))
        value = at[lo] + (at[hi] - at[lo]) * (rank - lo)
        return min(max(value, self._min), self._max)

    def distribution(self) -> Distribution:
        """The stream as a :class:`Distribution` (the same one :meth:`Distribution.of` gives
        for the exact values)."""
        if self._values is not None:
            return Distribution.of(self._values)
        return Distribution(
            n=self.n,
            p50=self.quantile(50),
            p90=self.quantile(90),
            p99=self.quantile(99),
            min=self._min,
            max=self._max,
            mean=self._sum / self.n,
        )

    def count_over(self, limit: float) -> int:
        """How many values are over ``limit`` (from the histogram: by bucket representative)."""
        if self._values is not None:
            return sum(1 for v in self._values if v > limit)
        assert self._hist is not None
        return sum(c for key, c in self._hist.buckets() if self._hist.value_of(key) > limit)

    def retained(self) -> int:
        """Values or buckets held (what the stream's memory grows with)."""
        return len(self._values) if self._values is not None else self.buckets


__all__ = ["EXACT_CAP", "RELATIVE_ERROR", "LogHistogram", "ValueStream", "rank_values"]
