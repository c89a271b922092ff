"""The run summary as a stream: constant memory whatever the run's length, mergeable (pure).

:class:`SummaryAccumulator` takes turns one at a time (:meth:`~SummaryAccumulator.add`) and
gives the summary :func:`voicelat.core.summaries.summary.build_summary` gives for the same turns
(:meth:`~SummaryAccumulator.finish`), without keeping the turns. Every distribution is a
:class:`~voicelat.core.summaries.sketch.ValueStream`: EXACT up to ``exact_cap`` values (a short run's
summary is identical to ``build_summary``'s), then a log-bucketed histogram whose quantiles are
within ``relative_error`` of the exact ones (``n``, min, max and mean stay exact); the summary's
``quantiles`` section says which: ``{"mode": "exact"}`` or ``{"mode": "histogram",
"relative_error": 0.001, "exact_up_to": 2048, "approximate": [...names...]}``.

The percentile waterfall streams too. While exact, the rows ``(index, e2e, segments)`` are kept
(flat arrays) and the bands are :func:`~voicelat.core.base.stats.percentile_band`'s. Past the cap,
per-segment sums are keyed by the e2e histogram's bucket (each bucket: its count, the sum of
its e2e and of each segment, its smallest turn index); the band around P is the buckets that
hold the ranks around P's rank (the boundary buckets pro rata), so its bars still sum to its
mean e2e, within the bucket's width of the exact band's (``turns`` then lists one example
turn per bucket, at most :data:`BAND_EXAMPLES`).

:meth:`~SummaryAccumulator.merge` adds another accumulator's turns after this one's, so workers'
and nodes' accumulators combine: ``a.merge(b)`` summarizes as accumulating ``a``'s turns then
``b``'s. Bounded: failure reasons (at most :data:`MAX_REASONS` kinds, the rest counted under
``<stage>: (other reasons)``), and the trust checks' tallies
(:class:`~voicelat.core.summaries.diagnostics.TrustTally`); the one part that grows with the run is the
machine check's turn windows, 24 bytes a measured turn.
"""

from __future__ import annotations

from array import array
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from voicelat.core.base.contract import segment_names
from voicelat.core.base.stats import PERCENTILES, Band, band_width, percentile_band
from voicelat.core.base.turn import HANGOVER_UNSTATED, Turn
from voicelat.core.measure.schedule import from_intended_ns
from voicelat.core.summaries.diagnostics import MachineSample, TrustTally
from voicelat.core.summaries.regions import RegionTally
from voicelat.core.summaries.run_summary import RunSummary
from voicelat.core.summaries.sketch import EXACT_CAP, RELATIVE_ERROR, LogHistogram, ValueStream
from voicelat.core.summaries.summary import EXACT_QUANTILES, FIGURES, SummaryParts, assemble

#: Distinct failure reasons kept; past it a stage's other reasons are counted together.
MAX_REASONS = 256
#: Example turn indexes a histogram band lists (one per e2e bucket of the band).
BAND_EXAMPLES = 32
_STAGES = ("stt", "llm", "tts", "s2s", "agent")


class _Bucket:
    """The headline turns whose e2e fell in one histogram bucket: sums and an example."""

    __slots__ = ("count", "e2e", "example", "segments")

    def __init__(self, example: int) -> None:
        self.count = 0
        self.e2e = 0.0
        self.segments: dict[str, float] = {}
        self.example = example

    def add(self, e2e: float, segments: Mapping[str, float], count: int = 1) -> None:
        self.count += count
        self.e2e += e2e
        for s, v in segments.items():
            self.segments[s] = self.segments.get(s, 0.0) + v


class _Bands:
    """The waterfall's rows: exact ``(index, e2e, segments)`` up to ``cap``, then bucketed."""

    def __init__(self, cap: int | None, alpha: float) -> None:
        self.cap = cap
        self.n = 0
        self.index: array[int] | None = array("q")
        self.e2e: array[float] = array("d")
        self.columns: dict[str, array[float]] = {}  # one value per row (0: the turn had none)
        self.hist = LogHistogram(alpha)
        self.buckets: dict[tuple[int, int], _Bucket] = {}

    def add(self, index: int, e2e: float, segments: Mapping[str, int]) -> None:
        self.n += 1
        if self.index is None:
            self._bucket(index, e2e, {s: float(v) for s, v in segments.items()})
            return
        for s in segments:
            if s not in self.columns:
                self.columns[s] = array("d", bytes(8 * len(self.index)))
        self.index.append(index)
        self.e2e.append(e2e)
        for s, col in self.columns.items():
            col.append(float(segments.get(s, 0)))
        if self.cap is not None and len(self.index) > self.cap:
            self._spill()

    def _bucket(
        self, index: int, e2e: float, segments: Mapping[str, float], count: int = 1
    ) -> None:
        key = self.hist.key(e2e)
        bucket = self.buckets.get(key)
        if bucket is None:
            bucket = self.buckets[key] = _Bucket(index)
        bucket.example = min(bucket.example, index)
        bucket.add(e2e, segments, count)
        self.hist.add(e2e, count)

    def _rows(self) -> list[tuple[int, float, dict[str, float]]]:
        assert self.index is not None
        return [
            (i, self.e2e[j], {s: col[j] for s, col in self.columns.items()})
            for j, i in enumerate(self.index)
        ]

    def _spill(self) -> None:
        for i, e2e, segs in self._rows():
            self._bucket(i, e2e, segs)
        self.index, self.e2e, self.columns = None, array("d"), {}

    def merge(self, other: _Bands) -> None:
        if other.n == 0:
            return
        if self.index is not None and other.index is not None:
            for i, e2e, segs in other._rows():
                self.add(i, e2e, {s: round(v) for s, v in segs.items()})
            return
        if self.index is not None:
            self._spill()
        self.n += other.n
        if other.index is not None:
            for i, e2e, segs in other._rows():
                self._bucket(i, e2e, segs)
            return
        for key, b in other.buckets.items():
            mine = self.buckets.get(key)
            if mine is None:
                mine = self.buckets[key] = _Bucket(b.example)
            mine.example = min(mine.example, b.example)
            mine.count += b.count
            mine.e2e += b.e2e
            for s, v in b.segments.items():
                mine.segments[s] = mine.segments.get(s, 0.0) + v
        self.hist.merge(other.hist)

    def band(self, p: int, names: Sequence[str], e2e: ValueStream) -> Band | None:
        """The band around percentile ``p`` (exact rows, or the buckets holding its ranks)."""
        if self.n == 0:
            return None
        if self.index is not None:
            return percentile_band(self._rows(), p, names)
        width = band_width(self.n)
        start = round((self.n - 1) * p / 100 - (width - 1) / 2)
        start = max(0, min(start, self.n - width))
        total, sums, examples = 0.0, dict.fromkeys(names, 0.0), []
        seen = 0
        for key, count in self.hist.buckets():
            lo, hi = max(seen, start), min(seen + count, start + width)
            seen += count
            if hi <= lo:
                if seen >= start + width:
                    break
                continue
            b, share = self.buckets[key], (hi - lo) / count  # the bucket's part in the band
            total += b.e2e * share
            for s in names:
                sums[s] += b.segments.get(s, 0.0) * share
            examples.append(b.example)
        return Band(
            p=p,
            n=self.n,
            band_n=width,
            e2e_percentile=e2e.quantile(p),
            mean_e2e=total / width,
            segments={s: v / width for s, v in sums.items()},
            indexes=tuple(sorted(examples)[:BAND_EXAMPLES]),
        )


class SummaryAccumulator:
    """A run's summary, accumulated turn by turn in bounded memory (see the module)."""

    def __init__(
        self, exact_cap: int | None = EXACT_CAP, relative_error: float = RELATIVE_ERROR
    ) -> None:
        self.exact_cap = exact_cap
        self.relative_error = relative_error
        self.counts: dict[str, int] = dict.fromkeys(
            ("turns", "headline", "warmup", "cold", "failed", "flagged", "interrupted",
             "hangover_unstated"), 0
        )  # fmt: skip
        self.failures: Counter[str] = Counter()
        self.e2e = self._stream()
        self.segments: dict[str, ValueStream] = {}
        self.figures: dict[str, ValueStream] = {}
        self.spans: dict[str, dict[str, ValueStream]] = {}
        self.e2e_from_intended = self._stream()
        self.schedule_lag = self._stream()
        self.loop_lag = self._stream()
        self.bands = _Bands(exact_cap, relative_error)
        self.trust = TrustTally(cap=exact_cap)
        #: Per-region counts and streams (the ``regions`` section: core/summaries/regions.py).
        self.regions = RegionTally(self._stream)

    def _stream(self) -> ValueStream:
        return ValueStream(self.exact_cap, self.relative_error)

    @classmethod
    def of(cls, turns: Iterable[Turn], **kw: Any) -> SummaryAccumulator:
        """An accumulator that has added ``turns``."""
        acc = cls(**kw)
        for t in turns:
            acc.add(t)
        return acc

    # -- adding --------------------------------------------------------------------------------
    def add(self, turn: Turn) -> None:
        """Count one finished turn (any turn: failed, cold and warm-up turns count where
        :func:`~voicelat.core.summaries.summary.build_summary` counts them)."""
        c = self.counts
        c["turns"] += 1
        c["headline"] += turn.headline
        c["warmup"] += turn.warmup
        c["cold"] += turn.cold and not turn.warmup and turn.ok
        c["failed"] += turn.failed
        c["flagged"] += bool(turn.flags)
        c["interrupted"] += turn.interrupted
        c["hangover_unstated"] += HANGOVER_UNSTATED in turn.flags
        if turn.failed and turn.failure_reason:
            self._fail(f"{turn.failure_stage}: {turn.failure_reason}", str(turn.failure_stage))
        self.trust.add(turn)
        self.regions.add(turn)
        if turn.headline:
            self._headline(turn)

    def _fail(self, reason: str, stage: str, count: int = 1) -> None:
        if reason not in self.failures and len(self.failures) >= MAX_REASONS:
            reason = f"{stage}: (other reasons)"
        self.failures[reason] += count

    def _headline(self, turn: Turn) -> None:
        assert turn.e2e_ns is not None  # a headline turn is ok
        self.e2e.add(turn.e2e_ns)
        for s, seg in turn.segments.items():
            self._get(self.segments, s).add(seg)
        for name in FIGURES:
            if isinstance(v := turn.figures.get(name), int | float):
                self._get(self.figures, name).add(float(v))
        for stage in _STAGES:
            for name, dur in turn.spans_of(stage).items():
                self._get(self.spans.setdefault(stage, {}), name).add(float(dur))
        if isinstance(lag := turn.figures.get("schedule_lag_ns"), int | float):
            self.e2e_from_intended.add(float(from_intended_ns(turn.e2e_ns, int(lag))))
            self.schedule_lag.add(float(lag))
        self.bands.add(turn.index, float(turn.e2e_ns), turn.segments)

    def _get(self, streams: dict[str, ValueStream], name: str) -> ValueStream:
        stream = streams.get(name)
        if stream is None:
            stream = streams[name] = self._stream()
        return stream

    def add_loop_lag(self, lags_ns: Iterable[int]) -> None:
        """Add event-loop lag samples (a probe's, or a worker's)."""
        for v in lags_ns:
            self.loop_lag.add(float(v))

    # -- merging -------------------------------------------------------------------------------
    def merge(self, other: SummaryAccumulator) -> None:
        """Add ``other``'s turns and loop-lag samples after this accumulator's own."""
        for k, v in other.counts.items():
            self.counts[k] += v
        for reason, count in other.failures.items():
            self._fail(reason, reason.split(":", 1)[0], count)
        self.e2e.merge(other.e2e)
        _merge_streams(self.segments, other.segments, self._stream)
        _merge_streams(self.figures, other.figures, self._stream)
        for stage, spans in other.spans.items():
            _merge_streams(self.spans.setdefault(stage, {}), spans, self._stream)
        self.e2e_from_intended.merge(other.e2e_from_intended)
        self.schedule_lag.merge(other.schedule_lag)
        self.loop_lag.merge(other.loop_lag)
        self.bands.merge(other.bands)
        self.trust.merge(other.trust)
        self.regions.merge(other.regions)

    # -- the summary ---------------------------------------------------------------------------
    def _all_streams(self) -> dict[str, ValueStream]:
        out = {"e2e": self.e2e, "loop_lag": self.loop_lag, "schedule_lag": self.schedule_lag}
        out["e2e_from_intended"] = self.e2e_from_intended
        out |= {f"segments.{k}": v for k, v in self.segments.items()}
        out |= {f"figures.{k}": v for k, v in self.figures.items()}
        for stage, spans in self.spans.items():
            out |= {f"spans.{stage}.{k}": v for k, v in spans.items()}
        return out

    def quantiles(self, loop_lag: ValueStream | None = None) -> dict[str, Any]:
        """The ``quantiles`` section: exact, or which distributions come from histograms and
        their relative error."""
        streams = self._all_streams() | ({"loop_lag": loop_lag} if loop_lag is not None else {})
        approximate = [k for k, v in streams.items() if not v.exact]
        if not approximate and self.bands.index is not None:
            return dict(EXACT_QUANTILES)
        return {
            "mode": "histogram",
            "relative_error": self.relative_error,
            "exact_up_to": self.exact_cap,
            "approximate": approximate + ([] if self.bands.index is not None else ["waterfall"]),
        }

    def parts(
        self,
        machine: Sequence[MachineSample] = (),
        loop_lag_ns: Iterable[int] = (),
        stages: Mapping[str, Any] | None = None,
    ) -> SummaryParts:
        """The summary's measured sections; ``loop_lag_ns``: samples besides those added (a
        probe's, read at the end; this accumulator is left as it was); ``stages``: the stage
        descriptions the trust check asks who each server is."""
        names = segment_names(frozenset(self.segments))
        lags = self._stream()
        lags.merge(self.loop_lag)
        for v in loop_lag_ns:
            lags.add(float(v))
        empty = ValueStream(0)
        counts = {k: v for k, v in self.counts.items() if k not in OPTIONAL_COUNTS or v}
        bands = {p: b for p in PERCENTILES if (b := self.bands.band(p, names, self.e2e))}
        return SummaryParts(
            counts=counts,
            e2e=self.e2e.distribution(),
            segments={s: self.segments.get(s, empty).distribution() for s in names},
            figures={k: self.figures[k].distribution() for k in FIGURES if k in self.figures},
            spans={
                st: {n: d.distribution() for n, d in spans.items()}
                for st, spans in self.spans.items()
            },
            bands=bands,
            failures=self.failures.most_common(),
            loop_lag=lags.distribution(),
            e2e_from_intended=self.e2e_from_intended.distribution(),
            schedule_lag=self.schedule_lag.distribution(),
            trust=self.trust.assess(lags.quantile(99) if lags.n else None, machine, stages),
            quantiles=self.quantiles(lags),
            regions=self.regions.section(),
        )

    def summarize(
        self,
        *,
        run: Mapping[str, Any],
        pipeline: Mapping[str, Any],
        fixtures: Sequence[Mapping[str, Any]],
        stages: Mapping[str, Any],
        budget: Mapping[str, Any] | None = None,
        machine: Sequence[MachineSample] = (),
        loop_lag_ns: Iterable[int] = (),
    ) -> RunSummary:
        """The typed run summary (as :func:`~voicelat.core.summaries.summary.summarize`)."""
        return assemble(
            self.parts(machine, loop_lag_ns, stages),
            run=run,
            pipeline=pipeline,
            fixtures=fixtures,
            stages=stages,
            budget=budget,
        )

    def finish(self, **kw: Any) -> dict[str, Any]:
        """The ``summary.json`` document, as :func:`~voicelat.core.summaries.summary.build_summary`
        gives it for the same turns (keywords: ``run``, ``pipeline``, ``fixtures``,
        ``stages``, ``budget``, ``machine``, ``loop_lag_ns``)."""
        return self.summarize(**kw).to_json()

    def retained(self) -> int:
        """Values, buckets and rows held (what memory grows with; bounded past the cap but for
        the trust check's turn windows, :attr:`TrustTally.windows`)."""
        streams = sum(s.retained() for s in self._all_streams().values())
        bands = len(self.bands.index) if self.bands.index is not None else len(self.bands.buckets)
        t = self.trust
        tally = (
            t.schedule_lag.retained()
            + t.gap_p50.retained()
            + t.starved_more.retained()
            + len(t.starved)
            + sum(g.near.retained() for g in t.gaps.values())
        )
        return streams + bands * (1 + len(self.segments)) + tally + len(self.failures)


#: Counts that appear in the summary only when some turn had them (old documents stay as
#: they were): barged-in live turns, agent turns whose trace states no VAD hangover.
OPTIONAL_COUNTS = frozenset({"interrupted", "hangover_unstated"})

#: Finished turns a runner keeps in memory (the most recent; the summary has them all).
RECENT_TURNS = 1000


class RecentTurns(deque[Turn]):
    """A run's finished turns as its runner keeps them: the most recent ``maxlen`` (None: all),
    each appended turn also added to :attr:`summary`, which summarizes every one of them.

    ``len()`` is what is kept; :attr:`appended` how many were appended; :attr:`first` the first.
    """

    def __init__(
        self, summary: SummaryAccumulator | None = None, maxlen: int | None = RECENT_TURNS
    ) -> None:
        super().__init__(maxlen=maxlen)
        self.summary = summary if summary is not None else SummaryAccumulator()
        self.appended = 0
        self.first: Turn | None = None

    def append(self, turn: Turn) -> None:
        super().append(turn)
        self.summary.add(turn)
        self.appended += 1
        if self.first is None:
            self.first = turn

    @property
    def all_failed(self) -> bool:
        """Some turns ran and every one failed."""
        c = self.summary.counts
        return bool(c["turns"]) and c["failed"] == c["turns"]


def _merge_streams(
    mine: dict[str, ValueStream],
    theirs: Mapping[str, ValueStream],
    new: Callable[[], ValueStream],
) -> None:
    for name, stream in theirs.items():
        if name not in mine:
            mine[name] = new()
        mine[name].merge(stream)


__all__ = ["BAND_EXAMPLES", "MAX_REASONS", "RECENT_TURNS", "RecentTurns", "SummaryAccumulator"]
