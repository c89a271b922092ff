"""The provider's own clock: what a provider says it spent, and the rest of a stage's time.

Pure parsers of the timings providers send, and the split of a measured span into the
provider-reported part and everything else (network, queueing, client). A stage hands the
response headers or the message it received to these parsers and reports a
:class:`~voicelat.core.measure.events.ProviderTiming` event; the recorder turns a stage's events
into one :class:`ProviderSplit` per turn (:func:`stage_split`) and the figures
``<stage>_provider_ns``, ``<stage>_overhead_ns`` and ``<stage>_provider_span_ns``
(:func:`split_figures`). docs/PROVIDER-CLOCK.md says which span each source is held against.

* HTTP ``Server-Timing`` (W3C): ``name;dur=12.3;desc="..."`` entries, comma-separated.
* ``openai-processing-ms``: the OpenAI API's (and compatible servers') processing time, in ms.
* llama.cpp's ``timings`` block (final chunk of ``/completion`` and ``/v1/chat/completions``):
  ``prompt_ms`` + ``predicted_ms``.
* Cartesia's ``step_time`` (ms of server-side processing per audio chunk; the first chunk's).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from voicelat.core.measure.events import ProviderTiming, RequestSent, StageEvent, TextSent

NS_PER_MS = 1_000_000
#: How far a provider's figure may exceed the measured span before the turn is flagged: the
#: headers carry whole milliseconds (OpenAI's ``openai-processing-ms`` is an integer).
TOLERANCE_NS = NS_PER_MS
#: The figures of a split, after ``<stage>_``: reported, the rest, the measured span (ns).
PROVIDER_KEYS: tuple[str, ...] = ("provider_ns", "overhead_ns", "provider_span_ns")


def parse_server_timing(value: str) -> dict[str, float]:
    """``Server-Timing`` -> {metric: dur ms}; entries without a valid ``dur`` are skipped."""
    out: dict[str, float] = {}
    for entry in _split_outside_quotes(value, ","):
        name, *params = (p.strip() for p in _split_outside_quotes(entry, ";"))
        if not name:
            continue
        for param in params:
            key, _, raw = param.partition("=")
            if key.strip().lower() != "dur":
                continue
            try:
                dur = float(raw.strip().strip('"'))
            except ValueError:
                break
            if math.isfinite(dur) and dur >= 0:
                out[name] = out.get(name, 0.0) + dur
            break
    return out


def _split_outside_quotes(text: str, sep: str) -> list[str]:
    # desc="a, b; c" may hold the separators: split only outside double quotes.
    parts: list[str] = []
    cur: list[str] = []
    quoted = False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        if ch == sep and not quoted:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def parse_processing_ms(value: str | None) -> float | None:
    """``openai-processing-ms`` -> ms, None when absent or not a non-negative number."""
    if value is None:
        return None
    try:
        ms = float(value.strip())
    except ValueError:
        return None
    return ms if math.isfinite(ms) and ms >= 0 else None


def llama_timings_ms(timings: Mapping[str, object] | None) -> float | None:
    """llama.cpp ``timings`` -> ms it spent (prompt + generation), None without them."""
    if not timings:
        return None
    total = 0.0
    seen = False
    for key in ("prompt_ms", "predicted_ms"):
        v = timings.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0:
            total += float(v)
            seen = True
    return total if seen else None


def provider_ms_from_headers(headers: Mapping[str, str]) -> tuple[float, str] | None:
    """(ms, source) from response headers: ``openai-processing-ms``, else ``Server-Timing``.

    From ``Server-Timing`` a ``total`` metric wins; otherwise the metrics are summed (servers
    that send several list consecutive phases). Header names are matched case-insensitively.
    """
    lower = {k.lower(): v for k, v in headers.items()}
    ms = parse_processing_ms(lower.get("openai-processing-ms"))
    if ms is not None:
        return ms, "openai-processing-ms"
    raw = lower.get("server-timing")
    if raw:
        metrics = parse_server_timing(raw)
        if "total" in metrics:
            return metrics["total"], "server-timing:total"
        if metrics:
            return sum(metrics.values()), "server-timing:" + "+".join(metrics)
    return None


@dataclass(frozen=True, slots=True)
class ProviderSplit:
    """A measured span split into what the provider reported and the rest (ns)."""

    stage: str
    source: str  # which field the provider's figure came from
    measured_ns: int
    provider_ns: int

    @property
    def rest_ns(self) -> int:
        """Network, queueing and client time: measured minus reported (negative: see flag)."""
        return self.measured_ns - self.provider_ns

    @property
    def inconsistent(self) -> bool:
        """The provider reports more than was measured end to end: its clock or its field
        covers something else (e.g. a time measured from before the request reached us)."""
        return self.provider_ns > self.measured_ns


def split(stage: str, source: str, measured_ns: int, provider_ms: float) -> ProviderSplit:
    """Split ``measured_ns`` by a provider figure in ms (rounded to whole ns)."""
    return ProviderSplit(stage, source, measured_ns, round(provider_ms * NS_PER_MS))


def stage_split(stage: str, events: Sequence[StageEvent]) -> ProviderSplit | None:
    """The provider's report for one stage of a turn against the span it covers.

    A stage may report several: one per HTTP request (a TTS stage sends one per text piece)
    and several per request (the ``openai-processing-ms`` header at the response headers and
    llama.cpp's ``timings`` at the end). The turn keeps the first request's (the one on the
    critical path) widest report, the one that explains the most of the measured time.
    A report without its own start counts from the stage's first request.
    """
    request = next((e.t_ns for e in events if isinstance(e, RequestSent | TextSent)), None)
    found: list[tuple[int, ProviderTiming]] = []
    for e in events:
        if isinstance(e, ProviderTiming):
            start = e.start_ns if e.start_ns is not None else request
            if start is not None and e.t_ns >= start:
                found.append((start, e))
    if not found:
        return None
    first = min(start for start, _ in found)
    start, best = max(((s, e) for s, e in found if s == first), key=lambda p: p[1].t_ns)
    return split(stage, best.source, best.t_ns - start, best.provider_ms)


def split_figures(s: ProviderSplit) -> dict[str, int]:
    """The per-turn figures of a split (ns): what the provider reported, the rest, the span."""
    values = (s.provider_ns, s.rest_ns, s.measured_ns)
    return {f"{s.stage}_{k}": v for k, v in zip(PROVIDER_KEYS, values, strict=True)}


def over_measured(s: ProviderSplit) -> bool:
    """The provider reports more than the span it is compared with, beyond header rounding."""
    return s.provider_ns - s.measured_ns > TOLERANCE_NS
