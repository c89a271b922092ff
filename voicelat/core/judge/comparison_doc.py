"""``comparison.json``, typed: what ``voicelat compare`` ranked and what it was made from
(pure; no I/O). docs/COMPARE.md describes the document.

:class:`ComparisonDoc` is built by the comparison (engine/comparison.py), written and read
at one boundary (files/comparison.py) and handed to the reports, which render its JSON
shape (:meth:`ComparisonDoc.to_json`). ``ComparisonDoc.from_json(doc).to_json() == doc`` for
every document voicelat wrote: keys a reader does not know (added by later writers) travel in
``extra``, sections a document lacks stay absent (an older document gains the keys written
since, with the values they meant then: ``untrusted``, ``vs_best``'s ``resolvable``). Reading
is lenient about what an older
document leaves out (``trust``, ``scores``, ``barge_in`` came later) and strict about what
makes it a comparison (its ``kind`` and a list of named combinations): :class:`ValueError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from voicelat.core.judge.ranking import BargeInFigures, Ranked
from voicelat.core.summaries.run_summary import CallsSummary

__all__ = [
    "KIND",
    "CombinationDoc",
    "ComparisonDoc",
    "PercentileCI",
    "Statistics",
    "TrustDoc",
    "VsBestDoc",
]

#: The ``kind`` every comparison.json carries.
KIND = "voicelat-comparison"
JSONDict = dict[str, Any]


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _count(v: object) -> int:
    return _int(v) or 0


def _float(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _str(v: object) -> str | None:
    return v if isinstance(v, str) else None


def _map(v: object) -> JSONDict:
    return dict(v) if isinstance(v, Mapping) else {}


@dataclass(frozen=True, slots=True)
class PercentileCI:
    """An e2e percentile (ns) and its bootstrap interval (None: too few turns for one)."""

    ns: int | None = None
    ci_low_ns: int | None = None
    ci_high_ns: int | None = None

    def to_json(self) -> JSONDict:
        return {"ns": self.ns, "ci_low_ns": self.ci_low_ns, "ci_high_ns": self.ci_high_ns}

    @classmethod
    def from_json(cls, data: object) -> PercentileCI:
        d = _map(data)
        return cls(_int(d.get("ns")), _int(d.get("ci_low_ns")), _int(d.get("ci_high_ns")))


@dataclass(frozen=True, slots=True)
class VsBestDoc:
    """The difference to #1 at one percentile (``this - best``, ns) and its verdict."""

    diff_ns: int | None = None
    ci_low_ns: int | None = None
    ci_high_ns: int | None = None
    tested: bool = False
    significant: bool = False
    resolvable: bool = False
    instrument_ns: int | None = None
    resolvable_ns: int | None = None
    verdict: str = ""

    def to_json(self) -> JSONDict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, data: object) -> VsBestDoc:
        d = _map(data)
        significant = bool(d.get("significant"))
        return cls(
            diff_ns=_int(d.get("diff_ns")),
            ci_low_ns=_int(d.get("ci_low_ns")),
            ci_high_ns=_int(d.get("ci_high_ns")),
            tested=bool(d.get("tested")),
            significant=significant,
            # Written before runs were calibrated: a significant gap was a resolvable one.
            resolvable=bool(d.get("resolvable", significant)),
            instrument_ns=_int(d.get("instrument_ns")),
            resolvable_ns=_int(d.get("resolvable_ns")),
            verdict=str(d.get("verdict", "")),
        )


@dataclass(frozen=True, slots=True)
class TrustDoc:
    """Whether a combination's run trusted its machine, and why not (its summary's trust)."""

    trustworthy: bool = True
    reasons: tuple[str, ...] = ()
    codes: tuple[str, ...] = ()

    def to_json(self) -> JSONDict:
        return {
            "trustworthy": self.trustworthy,
            "reasons": list(self.reasons),
            "codes": list(self.codes),
        }

    @classmethod
    def from_json(cls, data: object) -> TrustDoc:
        d = _map(data)
        return cls(
            trustworthy=d.get("trustworthy") is not False,
            reasons=tuple(str(r) for r in d.get("reasons") or ()),
            codes=tuple(str(c) for c in d.get("codes") or ()),
        )


_COMBO_TYPED = frozenset(
    ("rank", "name", "status", "n", "measured", "failed", "failure_rate", "warmup", "cold",
     "failure", "e2e", "segments", "vs_best", "run_dir", "labels", "stages", "waterfall",
     "trust", "scores", "barge_in")
)  # fmt: skip


@dataclass(frozen=True)
class CombinationDoc:
    """One row of the ranking with what it was made from. ``stages`` (each stage's
    ``describe()``), ``waterfall`` (summary.json's bands) and ``scores`` (voicelat/score's
    price, quality and goodput) keep the shapes their writers give them."""

    name: str
    rank: int | None = None
    status: str = "ok"
    n: int = 0
    measured: int = 0
    failed: int = 0
    failure_rate: float | None = None
    warmup: int = 0
    cold: int = 0
    failure: str | None = None
    #: "p50" / "p90" -> the e2e percentile and its interval.
    e2e: Mapping[str, PercentileCI] = field(default_factory=dict)
    #: segment -> "p50" / "p90" -> ns.
    segments: Mapping[str, Mapping[str, int | None]] = field(default_factory=dict)
    #: "p50" / "p90" -> the difference to #1 (empty for #1 itself).
    vs_best: Mapping[str, VsBestDoc] = field(default_factory=dict)
    run_dir: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    stages: Mapping[str, Any] = field(default_factory=dict)
    waterfall: Mapping[str, Any] = field(default_factory=dict)
    trust: TrustDoc | None = None
    scores: Mapping[str, Any] | None = None
    barge_in: BargeInFigures | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def trusted(self) -> bool:
        """False only when the combination's run said its machine was not to be trusted."""
        return self.trust is None or self.trust.trustworthy

    @classmethod
    def of_ranked(cls, r: Ranked, **more: Any) -> CombinationDoc:
        """A ranking row (integer ns, rounded from the bootstrap's floats) with ``more`` (the
        fields the ranking does not know: ``run_dir``, ``stages``, ``scores``, ...)."""

        def ns(v: float | None) -> int | None:
            return None if v is None else round(v)

        return cls(
            name=r.name,
            rank=r.rank,
            status=r.status,
            n=r.n,
            measured=r.measured,
            failed=r.failed,
            failure_rate=r.failure_rate,
            warmup=r.warmup,
            cold=r.cold,
            failure=r.failure,
            e2e={
                f"p{p}": PercentileCI(ns(e.value), ns(e.low), ns(e.high)) for p, e in r.e2e.items()
            },
            segments={s: {f"p{p}": ns(v) for p, v in ps.items()} for s, ps in r.segments.items()},
            vs_best={
                f"p{p}": VsBestDoc(
                    diff_ns=ns(v.estimate),
                    ci_low_ns=ns(v.low),
                    ci_high_ns=ns(v.high),
                    tested=v.tested,
                    significant=v.significant,
                    resolvable=v.resolvable,
                    instrument_ns=ns(v.instrument_ns),
                    resolvable_ns=ns(v.resolvable_ns),
                    verdict=v.text(),
                )
                for p, v in r.vs_best.items()
            },
            **more,
        )

    def to_json(self) -> JSONDict:
        out: JSONDict = {
            "rank": self.rank,
            "name": self.name,
            "status": self.status,
            "n": self.n,
            "measured": self.measured,
            "failed": self.failed,
            "failure_rate": self.failure_rate,
            "warmup": self.warmup,
            "cold": self.cold,
            "failure": self.failure,
            "e2e": {k: v.to_json() for k, v in self.e2e.items()},
            "segments": {k: dict(v) for k, v in self.segments.items()},
            "vs_best": {k: v.to_json() for k, v in self.vs_best.items()},
            "run_dir": self.run_dir,
            "labels": dict(self.labels),
            "stages": dict(self.stages),
            "waterfall": dict(self.waterfall),
        }
        if self.trust is not None:
            out["trust"] = self.trust.to_json()
        if self.scores is not None:
            out["scores"] = dict(self.scores)
        if self.barge_in is not None:
            out["barge_in"] = self.barge_in.to_json()
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CombinationDoc:
        d = dict(data)
        return cls(
            name=str(d["name"]),
            rank=_int(d.get("rank")),
            status=str(d.get("status", "ok")),
            n=_count(d.get("n")),
            measured=_count(d.get("measured")),
            failed=_count(d.get("failed")),
            failure_rate=_float(d.get("failure_rate")),
            warmup=_count(d.get("warmup")),
            cold=_count(d.get("cold")),
            failure=_str(d.get("failure")),
            e2e={str(k): PercentileCI.from_json(v) for k, v in _map(d.get("e2e")).items()},
            segments={
                str(s): {str(p): _int(v) for p, v in _map(ps).items()}
                for s, ps in _map(d.get("segments")).items()
            },
            vs_best={str(k): VsBestDoc.from_json(v) for k, v in _map(d.get("vs_best")).items()},
            run_dir=str(d.get("run_dir") or ""),
            labels={str(k): str(v) for k, v in _map(d.get("labels")).items()},
            stages=_map(d.get("stages")),
            waterfall=_map(d.get("waterfall")),
            trust=TrustDoc.from_json(d["trust"]) if isinstance(d.get("trust"), Mapping) else None,
            scores=_map(d["scores"]) if isinstance(d.get("scores"), Mapping) else None,
            barge_in=(
                BargeInFigures.from_json(d["barge_in"])
                if isinstance(d.get("barge_in"), Mapping)
                else None
            ),
            extra={k: v for k, v in d.items() if k not in _COMBO_TYPED},
        )


@dataclass(frozen=True, slots=True)
class Statistics:
    """How the ranking was made: what ordered it and how every interval was drawn."""

    rank_by: str = "p50"
    level: float = 0.95
    resamples: int = 2000
    seed: int = 0
    min_turns: int = 3
    method: str = ""

    def to_json(self) -> JSONDict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, data: object) -> Statistics:
        d = _map(data)
        return cls(
            rank_by=str(d.get("rank_by", "p50")),
            level=_float(d.get("level")) or 0.95,
            resamples=_int(d.get("resamples")) or 2000,
            seed=_count(d.get("seed")),
            min_turns=_int(d.get("min_turns")) or 3,
            method=str(d.get("method", "")),
        )


_DOC_TYPED = frozenset(
    ("schema_version", "kind", "tool", "name", "description", "created", "argv", "source",
     "interleaved", "fixtures", "schedule", "statistics", "combinations", "excluded",
     "untrusted", "calls")
)  # fmt: skip


@dataclass(frozen=True)
class ComparisonDoc:
    """A whole ``comparison.json``. ``source``, ``fixtures`` and ``schedule`` echo what was
    compared, as written; ``calls`` is each combination's ``calls`` summary section (a
    comparison of whole calls; None otherwise)."""

    schema_version: int
    name: str
    combinations: tuple[CombinationDoc, ...]
    statistics: Statistics = field(default_factory=Statistics)
    tool: str = ""
    description: str = ""
    created: str = ""
    argv: tuple[str, ...] = ()
    source: Mapping[str, Any] = field(default_factory=dict)
    interleaved: bool = True
    fixtures: Mapping[str, Any] = field(default_factory=dict)
    schedule: Mapping[str, Any] = field(default_factory=dict)
    excluded: tuple[str, ...] = ()
    calls: Mapping[str, CallsSummary] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def untrusted(self) -> tuple[str, ...]:
        """The combinations whose runs distrusted their machine (their ``trust`` says why)."""
        return tuple(c.name for c in self.combinations if not c.trusted)

    @property
    def ranked(self) -> tuple[CombinationDoc, ...]:
        """The combinations that produced a warm turn, best first."""
        return tuple(
            sorted((c for c in self.combinations if c.rank is not None), key=lambda c: c.rank or 0)
        )

    def combination(self, name: str) -> CombinationDoc | None:
        return next((c for c in self.combinations if c.name == name), None)

    def to_json(self) -> JSONDict:
        """The ``comparison.json`` document."""
        out: JSONDict = {
            "schema_version": self.schema_version,
            "kind": KIND,
            "tool": self.tool,
            "name": self.name,
            "description": self.description,
            "created": self.created,
            "argv": list(self.argv),
            "source": dict(self.source),
            "interleaved": self.interleaved,
            "fixtures": dict(self.fixtures),
            "schedule": dict(self.schedule),
            "statistics": self.statistics.to_json(),
            "combinations": [c.to_json() for c in self.combinations],
            "excluded": list(self.excluded),
            "untrusted": list(self.untrusted),
        }
        if self.calls is not None:
            out["calls"] = {k: v.to_json() for k, v in self.calls.items()}
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, data: object) -> ComparisonDoc:
        """Read a ``comparison.json`` document; :class:`ValueError` (one line) when it is not
        one: another ``kind``, or combinations that are not a list of named tables."""
        if not isinstance(data, Mapping) or data.get("kind") != KIND:
            raise ValueError(f"not a voicelat comparison (no kind: {KIND})")
        combos = data.get("combinations")
        if not isinstance(combos, list) or not all(
            isinstance(c, Mapping) and "name" in c for c in combos
        ):
            raise ValueError("damaged: its combinations are not a list of named tables")
        d = dict(data)
        calls = d.get("calls")
        return cls(
            schema_version=_count(d.get("schema_version")),
            name=str(d.get("name", "")),
            combinations=tuple(CombinationDoc.from_json(c) for c in combos),
            statistics=Statistics.from_json(d.get("statistics")),
            tool=str(d.get("tool", "")),
            description=str(d.get("description", "")),
            created=str(d.get("created", "")),
            argv=tuple(str(a) for a in d.get("argv") or ()),
            source=_map(d.get("source")),
            interleaved=d.get("interleaved") is not False,
            fixtures=_map(d.get("fixtures")),
            schedule=_map(d.get("schedule")),
            excluded=tuple(str(x) for x in d.get("excluded") or ()),
            calls=(
                {str(k): CallsSummary.from_json(v) for k, v in calls.items()}
                if isinstance(calls, Mapping)
                else None
            ),
            extra={k: v for k, v in d.items() if k not in _DOC_TYPED},
        )
