"""build_summary: counts and headline hygiene; waterfall bands that sum to their mean e2e."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from voicelat.core.base.contract import SEGMENTS
from voicelat.core.base.stats import percentile
from voicelat.core.base.turn import SpanRecord, Turn
from voicelat.core.summaries.run_summary import SCHEMA_VERSION
from voicelat.core.summaries.summary import build_summary, counts, headline_turns, waterfall

MS = 1_000_000


def turn(index: int, rng: random.Random, **kw: Any) -> Turn:
    segments = {s: rng.randint(0, 300 * MS) + rng.randint(0, 999) for s in SEGMENTS}
    base: dict[str, Any] = {
        "index": index,
        "fixture": f"f{index % 3}",
        "t0_ns": index * 10**10,
        "milestones": {},
        "segments": segments,
        "e2e_ns": sum(segments.values()),
        "figures": {"llm_ttft_ns": rng.randint(10, 90) * MS, "tts_rtf": 0.25, "llm_tokens": None},
        "spans": (SpanRecord("llm", "connect", 0, rng.randint(1, 5) * MS),),
    }
    base.update(kw)
    return Turn(**base)


def run_of(n_headline: int, seed: int = 0) -> list[Turn]:
    rng = random.Random(seed)
    turns = [turn(0, rng, warmup=True, cold=True, cold_stages=("llm",))]
    turns.append(turn(1, rng, cold=True, cold_stages=("tts",), e2e_ns=99_000 * MS))
    turns.append(
        turn(
            2,
            rng,
            failed=True,
            failure_stage="llm",
            failure_reason="HTTP 500",
            e2e_ns=None,
            segments={},
        )
    )
    turns.append(
        turn(
            3,
            rng,
            failed=True,
            failure_stage="llm",
            failure_reason="HTTP 500",
            e2e_ns=None,
            segments={},
        )
    )
    turns.append(
        turn(4, rng, failed=True, failure_stage="turn", failure_reason="timed out", e2e_ns=1)
    )
    turns += [turn(5 + i, rng, flags=("clamped:stt",) if i == 0 else ()) for i in range(n_headline)]
    return turns


def summary_of(turns: list[Turn]) -> dict[str, Any]:
    return build_summary(
        turns,
        run={"id": "r"},
        pipeline={"name": "p"},
        fixtures=[{"id": "f0"}],
        stages={"llm": "openai"},
        loop_lag_ns=[1000, 3000],
        budget={"ok": True},
    )


def test_headline_excludes_warmup_cold_and_failed() -> None:
    turns = run_of(20)
    head = headline_turns(turns)
    assert [t.index for t in head] == list(range(5, 25))
    assert counts(turns) == {
        "turns": 25,
        "headline": 20,
        "warmup": 1,
        "cold": 1,  # the warm-up turn is cold too, but it is counted as warm-up
        "failed": 3,
        "flagged": 1,
    }


def test_build_summary_counts_and_distributions() -> None:
    turns = run_of(20)
    s = summary_of(turns)
    head = headline_turns(turns)
    assert s["schema_version"] == SCHEMA_VERSION
    assert s["counts"]["headline"] == 20
    e2e = s["e2e"]
    assert e2e["n"] == 20
    # the 99 s cold turn and the failed turns never reach the headline
    assert e2e["max"] == max(t.e2e_ns for t in head if t.e2e_ns)
    assert e2e["p90"] == round(percentile([t.e2e_ns for t in head if t.e2e_ns], 90))
    assert s["segments"]["stt"]["n"] == 20
    figures = s["figures"]
    assert figures["llm_ttft_ns"]["n"] == 20
    assert "llm_tokens" not in figures
    assert s["spans"]["llm"]["connect"]["n"] == 20
    assert s["failures"] == [
        {"reason": "llm: HTTP 500", "count": 2},
        {"reason": "turn: timed out", "count": 1},
    ]
    assert s["loop_lag"]["p50"] == 2000
    assert s["budget"] == {"ok": True}
    json.dumps(s)  # serializable as it is


@pytest.mark.parametrize("n", [1, 7, 20, 53])
def test_waterfall_bands_sum_to_their_mean_e2e(n: int) -> None:
    head = headline_turns(run_of(n, seed=n))
    bands = waterfall(head)
    assert set(bands) == {50, 90, 99}
    for band in bands.values():
        assert sum(band.segments.values()) == pytest.approx(band.mean_e2e, rel=1e-12)
        assert band.n == n
        assert set(band.indexes) <= {t.index for t in head}


@pytest.mark.parametrize("n", [1, 7, 20, 53])
def test_summary_waterfall_segments_sum_exactly_to_mean_e2e(n: int) -> None:
    s = summary_of(run_of(n, seed=n))
    wf = s["waterfall"]
    assert set(wf) == {"p50", "p90", "p99"}
    for band in wf.values():
        assert sum(band["segments_ns"].values()) == band["mean_e2e_ns"]  # integers: exact
        assert list(band["segments_ns"]) == list(SEGMENTS)
        assert band["band_n"] == max(1, round(n / 10)) == len(band["turns"])


def test_waterfall_p50_on_a_known_sample() -> None:
    rng = random.Random(1)
    # e2e 100..1000 ms in 10 turns, each one segment: p50 rank 4.5, band of one turn
    turns = [
        turn(i, rng, segments={"stt": (i + 1) * 100 * MS}, e2e_ns=(i + 1) * 100 * MS)
        for i in range(10)
    ]
    s = summary_of(turns)
    p50 = s["waterfall"]["p50"]
    assert p50["e2e_percentile_ns"] == 550 * MS
    assert p50["band_n"] == 1
    assert p50["turns"] in ([4], [5])
    assert p50["segments_ns"]["stt"] == p50["mean_e2e_ns"]
    assert p50["segments_ns"]["llm_ttft"] == 0


def test_summary_of_no_turns() -> None:
    s = summary_of([])
    assert s["counts"]["turns"] == 0
    assert s["e2e"]["n"] == 0
    assert s["waterfall"] == {}


def test_ratio_figures_are_not_rounded_to_integers() -> None:
    rng = random.Random(2)
    turns = [
        turn(
            i, rng, figures={"tts_rtf": 0.2 + i / 100, "llm_tokens_per_s": 61.75, "llm_ttft_ns": 5}
        )
        for i in range(5)
    ]
    figures = summary_of(turns)["figures"]
    assert figures["tts_rtf"]["p50"] == pytest.approx(0.22)
    assert figures["tts_rtf"]["min"] == pytest.approx(0.2)
    assert figures["llm_tokens_per_s"]["mean"] == pytest.approx(61.75)
    assert figures["llm_ttft_ns"]["p50"] == 5 and isinstance(figures["llm_ttft_ns"]["p50"], int)
