"""The one ms formatter and the one rounding-to-total."""

from __future__ import annotations

from voicelat.core.base.display import fmt_ms, round_to_total

MS = 1_000_000


def test_fmt_ms_variants() -> None:
    assert fmt_ms(1_066_527_372) == "1067"
    assert fmt_ms(None) == "-"
    assert fmt_ms("x", missing="–") == "–"
    assert fmt_ms(True) == "-"
    assert fmt_ms(12 * MS, width=6) == "    12"
    assert fmt_ms(None, width=6) == "     -"
    assert fmt_ms(5 * MS, unit=" ms") == "5 ms"
    assert fmt_ms(1_550_000, decimals=1, unit=" ms") == "1.6 ms"
    assert fmt_ms(-3 * MS, sign=True, unit=" ms") == "-3 ms"
    assert fmt_ms(3 * MS, sign=True) == "+3"
    assert fmt_ms(560_000, fine_below_ms=10) == "0.6"
    assert fmt_ms(-9_960_000, fine_below_ms=10) == "-10.0"
    assert fmt_ms(10 * MS, fine_below_ms=10) == "10"
    assert fmt_ms(900 * MS + 400_000, decimals=2) == "900.40"


def test_round_to_total_keeps_the_sum() -> None:
    assert round_to_total({"a": 0.5, "b": 0.5}, 1) in ({"a": 1, "b": 0}, {"a": 0, "b": 1})
    assert round_to_total({"a": 1.4, "b": 2.6}, 4) == {"a": 1, "b": 3}
    assert round_to_total({}, 0) == {}
    # Values that do not sum to the total still get it: the correction goes round again.
    assert sum(round_to_total({"a": 1.0, "b": 1.0}, 5).values()) == 5


def test_round_to_total_closes_a_gap_of_a_billion_units_at_once() -> None:
    # e2e with segments that do not add up to it (a hand-edited turns.jsonl): the correction
    # used to go round one unit at a time, a billion times for one second in ns.
    out = round_to_total({"a": 0.0, "b": 0.0, "c": 0.0}, 1_000_000_001)
    assert sum(out.values()) == 1_000_000_001
    assert sorted(out.values()) == [333_333_333, 333_333_334, 333_333_334]
    assert sum(round_to_total({"a": 5.0, "b": 5.0}, -7).values()) == -7
