"""Goodput and Pareto fronts on literal turns, and the comparison's section drawing them."""

from __future__ import annotations

from typing import Any

from voicelat.core.base.turn import Turn
from voicelat.core.judge.goodput import GoodputRule, goodput, pareto_front
from voicelat.report.comparison import comparison_markdown, comparison_text
from voicelat.report.fronts import front_points, front_svg, scores_rows

MS = 1_000_000


def _turn(i: int, e2e_ms: int | None, **kw: Any) -> Turn:
    return Turn(
        index=i,
        fixture="f",
        t0_ns=0,
        milestones={},
        segments={},
        e2e_ns=None if e2e_ms is None else e2e_ms * MS,
        **kw,
    )


def test_goodput_needs_every_applied_criterion_and_says_why_not() -> None:
    turns = [
        _turn(0, 700),  # good
        _turn(1, 900),  # slow
        _turn(2, 600),  # unintelligible
        _turn(3, 650),  # over cost
        _turn(4, 640),  # never scored: not counted as good
        _turn(5, None, failed=True),
        _turn(6, 500, warmup=True),  # not measured
    ]
    rule = GoodputRule.from_budget({"e2e": {"p50_ms": 500, "p90_ms": 800}, "cost_per_turn": 0.01})
    assert rule.e2e_limit_ns == 800 * MS and rule.max_cost == 0.01
    wer = {0: 0.0, 1: 0.0, 2: 0.5, 3: 0.1}
    cost = {0: 0.005, 1: 0.005, 2: 0.005, 3: 0.02, 4: 0.005}
    g = goodput(turns, rule, wer, cost)
    assert (g.good, g.turns) == (1, 6) and g.share == 1 / 6
    assert g.not_good == {
        "slow": 1,
        "unintelligible": 1,
        "over cost": 1,
        "unscored": 1,
        "failed": 1,
    }
    assert g.criteria == ("e2e <= 800 ms", "reply WER <= 20%", "cost <= 0.01")


def test_a_criterion_without_figures_is_not_applied_and_not_claimed() -> None:
    turns = [_turn(0, 700), _turn(1, 900)]
    g = goodput(turns, GoodputRule.from_budget({"e2e": {"p90_ms": 800}}), {}, {})
    assert g.criteria == ("e2e <= 800 ms",) and g.share == 0.5


def test_pareto_front_keeps_what_nothing_beats_on_both_axes() -> None:
    points = {"a": (500.0, 0.02), "b": (700.0, 0.01), "c": (800.0, 0.03), "d": (500.0, 0.03)}
    assert pareto_front(points) == ["a", "b"]
    assert pareto_front({"x": (1.0, 1.0)}) == ["x"]


DOC = {
    "name": "t",
    "combinations": [
        {
            "name": "fast-dear",
            "status": "ok",
            "rank": 1,
            "n": 5,
            "e2e": {"p50": {"ns": 500 * MS}},
            "scores": {
                "goodput": {"share": 0.8, "criteria": ["e2e <= 800 ms"]},
                "cost": {"currency": "USD", "per_turn": 0.02, "per_minute": 0.1},
                "quality": {"wer": 0.05, "truncated": 0, "dnsmos_ovrl": 3.3},
            },
        },
        {
            "name": "slow-cheap",
            "status": "ok",
            "rank": 2,
            "n": 5,
            "e2e": {"p50": {"ns": 700 * MS}},
            "scores": {
                "goodput": {"share": 0.4, "criteria": ["e2e <= 800 ms"]},
                "cost": {"currency": "USD", "per_turn": 0.01, "per_minute": 0.05},
                "quality": {"wer": 0.2, "truncated": 2, "dnsmos_ovrl": 3.0},
            },
        },
        {
            "name": "slow-dear",
            "status": "ok",
            "rank": 3,
            "n": 5,
            "e2e": {"p50": {"ns": 800 * MS}},
            "scores": {"cost": {"currency": "USD", "per_turn": 0.03, "per_minute": 0.2}},
        },
    ],
}


def test_the_comparison_shows_goodput_cost_and_the_fronts() -> None:
    rows = scores_rows(DOC)
    assert rows[1][:6] == ["fast-dear", "80% (e2e <= 800 ms)", "500", "0.02 USD", "0.1 USD", "5.0%"]
    assert rows[2][6:] == ["2", "3.00"] and rows[3][5:] == ["-", "-", "-"]
    points = front_points(DOC, "cost")
    assert points == {
        "fast-dear": (500.0, 0.02),
        "slow-cheap": (700.0, 0.01),
        "slow-dear": (800.0, 0.03),
    }
    svg = front_svg(points, y_label="cost per turn", title="Latency x cost")
    assert svg.count('data-front="true"') == 2 and 'data-name="slow-dear" data-front="false"' in svg
    assert svg.count("<polyline") == 1
    assert front_points(DOC, "mos") == {"fast-dear": (500.0, 5 - 3.3), "slow-cheap": (700.0, 2.0)}
    text = comparison_text(DOC)
    assert "Price, quality and goodput" in text and "80% (e2e <= 800 ms)" in text
    assert "## Price, quality and goodput" in comparison_markdown(DOC)


def test_a_plcmos_column_only_when_a_combination_was_scored_with_it() -> None:
    assert "PLCMOS" not in scores_rows(DOC)[0]
    lossy = {
        "combinations": [
            {**DOC["combinations"][0], "scores": {"quality": {"wer": 0.1, "plcmos": 2.71}}},
            DOC["combinations"][2],
        ]
    }
    rows = scores_rows(lossy)
    assert rows[0][-1] == "PLCMOS" and rows[1][-1] == "2.71" and rows[2][-1] == "-"


def test_the_comparison_page_draws_the_fronts() -> None:
    from voicelat.report.comparison_html import comparison_html

    page = comparison_html(DOC)
    assert "<h2>Price, quality and goodput</h2>" in page
    assert page.count('class="front"') == 3  # cost, WER, DNSMOS


def test_an_unscored_comparison_has_no_such_section() -> None:
    doc = {"name": "t", "combinations": [{"name": "a", "status": "ok", "n": 1}]}
    assert "Price, quality" not in comparison_text(doc)


def test_what_a_cost_leaves_out_is_said_under_the_table() -> None:
    combo = {
        "name": "local",
        "status": "ok",
        "rank": 1,
        "n": 4,
        "e2e": {"p50": {"ns": 900 * MS}},
        "scores": {
            "cost": {
                "currency": "USD",
                "per_turn": 0.0,
                "per_minute": 0.0,
                "unpriced": ["llm (openai)"],
                "missing": [],
            }
        },
    }
    doc = {"name": "x", "combinations": [combo]}
    note = "local: cost leaves out, not priced: llm (openai)"
    assert note in comparison_text(doc).splitlines()
    md = comparison_markdown(doc).splitlines()
    assert f"- {note}" in md and md[md.index(f"- {note}") - 1] == ""
    from voicelat.report.comparison_html import comparison_html

    assert f"<p><small>{note}</small></p>" in comparison_html(doc)
