"""comparison.json typed (core/judge/comparison_doc.py): a document voicelat wrote reads back to the
same JSON, its typed fields are what the file says, and what is not a comparison is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bargein.test_bargein_compare import _doc
from voicelat.core.base.errors import VoicelatError
from voicelat.core.judge.comparison_doc import KIND, ComparisonDoc
from voicelat.files.comparison import read_comparison, write_comparison

SAVED = Path(__file__).resolve().parents[1] / "tui" / "data" / "compare" / "comparison.json"


@pytest.mark.parametrize("rank_by", ["p50", "barge_in_stop"])
def test_a_built_document_reads_back_to_the_same_json(rank_by: str) -> None:
    doc = _doc(rank_by)
    typed = ComparisonDoc.from_json(json.loads(json.dumps(doc)))
    assert typed.to_json() == doc
    assert typed.statistics.rank_by == rank_by and typed.calls is not None
    patient = typed.combination("patient")
    assert patient is not None and patient.barge_in is not None
    assert patient.barge_in.stop_p50_ns == 180_000_000


def test_an_older_document_reads_back_with_only_the_keys_written_since_added() -> None:
    data = json.loads(SAVED.read_text())  # written before trust and calibration reached it
    typed = ComparisonDoc.from_json(data)
    again = typed.to_json()
    assert again.pop("untrusted") == [] and "untrusted" not in data
    for old, new in zip(data["combinations"], again["combinations"], strict=True):
        for p, v in old["vs_best"].items():
            added = {
                k: new["vs_best"][p].pop(k)
                for k in ("resolvable", "instrument_ns", "resolvable_ns")
            }
            # Before calibration a significant gap was a resolvable one.
            assert added == {
                "resolvable": v["significant"],
                "instrument_ns": None,
                "resolvable_ns": None,
            }
    assert again == data
    best, second = typed.ranked[:2]
    assert best.rank == 1 and best.name == data["combinations"][0]["name"]
    assert best.e2e["p50"].ns == data["combinations"][0]["e2e"]["p50"]["ns"]
    assert second.vs_best["p50"].verdict == data["combinations"][1]["vs_best"]["p50"]["verdict"]


def test_keys_a_reader_does_not_know_travel_through(tmp_path: Path) -> None:
    data = _doc("p50")
    data["later_section"] = {"x": 1}
    data["combinations"][0]["later_field"] = [1, 2]
    write_comparison(tmp_path, ComparisonDoc.from_json(data))
    again = read_comparison(tmp_path)
    assert again.to_json() == data and again.extra == {"later_section": {"x": 1}}
    assert again.combinations[0].extra == {"later_field": [1, 2]}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"kind": "something-else"}, "is not a voicelat comparison"),
        ({"kind": KIND, "combinations": [{"rank": 1}]}, "is damaged"),
    ],
)
def test_what_is_not_a_comparison_is_one_line(
    tmp_path: Path, data: dict[str, object], message: str
) -> None:
    (tmp_path / "comparison.json").write_text(json.dumps(data))
    with pytest.raises(VoicelatError, match=message):
        read_comparison(tmp_path)
