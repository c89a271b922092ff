"""The pure call figures (core/calls/call.py) and the conversation prompt (core/calls/conversation.py),
on literal integers and strings."""

from __future__ import annotations

import random

from voicelat.core.base.turn import Turn
from voicelat.core.calls.call import (
    CALL_ID,
    CALL_TURN,
    CallRecord,
    SilenceOutcome,
    Step,
    calls_section,
    gap_ns,
    index_label,
)
from voicelat.core.calls.conversation import Conversation, Message, prompt_text

MS = 1_000_000


def _turn(index: int, call: str, k: int, e2e_ms: int | None, failed: bool = False) -> Turn:
    return Turn(
        index=index,
        fixture=f"f{k}",
        t0_ns=0,
        milestones={},
        segments={},
        e2e_ns=None if e2e_ms is None else e2e_ms * MS,
        failed=failed,
        extra={CALL_ID: call, CALL_TURN: k},
    )


def _call(call_id: str, greeting_ms: int | None, expected: bool = True, **kw: object) -> CallRecord:
    return CallRecord(
        call_id=call_id,
        scenario="s",
        connected_ns=1_000 * MS,
        ended_ns=9_000 * MS,
        turns_planned=3,
        turns_completed=3,
        greeting_ns=None if greeting_ms is None else greeting_ms * MS,
        greeting_expected=expected,
        **kw,  # type: ignore[arg-type]
    )


def test_calls_section_gives_e2e_by_index_with_n_and_turn_one_apart() -> None:
    turns = [
        _turn(0, "a", 1, 900), _turn(1, "a", 2, 500), _turn(2, "a", 3, 520),
        _turn(3, "b", 1, 1100), _turn(4, "b", 2, 700), _turn(5, "b", 3, None, failed=True),
    ]  # fmt: skip
    section = calls_section([_call("a", 800), _call("b", None)], turns)
    by_index = section["e2e_by_index"]
    assert list(by_index) == ["1", "2", "3"]
    assert by_index["1"]["n"] == 2 and by_index["1"]["p50"] == 1000 * MS
    assert by_index["2"]["p50"] == 600 * MS
    assert by_index["3"]["n"] == 1  # the failed turn has no e2e: not in its index's row
    assert section["e2e_first_turn"]["p50"] == 1000 * MS
    assert section["e2e_later_turns"]["n"] == 3
    assert section["greeting"] == section["greeting"] | {"expected": 2, "missing": 1, "n": 1}
    assert section["greeting"]["p50"] == 800 * MS
    assert section["completed"] == 1  # the call whose expected greeting never came is not
    assert section["duration"]["p50"] == 8000 * MS


def test_a_turn_outside_any_call_is_not_counted() -> None:
    lone = Turn(index=0, fixture="x", t0_ns=0, milestones={}, segments={}, e2e_ns=5 * MS)
    assert calls_section([], [lone])["e2e_by_index"] == {}


def test_late_indexes_share_one_row() -> None:
    assert [index_label(i) for i in (1, 9, 10, 42)] == ["1", "9", "10+", "10+"]


def test_the_gap_is_seeded_and_never_negative() -> None:
    step = Step("say", fixture="x", gap_ms=100, spread_ms=100)
    a = [gap_ns(step, random.Random(5)) for _ in range(3)]
    rng1, rng2 = random.Random(5), random.Random(5)
    assert [gap_ns(step, rng1) for _ in range(20)] == [gap_ns(step, rng2) for _ in range(20)]
    assert all(0 <= g <= 200 * MS for g in a)
    assert gap_ns(Step("say", fixture="x", gap_ms=250), random.Random(1)) == 250 * MS


def test_a_call_record_round_trips_through_its_json_line() -> None:
    rec = _call(
        "a", 812, dead_air_max_ns=1234 * MS, silences=(SilenceOutcome(3000, 2500 * MS),),
        failed_step="s.toml: step 3", failure_reason="timed out", turn_indexes=(4, 5, 6),
    )  # fmt: skip
    back = CallRecord.from_json(rec.to_json())
    assert back == rec
    assert back.duration_ns == 8000 * MS and not back.greeting_missing


def test_a_conversation_grows_turn_by_turn_and_prints_as_the_new_words() -> None:
    conv = Conversation((), "").then("Hello, how can I help?")
    turn1 = conv.with_text("Book a table for four.")
    assert str(turn1) == "Book a table for four."
    assert turn1.messages() == [
        {"role": "assistant", "content": "Hello, how can I help?"},
        {"role": "user", "content": "Book a table for four."},
    ]
    turn2 = turn1.then("For when?").with_text("Make it five.")
    assert [m.role for m in turn2.history] == ["assistant", "user", "assistant"]
    assert turn2.history[1] == Message("user", "Book a table for four.")


def test_a_completions_prompt_puts_the_history_before_the_users_line() -> None:
    template = "A friendly assistant.\nUser: {text}\nAssistant:"
    conv = Conversation((Message("user", "hi"), Message("assistant", "hello")), "book it")
    assert prompt_text(template, conv) == (
        "A friendly assistant.\nUser: hi\nAssistant: hello\nUser: book it\nAssistant:"
    )
    assert prompt_text(template, "plain") == "A friendly assistant.\nUser: plain\nAssistant:"
    assert prompt_text("{history}U: {text}", conv) == "User: hi\nAssistant: hello\nU: book it"


def test_budgets_hold_the_greeting_and_the_later_turns_of_calls() -> None:
    from voicelat.core.judge.budget import evaluate_budget, parse_budget
    from voicelat.core.summaries.run_summary import CallsSummary, DistSummary, RunSummary

    budget = parse_budget(
        {"min_turns": 1, "greeting": {"p90_ms": 500}, "e2e_later_turns": {"p50_ms": 900}}
    )
    calls = CallsSummary(
        n=2,
        greeting=DistSummary(n=2, p50=400 * MS, p90=650 * MS),
        e2e_later_turns=DistSummary(n=4, p50=800 * MS, p90=990 * MS),
    )
    summary = RunSummary(calls=calls)
    summary = RunSummary.from_json(summary.to_json() | {"counts": {"turns": 6, "headline": 6}})
    checks = {c.name: c for c in evaluate_budget(budget, summary)}
    assert not checks["greeting P90"].passed and checks["greeting P90"].measured == 650
    assert checks["e2e_later_turns P50"].passed
    # A run of single turns has no greeting: the limit cannot pass on nothing.
    lone = evaluate_budget(budget, RunSummary.from_json({"counts": {"turns": 3, "headline": 3}}))
    assert not {c.name: c for c in lone}["greeting P90"].passed
