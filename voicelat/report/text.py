"""Plain-text renderings for the terminal and CI logs (pure functions of turns and summaries)."""

from __future__ import annotations

from collections.abc import Mapping

from voicelat.core.base.display import fmt_ms
from voicelat.core.base.turn import Turn
from voicelat.core.judge.cost import fmt_money
from voicelat.core.summaries.diagnostics import machine_judged, transport_judged
from voicelat.core.summaries.run_summary import DistSummary, RunSummary, SummaryLike
from voicelat.report.caller_text import caller_lines


def turn_line(turn: Turn, total: int) -> str:
    """One line per finished turn: e2e and the largest segment, or the failure."""
    head = f"[{turn.index + 1:>{len(str(total))}}/{total}] {turn.fixture:<20}"
    tags = []
    if turn.warmup:
        tags.append("warm-up")
    if turn.cold:
        tags.append("cold:" + ",".join(turn.cold_stages))
    tags.extend(f for f in turn.flags if not f.startswith("prepare_failed"))
    tag = f"  ({'; '.join(tags)})" if tags else ""
    if turn.failed:
        return f"{head} FAILED {turn.failure_stage}: {turn.failure_reason}{tag}"
    largest = turn.largest_segment()
    big = f"  largest {largest[0]} {fmt_ms(largest[1])} ms" if largest else ""
    return f"{head} e2e {fmt_ms(turn.e2e_ns, width=5)} ms{big}{tag}"


def summary_table(summary: SummaryLike, run_dir: str | None = None) -> str:
    """The segment table at P50 and P90, the P50/P90 waterfall bands, counts and where results are."""
    s = RunSummary.coerce(summary)
    lines = _segment_table(s)
    lines.extend(_band_lines(s))
    lines.extend(provider_lines(s))
    lines.extend(_count_lines(s))
    lines.extend(call_lines(s))
    lines.extend(region_lines(s.extra.get("regions")))
    lines.extend(caller_lines(s.extra.get("caller")))
    lines.extend(cost_lines(s.extra.get("cost")))
    lines.extend(quality_lines(s.extra.get("quality")))
    lines.extend(_load_lines(s))
    if (line := instrument_summary_line(s.extra.get("instrument"))) is not None:
        lines.append(line)
    if s.run.status and s.run.status != "complete":
        lines.append(f"run status: {s.run.status}")
    if run_dir:
        lines.append(f"results: {run_dir}")
    return "\n".join(lines)


def instrument_summary_line(section: object) -> str | None:
    """The run's "± instrument error" line from its summary's ``instrument`` section
    (``core/summaries/instrument.py``); None when the run has no such section (an older run)."""
    if not isinstance(section, Mapping):
        return None
    ppm = section.get("clock_ppm")
    clock = f"; clock {ppm:+.1f} ppm vs wall" if isinstance(ppm, int | float) else ""
    p50, p99 = section.get("error_p50_ns"), section.get("error_p99_ns")
    if section.get("status") != "calibrated" or not isinstance(p50, int | float):
        return f"± instrument error: uncalibrated ({section.get('reason') or 'no reason given'}){clock}"
    kinds = section.get("by_kind")
    per = (
        ", ".join(
            f"{k} {fmt_ms(v.get('error_p99_ns'), decimals=1)}"
            for k, v in kinds.items()
            if isinstance(v, Mapping)
        )
        if isinstance(kinds, Mapping)
        else ""
    )
    warning = section.get("reason")
    return (
        f"± instrument error: P50 {fmt_ms(p50, decimals=1)} ms, P99 "
        f"{fmt_ms(p99, decimals=1)} ms ({section.get('turns')} reference turns, "
        f"{section.get('mode')}{'; P99 ms by kind: ' + per if per else ''}){clock}"
        + (f"; WARNING: {warning}" if warning else "")
    )


def region_lines(section: object) -> list[str]:
    """Turns measured from several regions (the summary's ``regions``, core/summaries/regions.py):
    one row per region, e2e P50/P90/P99 and each segment's P50, so two places read as one table."""
    if not isinstance(section, Mapping) or not section:
        return []
    rows = {k: v for k, v in section.items() if isinstance(v, Mapping)}
    segs: list[str] = []
    for r in rows.values():
        p50s = r.get("segments_p50_ns")
        segs += [s for s in (p50s if isinstance(p50s, Mapping) else ()) if s not in segs]
    width = max([16, *(len(k) + 2 for k in rows)])
    widths = {s: max(8, len(s) + 2) for s in segs}
    head = "".join(f"{s:>{widths[s]}}" for s in segs)
    lines = [
        "By region (e2e over each region's headline turns; segments at P50)",
        f"  {'region':<{width}}{'n':>6}{'failed':>7}{'P50 ms':>8}{'P90 ms':>8}{'P99 ms':>8}{head}",
    ]
    for name, r in rows.items():
        e2e = DistSummary.from_json(r.get("e2e"))
        p50s = r.get("segments_p50_ns")
        seg = p50s if isinstance(p50s, Mapping) else {}
        cells = "".join(fmt_ms(v, width=8) for v in (e2e.p50, e2e.p90, e2e.p99))
        cells += "".join(fmt_ms(seg.get(s), width=widths[s]) for s in segs)
        lines.append(f"  {name:<{width}}{e2e.n:>6}{r.get('failed', 0):>7}{cells}")
    return lines


def call_lines(s: RunSummary) -> list[str]:
    """A run of calls: the calls, the greeting, e2e by the turn's index in its call, dead air."""
    c = s.calls
    if c is None:
        return []
    g = c.greeting
    greeting = (
        f"greeting P50 {fmt_ms(g.p50)} ms  P90 {fmt_ms(g.p90)} ms (n={g.n}, "
        f"{c.greeting_missing} missing)"
        if c.greeting_expected
        else "no greeting expected"
    )
    lines = [
        f"calls: {c.n} run, {c.completed} completed, {c.ended_early} ended early; turns "
        f"{c.turns_completed}/{c.turns_planned} completed; {greeting}",
        "e2e by turn index in the call (every ok turn, cold ones too: index 1 is the fresh call)",
        f"  {'turn':<16}{'n':>8}{'P50 ms':>8}{'P90 ms':>8}{'max ms':>8}",
    ]
    for index, d in c.e2e_by_index.items():
        cells = "".join(fmt_ms(v, width=8) for v in (d.p50, d.p90, d.max))
        lines.append(f"  {index:<16}{d.n:>8}{cells}")
    first, later = c.e2e_first_turn, c.e2e_later_turns
    if first.n and later.n:
        lines.append(
            f"  turn 1 P50 {fmt_ms(first.p50)} ms vs later turns P50 {fmt_ms(later.p50)} ms "
            f"(n={first.n} / {later.n})"
        )
    air, dur = c.dead_air_max, c.duration
    lines.append(
        f"dead air (longest wait a call) P50 {fmt_ms(air.p50)} ms  P90 {fmt_ms(air.p90)} ms; "
        f"call duration P50 {fmt_ms(dur.p50)} ms"
    )
    lines.extend(
        f"  failed: {f.get('call_id')} {f.get('step')}: {f.get('reason')}"
        for f in c.failed_steps[:5]
    )
    return lines + barge_in_lines(s)


def barge_in_lines(s: RunSummary) -> list[str]:
    """Interruptions and backchannels: the stop latency at the ear and its waterfall, never
    stopped, false barge-ins, talk-over, the response to an interruption."""
    b = s.calls.barge_in if s.calls is not None else None
    if b is None:
        return []
    stop = b.stop
    lines = [
        f"barge-in: {b.interrupts} interruptions ({b.stopped} stopped, {b.never_stopped} never "
        f"stopped, {b.reply_ended_before} after the reply ended); stop at the ear P50 "
        f"{fmt_ms(stop.p50)} ms  P90 {fmt_ms(stop.p90)} ms (n={stop.n})"
    ]
    if b.segments:
        parts = "  ".join(f"{k} {fmt_ms(d.p50)}" for k, d in b.segments.items())
        lines.append(f"  stop waterfall P50 ms: {parts} (segments sum to each stop)")
    if b.words_ignored is not None:
        split = "  ".join(f"{k} {fmt_ms(d.p50)}" for k, d in b.detection_parts.items())
        lines.append(
            f"  detection waited for words (ignore_words): P50 ms {split or '-'} (sum to the "
            f"detection); {b.words_ignored} kept talking on listed words, "
            f"{b.words_fallbacks} stopped without words in time"
        )
    if b.provider_drain.n and b.provider_drain.max:
        lines.append(
            f"  provider kept streaming after the detection P50 {fmt_ms(b.provider_drain.p50)} "
            f"ms (n={b.provider_drain.n}; not heard: voicelat flushed its playback)"
        )
    if b.never_stopped:
        t = b.never_stopped_talk_over
        lines.append(f"  never stopped: talked over the user P50 {fmt_ms(t.p50)} ms")
    if b.backchannels:
        rate = f"{b.false_barge_in_rate:.0%}" if b.false_barge_in_rate is not None else "-"
        lines.append(
            f"  false barge-ins: {b.false_barge_ins}/{b.backchannels} backchannel/noise steps "
            f"({rate}); longest pause P50 {fmt_ms(b.pause.p50)} ms  P90 {fmt_ms(b.pause.p90)} ms"
        )
    if b.talk_over.n:
        lines.append(f"  talk-over (both audible) P50 {fmt_ms(b.talk_over.p50)} ms")
    if b.interruption_e2e.n:
        e = b.interruption_e2e
        lines.append(
            f"  response to an interruption (e2e from its speech end) P50 {fmt_ms(e.p50)} ms "
            f"(n={e.n})"
        )
    return lines


def provider_clock(turn: Turn) -> str:
    """One turn's stages split by the provider's own clock, e.g. ``llm 120 + 9 of 129 ms
    (openai-processing-ms)``: reported + the rest (network, queueing, client) of the measured
    span; empty when no provider of the turn reported its time (docs/PROVIDER-CLOCK.md)."""
    parts = []
    for stage in ("stt", "llm", "tts"):
        f = turn.figures
        reported, rest = f.get(f"{stage}_provider_ns"), f.get(f"{stage}_overhead_ns")
        span = f.get(f"{stage}_provider_span_ns")
        if reported is None or rest is None or span is None:
            continue
        source = turn.extra.get(f"{stage}_provider_source", "?")
        parts.append(f"{stage} {_fine(reported)} + {_fine(rest)} of {_fine(span)} ms ({source})")
    return "; ".join(parts)


def provider_lines(s: RunSummary) -> list[str]:
    """The provider-reported part of each stage that has one and the rest, at P50 and P90."""
    lines: list[str] = []
    for stage in ("stt", "llm", "tts"):
        reported = s.figures.get(f"{stage}_provider_ns")
        rest = s.figures.get(f"{stage}_overhead_ns")
        span = s.figures.get(f"{stage}_provider_span_ns")
        if reported is None or rest is None or span is None or not reported.n:
            continue
        cells = " · ".join(
            f"{name} P50 {_fine(d.p50)} P90 {_fine(d.p90)} ms"
            for name, d in (("reported", reported), ("rest", rest), ("span", span))
        )
        lines.append(f"  {stage:<4}{cells} (n={reported.n})")
    if lines:
        lines.insert(
            0,
            "Provider's own clock: what the provider reported, the rest (network, queueing, "
            "client) and the span it covers (percentiles do not add):",
        )
    return lines


def _fine(ns: object) -> str:
    # A rest of a few ms is the point of the split: "2" would hide 1.6 vs 2.4.
    return fmt_ms(ns, fine_below_ms=10.0)


def _row(name: str, d: DistSummary) -> str:
    cells = "".join(fmt_ms(v, width=8) for v in (d.p50, d.p90, d.p99, d.max))
    return f"  {name:<16}{cells}"


def _segment_table(s: RunSummary) -> list[str]:
    lines = [
        f"Per-segment percentiles (each column on its own: percentiles do not add), n={s.e2e.n}",
        f"  {'segment':<16}{'P50 ms':>8}{'P90 ms':>8}{'P99 ms':>8}{'max ms':>8}",
    ]
    lines.extend(_row(seg, s.metric(seg)) for seg in s.shown_segments)
    lines.append(_row("e2e", s.e2e))
    return lines


def _band_lines(s: RunSummary) -> list[str]:
    lines: list[str] = []
    for p in (50, 90):
        band = s.band(p)
        if band is None:
            continue
        shown = s.shown_segments
        parts = " + ".join(f"{seg} {fmt_ms(band.segments_ns.get(seg, 0))}" for seg in shown)
        lines.append(
            f"Waterfall at P{p} (mean of {band.band_n} turn(s) around it, sums to "
            f"{fmt_ms(band.mean_e2e_ns)} ms; exact P{p} e2e {fmt_ms(band.e2e_percentile_ns)} ms):"
        )
        lines.append(f"  {parts}")
    return lines


def from_endpoint(s: RunSummary) -> str:
    """``; from the endpoint: P50 band X ms, P90 band Y ms`` (e2e less endpointing, what a
    client that stops its clock at its own audio-stop measures), or nothing without bands."""
    if s.e2e.p50 is None or s.metric("endpointing").p50 is None:
        return ""
    parts = []
    for p in (50, 90):
        band = s.band(p)
        if band is not None:
            ms = fmt_ms(band.mean_e2e_ns - band.segments_ns.get("endpointing", 0))
            parts.append(f"P{p} band {ms} ms")
    return f"; from the endpoint: {', '.join(parts)}" if parts else ""


def _count_lines(s: RunSummary) -> list[str]:
    e2e, c = s.e2e, s.counts
    lines = [
        f"e2e P50 {fmt_ms(e2e.p50)} ms  P90 {fmt_ms(e2e.p90)} ms  (n={e2e.n} warm turns)"
        + from_endpoint(s),
        f"turns: {c.turns} run, {c.headline} in the headline, "
        f"{c.warmup} warm-up and {c.cold} cold excluded, {c.failed} failed"
        + (f", {c.interrupted} interrupted (barge-in)" if c.interrupted else ""),
    ]
    lines.extend(f"  failed x{f.count}: {f.reason}" for f in s.failures[:5])
    if c.hangover_unstated:
        lines.append(
            f"note: {c.hangover_unstated} agent turn(s) whose trace states no VAD hangover: it "
            "is counted in stt, not endpointing (put voicelat.vad_stop_secs on the agent's "
            "spans; docs/AGENT-TRACES.md)"
        )
    if c.turns and not c.headline:
        # `run -n 1 -w 0` used to end on "n=0" with no word on why.
        lines.append(
            "no turn in the headline: every turn was a warm-up, cold (the first request on a new "
            "connection is reported apart), failed or interrupted; run more turns, with "
            "--warmup 1 (the default) to absorb the cold start"
        )
    lag = s.loop_lag
    if lag.n:
        lines.append(
            f"event-loop lag P50 {fmt_ms(lag.p50)} ms, P99 {fmt_ms(lag.p99)} ms, "
            f"max {fmt_ms(lag.max)} ms (n={lag.n})"
        )
    quantiles = s.extra.get("quantiles")
    if isinstance(quantiles, Mapping) and quantiles.get("mode") == "histogram":
        # A long run's percentiles come from histograms (core/summaries/streaming_summary.py): say so.
        err = quantiles.get("relative_error")
        lines.append(
            f"percentiles from histograms past {quantiles.get('exact_up_to')} values each: "
            f"within {err:.1%} of the exact ones (n, min, max and mean exact)"
            if isinstance(err, int | float)
            else "percentiles from histograms (approximate)"
        )
    return lines


def trust_judged(checks: Mapping[str, float], thresholds: Mapping[str, float]) -> str:
    """What a passing trust check looked at, with the measured values against the limits
    (a bare "ok" beside an event-loop lag max of 33 ms, judged at its P99, reads as a contradiction)."""
    parts = []
    if "loop_lag_p99_ns" in checks:
        limit = thresholds.get("loop_lag_p99_ms")
        parts.append(
            f"event-loop lag P99 {fmt_ms(checks['loop_lag_p99_ns'], decimals=1)} ms"
            + (f" <= {limit:g} ms" if isinstance(limit, int | float) else "")
        )
    if "pacer_lag_late_turns" in checks:
        parts.append(f"pacer late on {int(checks['pacer_lag_late_turns'])} turn(s)")
    if "schedule_lag_p99_ns" in checks:
        parts.append(f"schedule lag P99 {fmt_ms(checks['schedule_lag_p99_ns'])} ms")
    if "llm_starved_turns" in checks:
        parts.append(
            f"no LLM stall over {thresholds.get('starved_gap_factor', 10):g}x the median "
            f"chunk gap ({fmt_ms(checks.get('llm_chunk_gap_median_ns'), decimals=1)} ms)"
        )
    if machine := machine_judged(checks):
        parts.append(machine)
    note = transport_judged(checks)
    parts.append("transport checks passed" + (f": {note}" if note else ""))
    return ", ".join(parts)


def _traced_lines(s: RunSummary) -> list[str]:
    """An import of production traces (``voicelat import``): what t=0 and the end are, and
    what the conformance checks found (docs/PRODUCTION.md)."""
    traced = s.extra.get("traced")
    if not isinstance(traced, dict):
        return []
    lines = ["traced turns (from the agent's own spans; no ground truth):"]
    for key, label in (("t0", "t=0"), ("end", "end")):
        for name, info in (traced.get(key) or {}).items():
            if isinstance(info, dict):
                lines.append(
                    f"  {label} [{name}, {info.get('turns')} turn(s)]: {info.get('means')}"
                )
    found = {k: n for k, n in (traced.get("findings") or {}).items() if n}
    lines.append(
        "  findings: "
        + (", ".join(f"{k} {n}" for k, n in found.items()) if found else "none")
        + " (voicelat import --check lists them)"
    )
    return lines


def _load_lines(s: RunSummary) -> list[str]:
    """How the load was offered, e2e from the intended start, and whether to trust the run."""
    lines: list[str] = []
    load = s.run.load or {}
    if load.get("mode") == "open":
        seed = "" if load.get("arrival") == "constant" else f", seed {load.get('seed')}"
        lines.append(
            f"load: open loop, {load.get('arrival')} arrivals at {load.get('rate_per_s'):g} "
            f"turns/s{seed}; {load.get('sessions_opened', '?')} session(s) opened"
        )
    elif load.get("concurrency", 1) > 1:
        lines.append(f"load: closed loop, {load['concurrency']} sessions back to back")
    intended = s.e2e_from_intended or DistSummary()
    lag = s.schedule_lag or DistSummary()
    # One session back to back has no schedule to fall behind: its few ms of "lag" are the gap
    # between its turns, and coordinated omission cannot happen; only a stall is worth the line.
    floor_ns = 1_000_000 if load.get("concurrency", 1) > 1 else 10_000_000
    if intended.n and lag.n and (load.get("mode") == "open" or (lag.max or 0) > floor_ns):
        lines.append(
            f"e2e from the intended start (+ schedule lag, coordinated omission) "
            f"P50 {fmt_ms(intended.p50)} ms  P90 {fmt_ms(intended.p90)} ms  "
            f"P99 {fmt_ms(intended.p99)} ms; schedule lag P50 {fmt_ms(lag.p50)} ms, "
            f"P99 {fmt_ms(lag.p99)} ms, max {fmt_ms(lag.max)} ms"
        )
    lines.extend(_traced_lines(s))
    trust = s.trust
    if trust is not None:
        if trust.trustworthy:
            lines.append(f"trust: ok ({trust_judged(trust.checks, trust.thresholds)})")
        else:
            lines.append("TRUST: these figures may not be reliable:")
            lines.extend(f"  - {r.message}" for r in trust.reasons)
    return lines


def cost_lines(cost: object) -> list[str]:
    """The summary's ``cost`` section (core/judge/cost.py) in a few lines; none without one."""
    if not isinstance(cost, Mapping) or not isinstance(cost.get("per_turn"), Mapping):
        return []
    cur, pt = str(cost.get("currency", "")), cost["per_turn"]
    lines = [
        f"cost: {fmt_money(pt.get('mean'), cur)} per turn (P90 {fmt_money(pt.get('p90'), cur)}, "
        f"n={pt.get('n', 0)}), {fmt_money(cost.get('per_minute'), cur)} per minute of "
        f"conversation, {fmt_money(cost.get('total'), cur)} for {cost.get('priced_turns', 0)}/"
        f"{cost.get('turns', 0)} turns"
    ]
    stages = cost.get("stages")
    for kind, st in stages.items() if isinstance(stages, Mapping) else ():
        usage = "; ".join(st.get("usage") or [])
        lines.append(f"  {kind}: {fmt_money(st.get('mean'), cur)} per turn ({usage})")
    lines.extend(f"  not priced: {what}" for what in cost.get("unpriced") or [])
    lines.extend(f"  cost left empty: {what}" for what in cost.get("missing") or [])
    return lines


def quality_lines(quality: object) -> list[str]:
    """The summary's ``quality`` section (voicelat score: reply WER, DNSMOS); none without one."""
    if not isinstance(quality, Mapping):
        return []
    lines: list[str] = []
    w, m = quality.get("wer") or {}, quality.get("dnsmos") or {}
    if w.get("n"):
        took = quality.get("score_ms_per_turn")
        lines.append(
            f"reply WER: mean {w['mean']:.1%}, max {w['max']:.1%} over {w['n']} turns; "
            f"{quality.get('truncated', 0)} truncated ({quality.get('transcriber', '?')}"
            + (f"; {took:.0f} ms a turn to score)" if isinstance(took, int | float) else ")")
        )
    if m.get("n"):
        lines.append(
            f"DNSMOS (a model's opinion, not listeners'): OVRL {m['ovrl']:.2f}, "
            f"SIG {m['sig']:.2f}, BAK {m['bak']:.2f} over {m['n']} turns"
        )
    plc = quality.get("plcmos") or {}
    if plc.get("n"):
        lines.append(
            f"PLCMOS (packet-loss concealment, a model's opinion): mean {plc['mean']:.2f}, "
            f"min {plc['min']:.2f} over {plc['n']} turns"
        )
    skipped = quality.get("skipped") or {}
    lines.extend(f"  not scored: {n} turn(s): {why}" for why, n in skipped.items())
    return lines
