"""TurnRecorder: turns stamped stage events and runner marks into a :class:`~voicelat.core.base.turn.Turn`.

Sans-I/O: it reads no clock and awaits nothing. Stages report facts; the recorder decides what
counts as first (the first non-empty partial, the first content delta, the first audio payload).
"""

from __future__ import annotations

from typing import Any

from voicelat.core.base.contract import CRITICAL_PATH, MILESTONES, SEGMENTS, STRICT_ORDER
from voicelat.core.base.turn import SpanRecord, Turn
from voicelat.core.measure.arrivals import EXTRA_KEY as DELTAS_KEY
from voicelat.core.measure.arrivals import delta_record
from voicelat.core.measure.events import (
    Audio,
    Connected,
    Delta,
    Done,
    EndOfTurn,
    Failed,
    Final,
    Partial,
    RequestSent,
    ServerTiming,
    Span,
    StageEvent,
    StageName,
    TextSent,
)
from voicelat.core.measure.metrics import (
    critical_segments,
    first_audible_ns,
    llm_figures,
    order_violations,
    tts_figures,
)
from voicelat.core.measure.provider_clock import over_measured, split_figures, stage_split

#: ``Turn.extra`` keys of a failed turn: when its failing stage failed (ns after t0), and
#: whether that is the stage's own ``Failed`` stamp (else its last event: a lower bound).
FAILURE_AT_KEY = "failure_at_ns"
FAILURE_EXACT_KEY = "failure_at_exact"

#: Milestones the runner observes itself (everything else comes from stage events).
RUNNER_MILESTONES = frozenset(
    {
        "speech_start",
        "speech_end",
        "endpoint",
        "llm_first_speakable",
        "tts_first_audible",
        "output_first_audible",
    }
)


class TurnRecorder:
    """Collects one turn's events; :meth:`finish` builds the immutable :class:`Turn`."""

    #: The critical path and its segments (a speech-to-speech recorder has its own).
    path: tuple[str, ...] = CRITICAL_PATH
    segment_names: tuple[str, ...] = SEGMENTS
    strict_order: tuple[tuple[str, str], ...] = STRICT_ORDER
    runner_milestones: frozenset[str] = RUNNER_MILESTONES

    def __init__(
        self,
        *,
        index: int,
        fixture: str,
        t0_ns: int,
        repeat: int = 0,
        warmup: bool = False,
        expected: str | None = None,
        wall_time_ns: int | None = None,
    ) -> None:
        self.index = index
        self.fixture = fixture
        self.t0_ns = t0_ns
        self.repeat = repeat
        self.warmup = warmup
        self.expected = expected
        self.wall_time_ns = wall_time_ns
        self._marks: dict[str, int] = {}
        self._events: dict[str, list[StageEvent]] = {
            "stt": [], "llm": [], "tts": [], "s2s": [], "agent": []
        }  # fmt: skip
        self._failure: tuple[str, str] | None = None
        self._flags: list[str] = []
        self._extra: dict[str, Any] = {}
        self._figures: dict[str, float | int | None] = {}
        self._onset_sample: int | None = None

    # -- input -----------------------------------------------------------------------------
    def mark(self, milestone: str, t_ns: int) -> None:
        """A milestone the runner observed (speech_end, endpoint, first speakable, output...)."""
        if milestone not in self.runner_milestones:
            raise ValueError(f"{milestone!r} is not a runner milestone; stages report it as events")
        # The first observation wins: a milestone is a "first" by definition.
        self._marks.setdefault(milestone, t_ns)

    def on_event(self, stage: StageName, event: StageEvent) -> None:
        """A fact a stage reported."""
        self._events[stage].append(event)
        if isinstance(event, Failed):
            self.fail(stage, event.reason)

    def fail(self, stage: str, reason: str) -> None:
        """Mark the turn failed; the first failure is the reason (later ones are consequences)."""
        if self._failure is None:
            self._failure = (stage, reason)

    def flag(self, flag: str) -> None:
        if flag not in self._flags:
            self._flags.append(flag)

    def set_onset(self, sample_index: int) -> None:
        """Index of the first audible sample in the turn's TTS audio (from the onset detector)."""
        if self._onset_sample is None:
            self._onset_sample = sample_index

    def figure(self, name: str, value: float | int | None) -> None:
        self._figures[name] = value

    def extra(self, key: str, value: Any) -> None:
        self._extra[key] = value

    @property
    def failed(self) -> bool:
        return self._failure is not None

    # -- derivation ------------------------------------------------------------------------
    def milestones(self) -> dict[str, int]:
        """Every milestone observed so far (absolute ns), in contract order."""
        found = dict(self._marks)
        stt, llm, tts = self._events["stt"], self._events["llm"], self._events["tts"]
        partial = _first(stt, lambda e: isinstance(e, Partial) and bool(e.text.strip()))
        if partial is not None:
            found["stt_first_partial"] = partial
        finals = [e.t_ns for e in stt if isinstance(e, Final)]
        if finals:
            found["stt_final"] = finals[-1]
        if "endpoint" not in found:
            eot = _first(stt, lambda e: isinstance(e, EndOfTurn))
            if eot is not None:
                found["endpoint"] = eot
        request = _first(llm, lambda e: isinstance(e, RequestSent))
        if request is not None:
            found["llm_request"] = request
        delta = _first(llm, lambda e: isinstance(e, Delta) and bool(e.content or e.reasoning))
        if delta is not None:
            found["llm_first_delta"] = delta
        token = _first(llm, lambda e: isinstance(e, Delta) and bool(e.content))
        if token is not None:
            found["llm_first_token"] = token
        done = _first(llm, lambda e: isinstance(e, Done))
        if done is not None:
            found["llm_done"] = done
        sent = _first(tts, lambda e: isinstance(e, TextSent))
        if sent is not None:
            found["tts_request"] = sent
        fab = _first(tts, lambda e: isinstance(e, Audio) and bool(e.pcm))
        if fab is not None:
            found["tts_first_byte"] = fab
        if "tts_first_audible" not in found and self._onset_sample is not None:
            audible = first_audible_ns([e for e in tts if isinstance(e, Audio)], self._onset_sample)
            if audible is not None:
                found["tts_first_audible"] = audible
        tts_done = _first(tts, lambda e: isinstance(e, Done))
        if tts_done is not None:
            found["tts_done"] = tts_done
        return {m: found[m] for m in MILESTONES if m in found}

    def transcript(self) -> str | None:
        finals = [e.text for e in self._events["stt"] if isinstance(e, Final)]
        return " ".join(t.strip() for t in finals if t.strip()) if finals else None

    def reply(self) -> str | None:
        deltas = [e.content for e in self._events["llm"] if isinstance(e, Delta)]
        return "".join(deltas).strip() if deltas else None

    def finish(self) -> Turn:
        """Build the turn. Times are stored relative to ``t0_ns``."""
        absolute = self.milestones()
        segments, e2e, seg_flags = critical_segments(absolute, self.path, self.segment_names)
        flags = [*self._flags, *seg_flags, *order_violations(absolute, self.strict_order)]
        failure = self._failure
        if failure is None and e2e is None:
            # The first gap on the critical path is where the turn stopped (and groups failures).
            missing = [m for m in self.path if m not in absolute]
            if missing:
                failure = ("turn", f"incomplete turn: no {missing[0]}")
            else:
                failure = ("turn", "output_first_audible is before speech_end: no e2e")
        if self._failure is not None:
            self._record_failure_time()
        figures = dict(self._figures)
        figures.update(self._stage_figures(absolute))
        flags.extend(self._provider_clock(figures))
        # When each reply delta arrived (compact, built here after the turn): `whatif` replays
        # the chunker on it (core/measure/arrivals.py).
        deltas = delta_record([e for e in self._events["llm"] if isinstance(e, Delta)])
        if deltas is not None:
            self._extra[DELTAS_KEY] = deltas
        spans: list[SpanRecord] = []
        cold_stages: list[str] = []
        for stage, events in self._events.items():
            for e in events:
                if isinstance(e, Span):
                    spans.append(
                        SpanRecord(stage, e.name, e.start_ns - self.t0_ns, e.end_ns - self.t0_ns)
                    )
                elif isinstance(e, Connected) and e.cold and stage not in cold_stages:
                    cold_stages.append(stage)
                elif isinstance(e, ServerTiming):
                    figures.update({f"{stage}_server_{k}": v for k, v in e.values.items()})
        return Turn(
            index=self.index,
            fixture=self.fixture,
            t0_ns=self.t0_ns,
            milestones={k: v - self.t0_ns for k, v in absolute.items()},
            segments=segments,
            e2e_ns=e2e,
            figures=figures,
            spans=tuple(spans),
            repeat=self.repeat,
            warmup=self.warmup,
            cold=bool(cold_stages),
            cold_stages=tuple(cold_stages),
            failed=failure is not None,
            failure_stage=failure[0] if failure else None,
            failure_reason=failure[1] if failure else None,
            flags=tuple(flags),
            transcript=self.transcript(),
            expected=self.expected,
            reply=self.reply(),
            wall_time_ns=self.wall_time_ns,
            extra=dict(self._extra),
        )

    def _record_failure_time(self) -> None:
        """When the failing stage failed, after t0 (``extra["failure_at_ns"]``), so an export
        can show a failed stage's real duration: its ``Failed`` event's stamp (exact,
        ``failure_at_exact``), else the last event it reported (a lower bound: an exception
        raised in the stage carries no stamp). Nothing when the stage reported no event."""
        stage = self._failure[0] if self._failure else ""
        events = self._events.get(stage) or []
        failed = next((e for e in events if isinstance(e, Failed)), None)
        stamps = [e.end_ns if isinstance(e, Span) else getattr(e, "t_ns", None) for e in events]
        known = [t for t in stamps if isinstance(t, int)]
        at = failed.t_ns if failed is not None else max(known, default=None)
        if at is not None:
            self._extra[FAILURE_AT_KEY] = at - self.t0_ns
            self._extra[FAILURE_EXACT_KEY] = failed is not None

    def _provider_clock(self, figures: dict[str, float | int | None]) -> list[str]:
        """Each stage's provider-reported time and the rest (core/measure/provider_clock.py); flags a
        provider that reports more than was measured."""
        flags: list[str] = []
        for stage, events in self._events.items():
            found = stage_split(stage, events)
            if found is None:
                continue
            figures.update(split_figures(found))
            self._extra[f"{stage}_provider_source"] = found.source
            if over_measured(found):
                flags.append(f"provider_clock:{stage}>measured")
        return flags

    def _stage_figures(self, absolute: dict[str, int]) -> dict[str, float | int | None]:
        stt, llm, tts = self._events["stt"], self._events["llm"], self._events["tts"]
        out: dict[str, float | int | None] = {}
        audio_end = _first(stt, lambda e: isinstance(e, RequestSent))
        final = absolute.get("stt_final")
        out["stt_finalization_ns"] = (
            final - audio_end if final is not None and audio_end is not None else None
        )
        partial = absolute.get("stt_first_partial")
        start = absolute.get("speech_start")
        out["stt_first_partial_ns"] = (
            partial - start if partial is not None and start is not None else None
        )
        done = next((e for e in llm if isinstance(e, Done)), None)
        out.update(
            llm_figures(
                absolute.get("llm_request"),
                [e for e in llm if isinstance(e, Delta)],
                done.t_ns if done else None,
                done.usage if done else {},
            )
        )
        if done is not None:
            self._extra.setdefault("llm_finish_reason", done.finish_reason)
        out.update(
            tts_figures(
                absolute.get("tts_request"),
                [e for e in tts if isinstance(e, Audio)],
                absolute.get("tts_done"),
            )
        )
        out.update(_usage_figures("stt", stt))
        out.update(_usage_figures("tts", tts))
        return out


def _usage_figures(stage: str, events: list[StageEvent]) -> dict[str, float | int | None]:
    """What the STT or TTS provider reported it used for the turn (``Done.usage``, in the
    stage's normalised keys: ``audio_ms``, ``characters``, ``input_tokens``...), as figures
    ``<stage>_usage_<key>``: core/judge/cost.py prices these before anything voicelat counted."""
    done = next((e for e in events if isinstance(e, Done)), None)
    if done is None:
        return {}
    return {f"{stage}_usage_{k}": v for k, v in sorted(done.usage.items())}


def _first(events: list[StageEvent], pred: Any) -> int | None:
    for e in events:
        if pred(e):
            return int(e.t_ns)  # type: ignore[union-attr]
    return None
