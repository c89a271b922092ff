"""The run summary: counts, percentiles, the percentile waterfall bands (pure; no I/O)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from voicelat.core.base.contract import segment_names
from voicelat.core.base.display import round_to_total
from voicelat.core.base.stats import PERCENTILES, Band, Distribution, percentile_band
from voicelat.core.base.turn import HANGOVER_UNSTATED, Turn
from voicelat.core.measure.provider_clock import PROVIDER_KEYS
from voicelat.core.measure.schedule import from_intended_ns
from voicelat.core.summaries.diagnostics import MachineSample, assess_trust
from voicelat.core.summaries.regions import regions_section
from voicelat.core.summaries.run_summary import (
    SCHEMA_VERSION,
    Counts,
    DistSummary,
    FailureCount,
    RunInfo,
    RunSummary,
    Trust,
    WaterfallBand,
)

#: Per-turn figures summarized as distributions (ns unless the name says otherwise).
FIGURES: tuple[str, ...] = (
    "stt_finalization_ns",
    "stt_first_partial_ns",
    "llm_ttfd_ns",
    "llm_ttft_ns",
    "llm_chunk_gap_p50_ns",
    "llm_chunk_gap_max_ns",
    "llm_itl_ns",
    "llm_tokens_per_s",
    "llm_total_ns",
    "tts_rtf",
    "tts_audio_ns",
    "tts_stalls",
    "tts_stall_total_ns",
    # The provider's own clock (core/measure/provider_clock.py): only stages whose provider reports it.
    *(f"{st}_{k}" for st in ("stt", "llm", "tts") for k in PROVIDER_KEYS),
    # Speech-to-speech turns (a cascade summary never has them: only figures turns have show).
    "s2s_rtf",
    "s2s_audio_ns",
    "s2s_stalls",
    "s2s_stall_total_ns",
    "s2s_usage_input_tokens",
    "s2s_usage_output_tokens",
    # Agent turns: the black-box total (beside a traced split) and the agent's own figures.
    "agent_response_ns",
    "agent_reported_stt_ttfb_ms",
    "agent_reported_llm_ttfb_ms",
    "agent_reported_tts_ttfb_ms",
    "agent_audio_ns",
    "agent_stalls",
    "pacer_lag_max_ns",
    "loop_lag_max_ns",
    "sink_underruns",
    # Continuity at the ear (audio/sink.py): the longest underrun, late chunks, the stream's RTF.
    "sink_underrun_total_ns",
    "sink_longest_gap_ns",
    "sink_late_chunks",
    "sink_realtime_factor",
    # A phone leg (engine/phone_leg.py): 20 ms frames lost (or late) and concealed, each way.
    "phone_up_lost_frames",
    "phone_down_lost_frames",
    # WebRTC: reply frames the caller's decoder never got (stages/webrtc.py), and what the
    # media relay lost per way under a network profile (stages/media_relay.py).
    "webrtc_lost_frames",
    "media_up_lost",
    "media_down_lost",
    "schedule_lag_ns",
)


def headline_turns(turns: Iterable[Turn]) -> list[Turn]:
    """The turns the headline numbers are made of: measured, warm, not warm-up."""
    return [t for t in turns if t.headline]


def counts(turns: Sequence[Turn]) -> dict[str, int]:
    """The ``counts`` section: turns run, in the headline, warm-up, cold, failed, flagged."""
    out = {
        "turns": len(turns),
        "headline": sum(t.headline for t in turns),
        "warmup": sum(t.warmup for t in turns),
        "cold": sum(t.cold and not t.warmup and t.ok for t in turns),
        "failed": sum(t.failed for t in turns),
        "flagged": sum(bool(t.flags) for t in turns),
    }
    # Only live sessions have interrupted (barged-in) turns: the key appears when there are
    # some, so fixture runs keep their counts as they were.
    interrupted = sum(t.interrupted for t in turns)
    if interrupted:
        out["interrupted"] = interrupted
    # Agent turns whose trace states no VAD hangover (counted in stt): the key appears when
    # there are some (issue #30).
    unstated = sum(HANGOVER_UNSTATED in t.flags for t in turns)
    if unstated:
        out["hangover_unstated"] = unstated
    return out


def segment_distributions(turns: Sequence[Turn]) -> dict[str, Distribution]:
    """e2e and every segment of the critical path, as distributions over ``turns``."""
    out = {"e2e": Distribution.of([t.e2e_ns for t in turns if t.e2e_ns is not None])}
    for s in _segment_names(turns):
        out[s] = Distribution.of([t.segments[s] for t in turns if s in t.segments])
    return out


def _segment_names(turns: Sequence[Turn]) -> tuple[str, ...]:
    """The cascade's segments, plus the S2S ``model`` segment when a turn has it."""
    return segment_names(frozenset(s for t in turns for s in t.segments))


def e2e_from_intended(turns: Sequence[Turn]) -> Distribution:
    """e2e re-based on each turn's intended start (e2e + schedule lag): what a user of an
    open-loop schedule waited, client-side queueing included (coordinated omission)."""
    values = [
        float(from_intended_ns(t.e2e_ns, int(lag)))
        for t in turns
        if t.e2e_ns is not None and isinstance(lag := t.figures.get("schedule_lag_ns"), int | float)
    ]
    return Distribution.of(values)


def figure_distributions(turns: Sequence[Turn]) -> dict[str, Distribution]:
    """The per-turn :data:`FIGURES` that ``turns`` have, as distributions."""
    out: dict[str, Distribution] = {}
    for name in FIGURES:
        values = [float(v) for t in turns if isinstance(v := t.figures.get(name), int | float)]
        if values:
            out[name] = Distribution.of(values)
    return out


def span_distributions(turns: Sequence[Turn]) -> dict[str, dict[str, Distribution]]:
    """Per stage, the network sub-spans of ``turns`` (connect, TTFB, ...) as distributions."""
    per: dict[str, dict[str, list[float]]] = {}
    for t in turns:
        for stage in ("stt", "llm", "tts", "s2s", "agent"):
            for name, dur in t.spans_of(stage).items():
                per.setdefault(stage, {}).setdefault(name, []).append(float(dur))
    return {st: {n: Distribution.of(v) for n, v in spans.items()} for st, spans in per.items()}


def waterfall(turns: Sequence[Turn], percentiles: Sequence[int] = PERCENTILES) -> dict[int, Band]:
    """Percentile bands of the headline turns (each band's segments sum to its mean e2e)."""
    rows = [(t.index, float(t.e2e_ns), t.segments) for t in turns if t.e2e_ns is not None]
    out: dict[int, Band] = {}
    for p in percentiles:
        band = percentile_band(rows, p, _segment_names(turns))
        if band is not None:
            out[p] = band
    return out


def bands_json(bands: Mapping[int, Band]) -> dict[int, WaterfallBand]:
    """The waterfall bands in integer ns, each band's segments rounded to sum to its mean."""
    out: dict[int, WaterfallBand] = {}
    for p, b in bands.items():
        mean = round(b.mean_e2e)
        out[p] = WaterfallBand(
            n=b.n,
            band_n=b.band_n,
            e2e_percentile_ns=round(b.e2e_percentile),
            mean_e2e_ns=mean,
            segments_ns=round_to_total(b.segments, mean),
            turns=tuple(b.indexes),
        )
    return out


def _saved(dist: Distribution, *, integer: bool = True) -> DistSummary:
    """A distribution as ``summary.json`` keeps it: integer ns, or ratios to 6 decimals."""
    return DistSummary.from_json(dist.to_json(integer=integer))


@dataclass(frozen=True)
class SummaryParts:
    """The measured sections of a summary, before they are saved as JSON numbers: computed
    from a list of turns (:func:`summarize`) or from streams
    (:class:`voicelat.core.summaries.streaming_summary.SummaryAccumulator`)."""

    counts: Mapping[str, int]
    e2e: Distribution
    segments: Mapping[str, Distribution]
    figures: Mapping[str, Distribution]
    spans: Mapping[str, Mapping[str, Distribution]]
    bands: Mapping[int, Band]
    failures: Sequence[tuple[str, int]]
    loop_lag: Distribution
    e2e_from_intended: Distribution
    schedule_lag: Distribution
    trust: Mapping[str, Any]
    #: How exact the percentiles are: ``{"mode": "exact"}``, or the histogram's relative error.
    quantiles: Mapping[str, Any] = field(default_factory=lambda: dict(EXACT_QUANTILES))
    #: Per-region percentiles when the turns come from several regions (core/summaries/regions.py).
    regions: Mapping[str, Any] | None = None


#: The ``quantiles`` section of a summary whose percentiles come from every value.
EXACT_QUANTILES: Mapping[str, Any] = {"mode": "exact"}


def summarize(
    turns: Sequence[Turn],
    *,
    run: Mapping[str, Any],
    pipeline: Mapping[str, Any],
    fixtures: Sequence[Mapping[str, Any]],
    stages: Mapping[str, Any],
    loop_lag_ns: Sequence[int] = (),
    budget: Mapping[str, Any] | None = None,
    machine: Sequence[MachineSample] = (),
) -> RunSummary:
    """The typed run summary of ``turns`` (see :func:`build_summary` for its JSON)."""
    head = headline_turns(turns)
    segs = segment_distributions(head)
    failures = Counter(
        f"{t.failure_stage}: {t.failure_reason}" for t in turns if t.failed and t.failure_reason
    )
    schedule_lags = [
        float(v) for t in head if isinstance(v := t.figures.get("schedule_lag_ns"), int | float)
    ]
    parts = SummaryParts(
        counts=counts(turns),
        e2e=segs["e2e"],
        segments={s: segs[s] for s in _segment_names(head)},
        figures=figure_distributions(head),
        spans=span_distributions(head),
        bands=waterfall(head),
        failures=failures.most_common(),
        loop_lag=Distribution.of([float(x) for x in loop_lag_ns]),
        e2e_from_intended=e2e_from_intended(head),
        schedule_lag=Distribution.of(schedule_lags),
        trust=assess_trust(turns, loop_lag_ns, machine=machine, stages=stages),
        regions=regions_section(turns),
    )
    return assemble(
        parts, run=run, pipeline=pipeline, fixtures=fixtures, stages=stages, budget=budget
    )


def assemble(
    parts: SummaryParts,
    *,
    run: Mapping[str, Any],
    pipeline: Mapping[str, Any],
    fixtures: Sequence[Mapping[str, Any]],
    stages: Mapping[str, Any],
    budget: Mapping[str, Any] | None = None,
) -> RunSummary:
    """The typed run summary of ``parts`` and the run's configuration."""
    return RunSummary(
        schema_version=SCHEMA_VERSION,
        run=RunInfo.from_json(run),
        pipeline=dict(pipeline),
        stages=dict(stages),
        fixtures=tuple(dict(f) for f in fixtures),
        counts=Counts.from_json(parts.counts),
        e2e=_saved(parts.e2e),
        segments={s: _saved(d) for s, d in parts.segments.items()},
        figures={k: _saved(v, integer=k.endswith("_ns")) for k, v in parts.figures.items()},
        spans={st: {n: _saved(d) for n, d in spans.items()} for st, spans in parts.spans.items()},
        waterfall=bands_json(parts.bands),
        failures=tuple(FailureCount(r, c) for r, c in parts.failures),
        loop_lag=_saved(parts.loop_lag),
        # Both latencies, from the actual and from the intended start (schedule.py).
        e2e_from_intended=_saved(parts.e2e_from_intended),
        schedule_lag=_saved(parts.schedule_lag),
        trust=Trust.from_json(parts.trust),
        budget=dict(budget or {}),
        extra={"quantiles": dict(parts.quantiles)}
        | ({"regions": dict(parts.regions)} if parts.regions is not None else {}),
    )


def build_summary(
    turns: Sequence[Turn],
    *,
    run: Mapping[str, Any],
    pipeline: Mapping[str, Any],
    fixtures: Sequence[Mapping[str, Any]],
    stages: Mapping[str, Any],
    loop_lag_ns: Sequence[int] = (),
    budget: Mapping[str, Any] | None = None,
    machine: Sequence[MachineSample] = (),
) -> dict[str, Any]:
    """The ``summary.json`` document (schema ``SCHEMA_VERSION``): :func:`summarize` as JSON."""
    return summarize(
        turns,
        run=run,
        pipeline=pipeline,
        fixtures=fixtures,
        stages=stages,
        loop_lag_ns=loop_lag_ns,
        budget=budget,
        machine=machine,
    ).to_json()
