"""plan_turns: warm-up first and marked, then fixtures interleaved A B C A B C, capped by turns."""

from __future__ import annotations

import pytest

from voicelat.core.base.plan import PlannedTurn, plan_turns


def test_interleaved_rounds_after_one_warmup() -> None:
    plan = plan_turns(["A", "B", "C"], repeat=2)
    assert [(p.fixture, p.warmup) for p in plan] == [
        ("A", True),
        ("A", False),
        ("B", False),
        ("C", False),
        ("A", False),
        ("B", False),
        ("C", False),
    ]
    assert [p.index for p in plan] == list(range(7))
    assert [p.repeat for p in plan if not p.warmup] == [0, 0, 0, 1, 1, 1]


def test_warmup_turns_come_first_cycle_fixtures_and_are_marked() -> None:
    plan = plan_turns(["A", "B"], repeat=1, warmup=3)
    assert plan[:3] == [
        PlannedTurn(0, "A", 0, True),
        PlannedTurn(1, "B", 0, True),
        PlannedTurn(2, "A", 0, True),
    ]
    assert [p.warmup for p in plan[3:]] == [False, False]
    assert [p.fixture for p in plan[3:]] == ["A", "B"]


def test_no_warmup() -> None:
    plan = plan_turns(["A", "B"], warmup=0)
    assert [(p.index, p.fixture, p.warmup) for p in plan] == [(0, "A", False), (1, "B", False)]


def test_turns_caps_measured_turns_and_cycles() -> None:
    plan = plan_turns(["A", "B", "C"], repeat=5, turns=4, warmup=1)
    measured = [p for p in plan if not p.warmup]
    assert len(measured) == 4
    assert [p.fixture for p in measured] == ["A", "B", "C", "A"]
    assert [p.repeat for p in measured] == [0, 0, 0, 1]
    assert len(plan) == 5
    short = plan_turns(["A", "B", "C"], turns=2, warmup=0)
    assert [p.fixture for p in short] == ["A", "B"]


def test_invalid_plans() -> None:
    with pytest.raises(ValueError, match="no fixtures"):
        plan_turns([])
    with pytest.raises(ValueError, match="repeat"):
        plan_turns(["A"], repeat=0)
    with pytest.raises(ValueError, match="warmup"):
        plan_turns(["A"], warmup=-1)
