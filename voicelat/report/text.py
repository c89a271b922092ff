"""Plain-text renderings for the terminal and CI logs (pure functions of turns and summaries)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from voicelat.core.contract import SEGMENTS
from voicelat.core.turn import Turn


def _ms(ns: float | int | None, width: int = 6) -> str:
    return f"{'-':>{width}}" if ns is None else f"{ns / 1e6:>{width}.0f}"


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
    big = f"  largest {largest[0]} {largest[1] / 1e6:.0f} ms" if largest else ""
    return f"{head} e2e {_ms(turn.e2e_ns, 5)} ms{big}{tag}"


def summary_table(summary: Mapping[str, Any], run_dir: str | None = None) -> str:
    """The segment table at P50 and P90, the P50/P90 waterfall bands, counts and where results are."""
    c = summary.get("counts", {})
    e2e = summary.get("e2e", {})
    segs = summary.get("segments", {})
    n = e2e.get("n", 0)
    lines = []
    lines.append(f"Per-segment percentiles (each column on its own: percentiles do not add), n={n}")
    lines.append(f"  {'segment':<16}{'P50 ms':>8}{'P90 ms':>8}{'P99 ms':>8}{'max ms':>8}")
    for s in SEGMENTS:
        d = segs.get(s, {})
        lines.append(
            f"  {s:<16}{_ms(d.get('p50'), 8)}{_ms(d.get('p90'), 8)}{_ms(d.get('p99'), 8)}{_ms(d.get('max'), 8)}"
        )
    lines.append(
        f"  {'e2e':<16}{_ms(e2e.get('p50'), 8)}{_ms(e2e.get('p90'), 8)}{_ms(e2e.get('p99'), 8)}{_ms(e2e.get('max'), 8)}"
    )
    wf = summary.get("waterfall", {})
    for key in ("p50", "p90"):
        band = wf.get(key)
        if not band:
            continue
        parts = " + ".join(f"{s} {band['segments_ns'].get(s, 0) / 1e6:.0f}" for s in SEGMENTS)
        lines.append(
            f"Waterfall at {key.upper()} (mean of {band['band_n']} turn(s) around it, sums to "
            f"{band['mean_e2e_ns'] / 1e6:.0f} ms; exact {key.upper()} e2e {band['e2e_percentile_ns'] / 1e6:.0f} ms):"
        )
        lines.append(f"  {parts}")
    e2e_ep = None
    if e2e.get("p50") is not None and segs.get("endpointing", {}).get("p50") is not None:
        wf50 = wf.get("p50")
        if wf50:
            e2e_ep = wf50["mean_e2e_ns"] - wf50["segments_ns"].get("endpointing", 0)
    lines.append(
        f"e2e P50 {_ms(e2e.get('p50'), 0)} ms  P90 {_ms(e2e.get('p90'), 0)} ms  (n={n} warm turns)"
        + (f"; from the endpoint (P50 band): {e2e_ep / 1e6:.0f} ms" if e2e_ep is not None else "")
    )
    lines.append(
        f"turns: {c.get('turns', 0)} run, {c.get('headline', 0)} in the headline, "
        f"{c.get('warmup', 0)} warm-up and {c.get('cold', 0)} cold excluded, {c.get('failed', 0)} failed"
        + (f", {c['interrupted']} interrupted (barge-in)" if c.get("interrupted") else "")
    )
    for f in summary.get("failures", [])[:5]:
        lines.append(f"  failed x{f['count']}: {f['reason']}")
    lag = summary.get("loop_lag", {})
    if lag.get("n"):
        lines.append(
            f"event-loop lag P50 {_ms(lag.get('p50'), 0)} ms, max {_ms(lag.get('max'), 0)} ms (n={lag['n']})"
        )
    lines.extend(_load_lines(summary))
    status = summary.get("run", {}).get("status")
    if status and status != "complete":
        lines.append(f"run status: {status}")
    if run_dir:
        lines.append(f"results: {run_dir}")
    return "\n".join(lines)


def _load_lines(summary: Mapping[str, Any]) -> list[str]:
    """How the load was offered, e2e from the intended start, and whether to trust the run."""
    lines: list[str] = []
    load = summary.get("run", {}).get("load") or {}
    if load.get("mode") == "open":
        seed = "" if load.get("arrival") == "constant" else f", seed {load.get('seed')}"
        lines.append(
            f"load: open loop, {load.get('arrival')} arrivals at {load.get('rate_per_s'):g} "
            f"turns/s{seed}; {load.get('sessions_opened', '?')} session(s) opened"
        )
    elif load.get("concurrency", 1) > 1:
        lines.append(f"load: closed loop, {load['concurrency']} sessions back to back")
    intended = summary.get("e2e_from_intended", {})
    lag = summary.get("schedule_lag", {})
    if (
        intended.get("n")
        and lag.get("n")
        and (load.get("mode") == "open" or lag.get("max", 0) > 1_000_000)
    ):
        lines.append(
            f"e2e from the intended start (+ schedule lag, coordinated omission) "
            f"P50 {_ms(intended.get('p50'), 0)} ms  P90 {_ms(intended.get('p90'), 0)} ms  "
            f"P99 {_ms(intended.get('p99'), 0)} ms; schedule lag P50 {_ms(lag.get('p50'), 0)} ms, "
            f"P99 {_ms(lag.get('p99'), 0)} ms, max {_ms(lag.get('max'), 0)} ms"
        )
    trust = summary.get("trust")
    if trust is not None:
        if trust.get("trustworthy", True):
            lines.append("trust: ok (event-loop lag, pacer lag and transport checks passed)")
        else:
            lines.append("TRUST: these figures may not be reliable:")
            lines.extend(f"  - {r.get('message')}" for r in trust.get("reasons", []))
    return lines
