"""The typed run summary: what ``summary.json`` holds, as frozen dataclasses (pure; no I/O).

:class:`RunSummary` is read by the reports, the TUI, the gate and the comparison.
``RunSummary.from_json(doc).to_json() == doc`` for every summary voicelat wrote: numbers keep
their JSON type (integer ns stay ``int``, ratios stay ``float``), sections a summary lacks stay
absent, and top-level keys this module does not know (added by later writers, such as ``live``
or ``comparison``) travel in :attr:`RunSummary.extra`.

Reading is lenient: a section missing from an older summary (``trust``, ``schedule_lag``,
``e2e_from_intended`` came later) is ``None``, and a partial document (a test's hand-written
summary) gets empty defaults for what it leaves out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from voicelat.core.base.contract import E2E, display_segments

#: Version of the results schema (turns.jsonl lines and summary.json). Bump on breaking change.
#: 2: runs of whole calls (a ``calls`` section, calls.jsonl, call ids on turns); 1 still reads.
SCHEMA_VERSION = 2

JSONDict = dict[str, Any]


def _num(value: object) -> float | None:
    """A JSON number as it was written (``int`` stays ``int``), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def _int(value: object, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _map(value: object) -> JSONDict:
    return dict(value) if isinstance(value, Mapping) else {}


@dataclass(frozen=True, slots=True)
class DistSummary:
    """One saved distribution: ``n`` and its percentiles, as numbers the JSON holds."""

    n: int = 0
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    min: float | None = None
    max: float | None = None
    mean: float | None = None

    def at(self, p: int) -> float | None:
        """The value at percentile ``p`` (50, 90, 99; 100 is the maximum), None when unknown."""
        return {50: self.p50, 90: self.p90, 99: self.p99, 100: self.max}.get(p)

    def to_json(self) -> JSONDict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, data: object) -> DistSummary:
        d = _map(data)
        return cls(
            n=_int(d.get("n")),
            p50=_num(d.get("p50")),
            p90=_num(d.get("p90")),
            p99=_num(d.get("p99")),
            min=_num(d.get("min")),
            max=_num(d.get("max")),
            mean=_num(d.get("mean")),
        )


def _optional_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _dists(data: object) -> dict[str, DistSummary]:
    return {str(k): DistSummary.from_json(v) for k, v in _map(data).items()}


@dataclass(frozen=True, slots=True)
class Counts:
    """How many turns ran, and how many of them went into the headline figures."""

    turns: int = 0
    headline: int = 0
    warmup: int = 0
    cold: int = 0
    failed: int = 0
    flagged: int = 0
    #: Barged-in turns of a live session; absent (None) from fixture runs.
    interrupted: int | None = None
    #: Agent turns whose trace states no VAD hangover (it counts in stt); None when none.
    hangover_unstated: int | None = None

    @property
    def failure_rate(self) -> float:
        """Failed turns over turns run (0 when none ran)."""
        return self.failed / self.turns if self.turns else 0.0

    def to_json(self) -> JSONDict:
        optional = ("interrupted", "hangover_unstated")
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in optional}
        for name in optional:
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out

    @classmethod
    def from_json(cls, data: object) -> Counts:
        d = _map(data)
        interrupted = d.get("interrupted")
        return cls(
            turns=_int(d.get("turns")),
            headline=_int(d.get("headline")),
            warmup=_int(d.get("warmup")),
            cold=_int(d.get("cold")),
            failed=_int(d.get("failed")),
            flagged=_int(d.get("flagged")),
            interrupted=interrupted if isinstance(interrupted, int) else None,
            hangover_unstated=_optional_int(d.get("hangover_unstated")),
        )


@dataclass(frozen=True, slots=True)
class WaterfallBand:
    """The mean composition of the turns ranked around one e2e percentile (integer ns).

    ``segments_ns`` sum to ``mean_e2e_ns`` exactly; ``e2e_percentile_ns`` is the exact
    percentile, drawn beside it.
    """

    n: int
    band_n: int
    e2e_percentile_ns: int
    mean_e2e_ns: int
    segments_ns: Mapping[str, int]
    turns: tuple[int, ...]

    def to_json(self) -> JSONDict:
        return {
            "n": self.n,
            "band_n": self.band_n,
            "e2e_percentile_ns": self.e2e_percentile_ns,
            "mean_e2e_ns": self.mean_e2e_ns,
            "segments_ns": dict(self.segments_ns),
            "turns": list(self.turns),
        }

    @classmethod
    def from_json(cls, data: object) -> WaterfallBand:
        d = _map(data)
        return cls(
            n=_int(d.get("n")),
            band_n=_int(d.get("band_n")),
            e2e_percentile_ns=_int(d.get("e2e_percentile_ns")),
            mean_e2e_ns=_int(d.get("mean_e2e_ns")),
            segments_ns={str(k): int(v) for k, v in _map(d.get("segments_ns")).items()},
            turns=tuple(int(i) for i in d.get("turns") or ()),
        )


@dataclass(frozen=True, slots=True)
class FailureCount:
    """One failure reason (``stage: reason``) and how many turns failed with it."""

    reason: str
    count: int

    def to_json(self) -> JSONDict:
        return {"reason": self.reason, "count": self.count}


@dataclass(frozen=True, slots=True)
class TrustReason:
    """Why a run's figures may not be trusted: a stable ``code`` and a one-line ``message``."""

    code: str
    message: str

    def to_json(self) -> JSONDict:
        return {"code": self.code, "message": self.message}


@dataclass(frozen=True, slots=True)
class Trust:
    """The ``trust`` section (:func:`voicelat.core.summaries.diagnostics.assess_trust`)."""

    trustworthy: bool = True
    reasons: tuple[TrustReason, ...] = ()
    checks: Mapping[str, float] = field(default_factory=dict)
    thresholds: Mapping[str, float] = field(default_factory=dict)

    def to_json(self) -> JSONDict:
        return {
            "trustworthy": self.trustworthy,
            "reasons": [r.to_json() for r in self.reasons],
            "checks": dict(self.checks),
            "thresholds": dict(self.thresholds),
        }

    @classmethod
    def from_json(cls, data: object) -> Trust:
        d = _map(data)
        return cls(
            trustworthy=bool(d.get("trustworthy", True)),
            reasons=tuple(
                TrustReason(str(r.get("code", "")), str(r.get("message", "")))
                for r in d.get("reasons") or ()
                if isinstance(r, Mapping)
            ),
            checks=_map(d.get("checks")),
            thresholds=_map(d.get("thresholds")),
        )


#: ``run`` keys with a typed field on :class:`RunInfo`; the others stay in ``extra``.
_RUN_TYPED: tuple[str, ...] = (
    "tool",
    "version",
    "status",
    "started",
    "duration_s",
    "planned_turns",
    "load",
)


@dataclass(frozen=True, slots=True)
class RunInfo:
    """The ``run`` section: who measured, when, how long, with which load.

    ``extra`` keeps the other keys (``argv``, ``python``, ``platform``, ``stack``, ...);
    ``keys`` their order as written, so the section is written back unchanged.
    """

    tool: str | None = None
    version: str | None = None
    status: str | None = None
    started: str | None = None
    duration_s: float | None = None
    planned_turns: int | None = None
    load: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    keys: tuple[str, ...] = ()

    def to_json(self) -> JSONDict:
        typed = {k: getattr(self, k) for k in _RUN_TYPED}
        out = {k: typed[k] if k in typed else self.extra.get(k) for k in self.keys}
        out.update({k: v for k, v in self.extra.items() if k not in out})
        out.update({k: v for k, v in typed.items() if k not in out and v is not None})
        if isinstance(load := out.get("load"), Mapping):
            out["load"] = dict(load)
        return out

    @classmethod
    def from_json(cls, data: object) -> RunInfo:
        d = _map(data)
        planned = d.get("planned_turns")
        load = d.get("load")
        return cls(
            tool=_str(d.get("tool")),
            version=_str(d.get("version")),
            status=_str(d.get("status")),
            started=_str(d.get("started")),
            duration_s=_num(d.get("duration_s")),
            planned_turns=planned if isinstance(planned, int) else None,
            load=dict(load) if isinstance(load, Mapping) else None,
            extra={k: v for k, v in d.items() if k not in _RUN_TYPED},
            keys=tuple(d),
        )


#: Top-level sections of :class:`RunSummary`, in the order ``summary.json`` writes them.
#: The call figures a budget may limit (``[budget.greeting]`` ...), from ``calls``.
CALL_METRICS: tuple[str, ...] = (
    "greeting",
    "e2e_first_turn",
    "e2e_later_turns",
    "dead_air_max",
    "barge_in_stop",
)


@dataclass(frozen=True, slots=True)
class BargeInSummary:
    """The ``calls.barge_in`` section (core/calls/bargein.py ``barge_in_section``): stop latency at
    the ear and its waterfall, never-stopped interruptions, false barge-ins on backchannels
    and noise, talk-over, and the e2e of the interrupting utterances."""

    interrupts: int = 0
    interrupts_measured: int = 0
    reply_ended_before: int = 0
    stopped: int = 0
    never_stopped: int = 0
    refused: int = 0
    stop: DistSummary = field(default_factory=DistSummary)
    segments: Mapping[str, DistSummary] = field(default_factory=dict)
    provider_drain: DistSummary = field(default_factory=DistSummary)
    never_stopped_talk_over: DistSummary = field(default_factory=DistSummary)
    backchannels: int = 0
    false_barge_ins: int = 0
    false_barge_in_rate: float | None = None
    by_kind: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    pause: DistSummary = field(default_factory=DistSummary)
    talk_over: DistSummary = field(default_factory=DistSummary)
    interruption_e2e: DistSummary = field(default_factory=DistSummary)
    #: The cascade with ``[turn_taking] ignore_words``: the detection's ``vad`` and ``words``
    #: parts, the overlays whose words were only listed ones (the reply went on), the stops
    #: that fell back (no words in time). None: no words wait in the run (keys not written).
    detection_parts: Mapping[str, DistSummary] = field(default_factory=dict)
    words_ignored: int | None = None
    words_fallbacks: int | None = None

    _DISTS = ("stop", "provider_drain", "never_stopped_talk_over", "pause", "talk_over",
              "interruption_e2e")  # fmt: skip
    _COUNTS = ("interrupts", "interrupts_measured", "reply_ended_before", "stopped",
               "never_stopped", "refused", "backchannels", "false_barge_ins")  # fmt: skip

    def to_json(self) -> JSONDict:
        out: JSONDict = {k: getattr(self, k) for k in self._COUNTS}
        out |= {k: getattr(self, k).to_json() for k in self._DISTS}
        out["segments"] = {k: d.to_json() for k, d in self.segments.items()}
        out["false_barge_in_rate"] = self.false_barge_in_rate
        out["by_kind"] = {k: dict(v) for k, v in self.by_kind.items()}
        if self.words_ignored is not None:
            out["detection_parts"] = {k: d.to_json() for k, d in self.detection_parts.items()}
            out["words_ignored"] = self.words_ignored
            out["words_fallbacks"] = self.words_fallbacks or 0
        return out

    @classmethod
    def from_json(cls, data: object) -> BargeInSummary:
        d = _map(data)
        rate = _num(d.get("false_barge_in_rate"))
        return cls(
            **{k: _int(d.get(k)) for k in cls._COUNTS},  # type: ignore[arg-type]
            **{k: DistSummary.from_json(d.get(k)) for k in cls._DISTS},  # type: ignore[arg-type]
            segments=_dists(d.get("segments")),
            false_barge_in_rate=None if rate is None else float(rate),
            by_kind={str(k): {str(a): _int(b) for a, b in _map(v).items()}
                     for k, v in _map(d.get("by_kind")).items()},
            detection_parts=_dists(d.get("detection_parts")),
            words_ignored=_int(d["words_ignored"]) if "words_ignored" in d else None,
            words_fallbacks=_int(d["words_fallbacks"]) if "words_fallbacks" in d else None,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class CallsSummary:
    """The ``calls`` section of a run of whole calls (core/calls/call.py ``calls_section``):
    the greeting's distribution, e2e by the turn's index in its call, dead air, duration."""

    n: int = 0
    completed: int = 0
    ended_early: int = 0
    turns_planned: int = 0
    turns_completed: int = 0
    greeting: DistSummary = field(default_factory=DistSummary)
    greeting_expected: int = 0
    greeting_missing: int = 0
    #: "1", "2", ... (and "10+"): the turn's index in its call -> its e2e.
    e2e_by_index: Mapping[str, DistSummary] = field(default_factory=dict)
    e2e_first_turn: DistSummary = field(default_factory=DistSummary)
    e2e_later_turns: DistSummary = field(default_factory=DistSummary)
    dead_air_max: DistSummary = field(default_factory=DistSummary)
    duration: DistSummary = field(default_factory=DistSummary)
    scenarios: tuple[str, ...] = ()
    failed_steps: tuple[Mapping[str, Any], ...] = ()
    #: Interruptions, backchannels and noise during replies (None: the calls had none).
    barge_in: BargeInSummary | None = None

    def metric(self, name: str) -> DistSummary:
        """One of :data:`CALL_METRICS`."""
        if name == "barge_in_stop":
            return self.barge_in.stop if self.barge_in is not None else DistSummary()
        return {
            "greeting": self.greeting,
            "e2e_first_turn": self.e2e_first_turn,
            "e2e_later_turns": self.e2e_later_turns,
            "dead_air_max": self.dead_air_max,
        }.get(name, DistSummary())

    def to_json(self) -> JSONDict:
        return {
            "n": self.n,
            "completed": self.completed,
            "ended_early": self.ended_early,
            "turns_planned": self.turns_planned,
            "turns_completed": self.turns_completed,
            "greeting": {
                "expected": self.greeting_expected,
                "missing": self.greeting_missing,
                **self.greeting.to_json(),
            },
            "e2e_by_index": {k: d.to_json() for k, d in self.e2e_by_index.items()},
            "e2e_first_turn": self.e2e_first_turn.to_json(),
            "e2e_later_turns": self.e2e_later_turns.to_json(),
            "dead_air_max": self.dead_air_max.to_json(),
            "duration": self.duration.to_json(),
            "scenarios": list(self.scenarios),
            "failed_steps": [dict(f) for f in self.failed_steps],
            **({"barge_in": self.barge_in.to_json()} if self.barge_in is not None else {}),
        }

    @classmethod
    def from_json(cls, data: object) -> CallsSummary:
        d = _map(data)
        greeting = _map(d.get("greeting"))
        return cls(
            n=_int(d.get("n")),
            completed=_int(d.get("completed")),
            ended_early=_int(d.get("ended_early")),
            turns_planned=_int(d.get("turns_planned")),
            turns_completed=_int(d.get("turns_completed")),
            greeting=DistSummary.from_json(greeting),
            greeting_expected=_int(greeting.get("expected")),
            greeting_missing=_int(greeting.get("missing")),
            e2e_by_index=_dists(d.get("e2e_by_index")),
            e2e_first_turn=DistSummary.from_json(d.get("e2e_first_turn")),
            e2e_later_turns=DistSummary.from_json(d.get("e2e_later_turns")),
            dead_air_max=DistSummary.from_json(d.get("dead_air_max")),
            duration=DistSummary.from_json(d.get("duration")),
            scenarios=tuple(str(x) for x in d.get("scenarios") or ()),
            failed_steps=tuple(_map(f) for f in d.get("failed_steps") or ()),
            barge_in=BargeInSummary.from_json(d["barge_in"]) if "barge_in" in d else None,
        )


_SECTIONS: tuple[str, ...] = (
    "calls",
    "schema_version",
    "run",
    "pipeline",
    "stages",
    "fixtures",
    "counts",
    "e2e",
    "segments",
    "figures",
    "spans",
    "waterfall",
    "failures",
    "loop_lag",
    "e2e_from_intended",
    "schedule_lag",
    "trust",
    "budget",
)


@dataclass(frozen=True)
class RunSummary:
    """A run's ``summary.json``, typed. Times are integer ns, as in the file.

    ``pipeline``, ``stages``, ``fixtures`` and ``budget`` echo configuration as written (JSON
    tables); the measured sections are typed. ``e2e_from_intended``, ``schedule_lag`` and
    ``trust`` are None in summaries written before they existed.
    """

    schema_version: int = SCHEMA_VERSION
    run: RunInfo = field(default_factory=RunInfo)
    pipeline: Mapping[str, Any] = field(default_factory=dict)
    stages: Mapping[str, Any] = field(default_factory=dict)
    fixtures: tuple[Mapping[str, Any], ...] = ()
    counts: Counts = field(default_factory=Counts)
    e2e: DistSummary = field(default_factory=DistSummary)
    segments: Mapping[str, DistSummary] = field(default_factory=dict)
    figures: Mapping[str, DistSummary] = field(default_factory=dict)
    spans: Mapping[str, Mapping[str, DistSummary]] = field(default_factory=dict)
    #: Percentile (50, 90, 99) -> its band.
    waterfall: Mapping[int, WaterfallBand] = field(default_factory=dict)
    failures: tuple[FailureCount, ...] = ()
    loop_lag: DistSummary = field(default_factory=DistSummary)
    e2e_from_intended: DistSummary | None = None
    schedule_lag: DistSummary | None = None
    trust: Trust | None = None
    budget: Mapping[str, Any] = field(default_factory=dict)
    #: A run of whole calls (``run --scenario``); None for single turns.
    calls: CallsSummary | None = None
    #: Top-level keys added after the summary was built (``fixture_set_sha256``, ``live``,
    #: ``setup_error``, ``comparison``, ...), in their order.
    extra: Mapping[str, Any] = field(default_factory=dict)

    # -- reading ---------------------------------------------------------------------------
    def metric(self, name: str) -> DistSummary:
        """The distribution of ``e2e``, of a segment, or of a call figure
        (:data:`CALL_METRICS`); empty when the summary has none."""
        if name == E2E:
            return self.e2e
        if name in CALL_METRICS:
            return self.calls.metric(name) if self.calls is not None else DistSummary()
        return self.segments.get(name) or DistSummary()

    @property
    def shown_segments(self) -> tuple[str, ...]:
        """The segments to show: the cascade's, an S2S run's, or both (contract)."""
        return display_segments(frozenset(k for k, d in self.segments.items() if d.n))

    def band(self, p: int) -> WaterfallBand | None:
        """The waterfall band at percentile ``p``, if the run had turns to make one."""
        return self.waterfall.get(p)

    @property
    def pipeline_name(self) -> str | None:
        name = self.pipeline.get("name")
        return None if name is None else str(name)

    @property
    def pipeline_sha256(self) -> str | None:
        return _str(self.pipeline.get("sha256"))

    @property
    def fixture_set_sha256(self) -> str | None:
        return _str(self.extra.get("fixture_set_sha256"))

    @property
    def status(self) -> str | None:
        return self.run.status

    # -- JSON ------------------------------------------------------------------------------
    def to_json(self) -> JSONDict:
        """The ``summary.json`` document."""
        out: JSONDict = {
            "schema_version": self.schema_version,
            "run": self.run.to_json(),
            "pipeline": dict(self.pipeline),
            "stages": dict(self.stages),
            "fixtures": [dict(f) for f in self.fixtures],
            "counts": self.counts.to_json(),
            "e2e": self.e2e.to_json(),
            "segments": {k: d.to_json() for k, d in self.segments.items()},
            "figures": {k: d.to_json() for k, d in self.figures.items()},
            "spans": {
                st: {n: d.to_json() for n, d in spans.items()} for st, spans in self.spans.items()
            },
            "waterfall": {f"p{p}": b.to_json() for p, b in self.waterfall.items()},
            "failures": [f.to_json() for f in self.failures],
            "loop_lag": self.loop_lag.to_json(),
        }
        for name in ("e2e_from_intended", "schedule_lag", "trust"):
            section: DistSummary | Trust | None = getattr(self, name)
            if section is not None:
                out[name] = section.to_json()
        out["budget"] = dict(self.budget)
        if self.calls is not None:
            out["calls"] = self.calls.to_json()
        out.update((k, v) for k, v in self.extra.items() if k not in _SECTIONS)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunSummary:
        """Read a ``summary.json`` document (of any schema up to :data:`SCHEMA_VERSION`)."""
        d = dict(data)

        def optional_dist(name: str) -> DistSummary | None:
            return DistSummary.from_json(d[name]) if isinstance(d.get(name), Mapping) else None

        return cls(
            schema_version=_int(d.get("schema_version"), SCHEMA_VERSION),
            run=RunInfo.from_json(d.get("run")),
            pipeline=_map(d.get("pipeline")),
            stages=_map(d.get("stages")),
            fixtures=tuple(_map(f) for f in d.get("fixtures") or ()),
            counts=Counts.from_json(d.get("counts")),
            e2e=DistSummary.from_json(d.get("e2e")),
            segments=_dists(d.get("segments")),
            figures=_dists(d.get("figures")),
            spans={str(st): _dists(v) for st, v in _map(d.get("spans")).items()},
            waterfall=_bands(d.get("waterfall")),
            failures=tuple(
                FailureCount(str(f.get("reason", "")), _int(f.get("count")))
                for f in d.get("failures") or ()
                if isinstance(f, Mapping)
            ),
            loop_lag=DistSummary.from_json(d.get("loop_lag")),
            e2e_from_intended=optional_dist("e2e_from_intended"),
            schedule_lag=optional_dist("schedule_lag"),
            trust=Trust.from_json(d["trust"]) if isinstance(d.get("trust"), Mapping) else None,
            budget=_map(d.get("budget")),
            calls=CallsSummary.from_json(d["calls"])
            if isinstance(d.get("calls"), Mapping)
            else None,
            extra={k: v for k, v in d.items() if k not in _SECTIONS},
        )

    @classmethod
    def coerce(cls, summary: RunSummary | Mapping[str, Any]) -> RunSummary:
        """``summary`` as a :class:`RunSummary` (callers may still hold the JSON document)."""
        return summary if isinstance(summary, RunSummary) else cls.from_json(summary)


def _bands(data: object) -> dict[int, WaterfallBand]:
    out: dict[int, WaterfallBand] = {}
    for key, band in _map(data).items():
        if isinstance(key, str) and key[:1] == "p" and key[1:].isdigit() and band:
            out[int(key[1:])] = WaterfallBand.from_json(band)
    return out


SummaryLike = RunSummary | Mapping[str, Any]


__all__ = [
    "CALL_METRICS",
    "SCHEMA_VERSION",
    "BargeInSummary",
    "CallsSummary",
    "Counts",
    "DistSummary",
    "FailureCount",
    "RunInfo",
    "RunSummary",
    "SummaryLike",
    "Trust",
    "TrustReason",
    "WaterfallBand",
]
