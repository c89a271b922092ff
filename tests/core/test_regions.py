"""Per-region percentiles (core/summaries/regions.py) on literal turns: the ``regions`` section
appears when turns come from several regions, with each region's own n, e2e P50/P90/P99 and
segment P50s; the streaming summary and the list summary give the same section; labels are
checked (core/base/region.py)."""

from __future__ import annotations

import pytest

from voicelat.core.base.region import MAX_REGION_LEN, NO_REGION, check_region
from voicelat.core.base.turn import Turn
from voicelat.core.summaries.regions import MAX_REGIONS, OTHER_REGIONS, regions_section
from voicelat.core.summaries.streaming_summary import SummaryAccumulator
from voicelat.core.summaries.summary import build_summary
from voicelat.report.text import region_lines, summary_table

MS = 1_000_000


def _turn(index: int, e2e_ms: int, region: str | None, *, failed: bool = False) -> Turn:
    # Segments that sum to e2e: stt a fifth, the rest LLM TTFT and TTS TTFB halves.
    stt, half = e2e_ms // 5, (e2e_ms - e2e_ms // 5) // 2
    segs = {"stt": stt * MS, "llm_ttft": half * MS, "tts_ttfb": (e2e_ms - stt - half) * MS}
    return Turn(
        index=index,
        fixture="fx",
        t0_ns=0,
        milestones={},
        segments={} if failed else segs,
        e2e_ns=None if failed else e2e_ms * MS,
        failed=failed,
        failure_stage="llm" if failed else None,
        failure_reason="boom" if failed else None,
        extra={} if region is None else {"region": region},
    )


def _two_regions() -> list[Turn]:
    # eu-west: 100..109 ms; us-east: 300..319 ms, one failed turn.
    eu = [_turn(i, 100 + i, "eu-west") for i in range(10)]
    us = [_turn(10 + i, 300 + i, "us-east") for i in range(20)]
    return eu + us + [_turn(30, 0, "us-east", failed=True)]


def _doc(turns: list[Turn]) -> dict:
    return build_summary(turns, run={}, pipeline={}, fixtures=[], stages={})


def test_each_region_has_its_own_n_percentiles_and_segment_p50s() -> None:
    section = regions_section(_two_regions())
    assert section is not None and list(section) == ["eu-west", "us-east"]
    eu, us = section["eu-west"], section["us-east"]
    assert (eu["turns"], eu["failed"], eu["e2e"]["n"]) == (10, 0, 10)
    assert (us["turns"], us["failed"], us["e2e"]["n"]) == (21, 1, 20)
    # Linear-interpolated percentiles of 100..109 and 300..319 ms (integer ns).
    assert eu["e2e"]["p50"] == 104_500_000 and eu["e2e"]["p90"] == 108_100_000
    assert eu["e2e"]["p99"] == 108_910_000
    assert us["e2e"]["p50"] == 309_500_000 and us["e2e"]["max"] == 319 * MS
    assert us["segments_p50_ns"]["stt"] == 61_500_000  # 300//5 .. 319//5 = 60..63
    assert set(eu["segments_p50_ns"]) == {"stt", "llm_ttft", "tts_ttfb"}
    # The run's own e2e mixes both: the per-region rows are the point.
    assert _doc(_two_regions())["e2e"]["p50"] == 304_500_000  # ranks 14, 15 of 30: us-east


def test_one_region_or_none_gives_no_section() -> None:
    one = [_turn(i, 100 + i, "eu-west") for i in range(5)]
    assert regions_section(one) is None
    assert regions_section([_turn(i, 100, None) for i in range(5)]) is None
    assert "regions" not in _doc(one)


def test_unlabelled_turns_beside_labelled_ones_count_under_none() -> None:
    turns = [_turn(0, 100, "eu-west"), _turn(1, 200, None), _turn(2, 220, None)]
    section = regions_section(turns)
    assert section is not None and list(section) == ["eu-west", NO_REGION]
    assert section[NO_REGION]["e2e"]["n"] == 2


def test_regions_past_the_cap_are_counted_together() -> None:
    turns = [_turn(i, 100, f"r{i:02d}") for i in range(MAX_REGIONS + 3)]
    section = regions_section(turns)
    assert section is not None and len(section) == MAX_REGIONS + 1
    assert section[OTHER_REGIONS]["turns"] == 3


def test_the_streaming_summary_gives_the_same_section_and_merges() -> None:
    turns = _two_regions()
    whole = _doc(turns)
    acc = SummaryAccumulator.of(turns)
    assert acc.finish(run={}, pipeline={}, fixtures=[], stages={})["regions"] == whole["regions"]
    # Two workers' (or nodes') accumulators merged: the same section.
    a, b = SummaryAccumulator.of(turns[:15]), SummaryAccumulator.of(turns[15:])
    a.merge(b)
    assert a.finish(run={}, pipeline={}, fixtures=[], stages={})["regions"] == whole["regions"]
    # Past the exact cap the per-region percentiles come from histograms (within 0.1 %).
    small = SummaryAccumulator.of(turns, exact_cap=4)
    got = small.finish(run={}, pipeline={}, fixtures=[], stages={})["regions"]["us-east"]["e2e"]
    assert got["p50"] == pytest.approx(309_500_000, rel=2e-3) and got["n"] == 20


def test_the_text_report_prints_one_row_per_region() -> None:
    doc = _doc(_two_regions())
    lines = region_lines(doc["regions"])
    assert lines[0].startswith("By region")
    assert lines[1].split() == ["region", "n", "failed", "P50", "ms", "P90", "ms", "P99", "ms",
                                "stt", "llm_ttft", "tts_ttfb"]  # fmt: skip
    assert lines[2].split()[:6] == ["eu-west", "10", "0", "104", "108", "109"]
    assert lines[3].split()[:4] == ["us-east", "20", "1", "310"]
    assert "By region" in summary_table(doc)
    assert region_lines(None) == [] and "By region" not in summary_table(_doc(_two_regions()[:3]))


def test_the_summary_schema_accepts_the_section() -> None:
    from voicelat.export.validate import schema_errors

    def errors(doc: dict) -> list[str]:  # a literal summary: only these sections are real
        found = schema_errors(doc, "summary.schema.json")
        return [e for e in found if e.startswith(("$.regions", "$.run"))]

    turns = [*_two_regions(), _turn(40, 500, None)]
    doc = _doc(turns) | {"run": {"tool": "voicelat", "region": "eu-west"}}
    assert NO_REGION in doc["regions"] and errors(doc) == []
    assert errors(doc | {"regions": {"eu-west": {"turns": -1}}}) != []
    assert errors(doc | {"regions": {"two words": doc["regions"]["eu-west"]}}) != []
    assert errors(doc | {"run": {"region": "two words"}}) != []


@pytest.mark.parametrize("label", ["eu-west", "us_east.1", "A", "x" * MAX_REGION_LEN])
def test_good_labels(label: str) -> None:
    assert check_region(label) == label


@pytest.mark.parametrize(
    ("label", "why"),
    [("", "empty"), ("eu west", "only letters"), ("x" * (MAX_REGION_LEN + 1), "longer"),
     ("eu/west", "only letters"), ("é", "only letters"), ("a\nb", "only letters")],
)  # fmt: skip
def test_bad_labels_say_why(label: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        check_region(label)
