"""SummaryAccumulator: the same summary as build_summary, mergeable, bounded past its cap."""

from __future__ import annotations

import itertools
import math
import random
from typing import Any

import pytest

from voicelat.core.base.contract import SEGMENTS
from voicelat.core.base.stats import percentile
from voicelat.core.base.turn import SpanRecord, Turn
from voicelat.core.summaries.diagnostics import MachineSample, ProcessSample
from voicelat.core.summaries.sketch import LogHistogram, ValueStream
from voicelat.core.summaries.streaming_summary import SummaryAccumulator
from voicelat.core.summaries.summary import build_summary

MS = 1_000_000
CONFIG: dict[str, Any] = {
    "run": {"id": "r"},
    "pipeline": {"name": "p"},
    "fixtures": [{"id": "f0"}],
    "stages": {"llm": "openai"},
    "budget": {"ok": True},
}


def _turn(index: int, rng: random.Random, **kw: Any) -> Turn:
    segments = {s: rng.randint(0, 300 * MS) + rng.randint(0, 999) for s in SEGMENTS}
    t0 = index * 10**10
    base: dict[str, Any] = {
        "index": index,
        "fixture": f"f{index % 3}",
        "t0_ns": t0,
        "milestones": {"llm_first_delta": 50 * MS + rng.randint(0, 9 * MS), "speech_end": 0},
        "segments": segments,
        "e2e_ns": sum(segments.values()),
        "figures": {
            "llm_ttft_ns": rng.randint(10, 90) * MS,
            "tts_rtf": rng.random() / 3,
            "llm_tokens_per_s": 40 + rng.random() * 30,
            "llm_tokens": None,
            "pacer_lag_max_ns": rng.choice([1 * MS, 2 * MS, 12 * MS]),
            "schedule_lag_ns": rng.randint(-2 * MS, 600 * MS),
            "llm_chunk_gap_p50_ns": rng.randint(10, 20) * MS,
            "llm_chunk_gap_max_ns": rng.choice([30 * MS, 400 * MS]),
        },
        "spans": (
            SpanRecord("llm", "connect", 0, rng.randint(1, 5) * MS),
            SpanRecord("llm", "response_headers", 0, 10 * MS),
            SpanRecord("tts", "response_headers", 0, rng.randint(1, 5) * MS),
        ),
    }
    base.update(kw)
    return Turn(**base)


def _run(n: int, seed: int = 0) -> list[Turn]:
    """Warm-up, cold, failed (several reasons), flagged, interrupted and headline turns."""
    rng = random.Random(seed)
    turns = [_turn(0, rng, warmup=True, cold=True, cold_stages=("llm",))]
    turns.append(_turn(1, rng, cold=True, cold_stages=("tts",), e2e_ns=99_000 * MS))
    for i, reason in ((2, "HTTP 500"), (3, "HTTP 500"), (4, "timed out")):
        turns.append(
            _turn(i, rng, failed=True, failure_stage="llm", failure_reason=reason, e2e_ns=None)
        )
    turns.append(_turn(5, rng, flags=("interrupted",)))
    turns += [_turn(6 + i, rng, flags=("clamped:stt",) if i % 7 == 0 else ()) for i in range(n)]
    rng.shuffle(turns)
    return turns


def _machine() -> list[MachineSample]:
    """Two seconds of steal: the turns that ran in them (#1 at 10 s, #3 at 30 s) are distrusted."""
    out = []
    for k in range(40):
        steal = 50 if k in (10, 30) else 0
        procs = (ProcessSample("voicelat", 5 * 10**8, 10**6),)
        out.append(MachineSample(k * 10**9, (k + 1) * 10**9, 2, 500, 200, steal, 0, 0, procs))
    return out


def _lags(n: int) -> list[int]:
    rng = random.Random(n)
    return [rng.randint(0, 8 * MS) for _ in range(n)]


def _built(turns: list[Turn], lags: list[int], machine: list[MachineSample]) -> dict[str, Any]:
    return build_summary(turns, loop_lag_ns=lags, machine=machine, **CONFIG)


def _streamed(acc: SummaryAccumulator, machine: list[MachineSample]) -> dict[str, Any]:
    return acc.finish(machine=machine, **CONFIG)


@pytest.mark.parametrize("n", [0, 1, 3, 10, 57, 400])
def test_the_streamed_summary_is_build_summary_s(n: int) -> None:
    turns, lags, machine = _run(n, seed=n), _lags(n * 3), _machine()
    acc = SummaryAccumulator.of(turns)
    acc.add_loop_lag(lags)
    streamed = _streamed(acc, machine)
    assert streamed == _built(turns, lags, machine)
    assert streamed["quantiles"] == {"mode": "exact"}
    if n >= 57:  # the data really exercise every section
        reasons = {r["code"] for r in streamed["trust"]["reasons"]}
        assert {"pacer_lag", "schedule_lag", "server_starved", "machine_turns"} <= reasons
        assert streamed["counts"]["failed"] == 3 and streamed["counts"]["interrupted"] == 1
        assert streamed["waterfall"]["p90"]["band_n"] == round(n / 10)


def test_no_turns_at_all_is_build_summary_s_too() -> None:
    assert _streamed(SummaryAccumulator(), []) == _built([], [], [])


@pytest.mark.parametrize("split", [0, 1, 150, 299])
def test_merged_shards_summarize_as_their_turns_in_order(split: int) -> None:
    turns, lags = _run(300, seed=4), _lags(500)
    a, b = SummaryAccumulator.of(turns[:split]), SummaryAccumulator.of(turns[split:])
    a.add_loop_lag(lags[:200])
    b.add_loop_lag(lags[200:])
    a.merge(b)
    assert _streamed(a, _machine()) == _built(turns, lags, _machine())


def test_merging_histogram_shards_equals_accumulating_them() -> None:
    turns = _run(3000, seed=5)
    whole = SummaryAccumulator.of(turns, exact_cap=256)
    a = SummaryAccumulator.of(turns[:1000], exact_cap=256)
    b = SummaryAccumulator.of(turns[1000:2000], exact_cap=256)
    c = SummaryAccumulator.of(turns[2000:], exact_cap=256)
    b.merge(c)
    a.merge(b)
    merged, direct = _streamed(a, []), _streamed(whole, [])
    assert merged["quantiles"]["mode"] == "histogram"
    for key in ("counts", "failures", "trust", "waterfall", "e2e", "segments", "figures"):
        assert _close(merged[key], direct[key]), key


def _close(x: Any, y: Any) -> bool:
    """Equal, floats and big integers to 1e-9 relative (sums in another order)."""
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_close(x[k], y[k]) for k in x)
    if isinstance(x, list) and isinstance(y, list):
        return len(x) == len(y) and all(_close(a, b) for a, b in zip(x, y, strict=True))
    if isinstance(x, int | float) and isinstance(y, int | float) and not isinstance(x, bool):
        return abs(x - y) <= max(1e-9 * max(abs(x), abs(y)), 1)
    return bool(x == y)


def test_past_the_cap_quantiles_are_within_the_stated_relative_error() -> None:
    rng = random.Random(7)
    # A long-tailed latency: log-normal around 800 ms, in integer ns.
    values = [int(rng.lognormvariate(20.5, 0.4)) for _ in range(50_000)]
    stream = ValueStream(cap=1000, alpha=0.001)
    for v in values:
        stream.add(v)
    assert not stream.exact
    for p in (1, 10, 50, 90, 99, 99.9):
        exact = percentile([float(v) for v in values], p)
        assert abs(stream.quantile(p) - exact) <= 0.001 * exact * (1 + 1e-9), p
    d = stream.distribution()
    assert (d.n, d.min, d.max) == (len(values), min(values), max(values))
    assert d.mean == pytest.approx(sum(values) / len(values), rel=1e-12)


def test_the_histogram_keeps_negatives_and_zeros_apart() -> None:
    hist = LogHistogram(0.01)
    for v in (-5.0, 0.0, 0.0, 3.0):
        hist.add(v)
    values = [hist.value_of(k) for k, c in hist.buckets() for _ in range(c)]
    assert values[0] == pytest.approx(-5.0, rel=0.01)
    assert values[1:3] == [0.0, 0.0]
    assert values[3] == pytest.approx(3.0, rel=0.01)


def test_a_histogram_waterfall_band_still_sums_to_its_mean_and_is_near_the_exact_one() -> None:
    turns = _run(5000, seed=9)
    streamed = _streamed(SummaryAccumulator.of(turns, exact_cap=500), [])
    exact = _built(turns, [], [])
    for p in ("p50", "p90", "p99"):
        band, ref = streamed["waterfall"][p], exact["waterfall"][p]
        assert sum(band["segments_ns"].values()) == band["mean_e2e_ns"]
        assert band["band_n"] == ref["band_n"] and band["n"] == ref["n"]
        # Within the buckets' width (0.1 %) of the exact band and percentile.
        assert abs(band["mean_e2e_ns"] - ref["mean_e2e_ns"]) <= 0.002 * ref["mean_e2e_ns"]
        assert abs(band["e2e_percentile_ns"] - ref["e2e_percentile_ns"]) <= (
            0.001 * ref["e2e_percentile_ns"] + 1
        )
        assert 0 < len(band["turns"]) <= 32
    q = streamed["quantiles"]
    assert q["mode"] == "histogram" and q["relative_error"] == 0.001
    assert "waterfall" in q["approximate"] and "e2e" in q["approximate"]


@pytest.mark.e2e
def test_memory_stays_bounded_past_the_cap() -> None:
    """10^5 synthetic turns: past the cap a stream holds histogram buckets, as many as the
    values' range needs (log(max/min) / log(gamma)), not one per value: what it holds grows
    ever more slowly as the tails fill in. (The trust check's windows, 3 integers a turn, are
    the one thing that grows with the turns.)"""
    rng = random.Random(11)
    acc = SummaryAccumulator(exact_cap=2048)
    held = []
    for i in range(100_000):
        acc.add(_turn(i, rng))
        if i % 20_000 == 19_999:
            held.append(acc.retained())
    streams = acc._all_streams().values()
    values = 100_000 * sum(1 for s in streams if s.n == 100_000)  # what exact streams would hold
    assert held[-1] < values / 20, held
    growth = [b - a for a, b in itertools.pairwise(held)]
    assert growth == sorted(growth, reverse=True) and growth[-1] < 0.01 * values / 5, held
    gamma = 1.001 / 0.999
    for s in (s for s in streams if s.n):  # within the buckets its range can have
        d = s.distribution()
        assert d.min is not None and d.max is not None
        top = max(abs(d.min), abs(d.max), 2.0)  # values >= 1 (ns) or ratios >= 1e-9
        assert s.buckets <= 2 * math.log(top / 1e-9) / math.log(gamma) + 3
    assert len(acc.trust.windows) == 3 * 100_000


def test_failure_reasons_are_bounded() -> None:
    rng = random.Random(3)
    acc = SummaryAccumulator()
    for i in range(400):
        acc.add(_turn(i, rng, failed=True, failure_stage="tts", failure_reason=f"id {i}"))
    assert len(acc.failures) == 257
    assert acc.failures["tts: (other reasons)"] == 400 - 256
