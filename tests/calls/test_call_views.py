"""The call timeline as a terminal renderable (tui/calls.py) and the calls rebuilt from turns
(report/call_svg.py calls_from_turns), on literal turns."""

from __future__ import annotations

from rich.console import Console

from voicelat.core.base.turn import Turn
from voicelat.core.calls.call import CALL_CONNECTED, CALL_GREETING, CALL_ID, CALL_TURN
from voicelat.report.call_svg import call_lanes, calls_from_turns
from voicelat.tui.calls import call_timeline_text, calls_view

MS = 1_000_000


def _turns() -> list[Turn]:
    out = []
    for k, t0 in ((1, 2_000), (2, 6_000)):
        extra = {CALL_ID: "c1", CALL_TURN: k, CALL_CONNECTED: 0, "scenario": "s"}
        if k == 1:
            extra |= {CALL_GREETING: 500 * MS, "call_greeting_audio_ns": 1_000 * MS}
        out.append(
            Turn(
                index=k - 1, fixture="f", t0_ns=t0 * MS,
                milestones={"speech_start": 0, "speech_end": 1_000 * MS,
                            "output_first_audible": 2_000 * MS},
                segments={}, e2e_ns=1_000 * MS, figures={"reply_audio_ns": 1_000 * MS},
                extra=extra,
            )
        )  # fmt: skip
    return out


def test_calls_are_rebuilt_from_their_turns_with_the_greeting() -> None:
    (record,) = calls_from_turns(_turns())
    assert record.call_id == "c1" and record.turns_completed == 2
    assert record.greeting_ns == 500 * MS and record.greeting_first_audible_ns == 500 * MS
    lanes = call_lanes(record, _turns())
    assert [(s.turn, s.start_ns, s.end_ns) for s in lanes.agent] == [
        (0, 500 * MS, 1_500 * MS), (1, 4_000 * MS, 5_000 * MS), (2, 8_000 * MS, 9_000 * MS),
    ]  # fmt: skip
    assert [(w.start_ns, w.end_ns) for w in lanes.waits] == [
        (3_000 * MS, 4_000 * MS), (7_000 * MS, 8_000 * MS),
    ]  # fmt: skip


def test_the_terminal_timeline_draws_both_lanes_and_each_wait() -> None:
    (record,) = calls_from_turns(_turns())
    text = call_timeline_text(call_lanes(record, _turns()), width=8 + 90).plain
    caller, agent, waits = text.split("\n")
    assert caller.startswith("caller") and agent.startswith("agent")
    # 90 columns over 9 s: 10 per second. Caller speaks at 2-3 s and 6-7 s.
    assert caller[8 + 20 : 8 + 31].strip("█") == "" and caller[8 + 35] == " "
    assert agent[8 + 5] == "█" and agent[8 + 35] == "·"  # the greeting, then the first wait
    assert "1000" in waits
    console = Console(width=120, record=True)
    console.print(calls_view(_turns(), width=100))
    assert "c1 (s): 2/2 turns ok, greeting after 500 ms" in console.export_text()
    assert calls_view([t for t in _turns() if False]) is None


def test_the_terminal_timeline_says_the_words_turn_by_turn() -> None:
    """Under the lanes, each turn's words: the caller's line, the agent's reply where the turn
    has it (an agent's turn does not), its e2e; a long pair cut to the width, both kept."""
    from dataclasses import replace

    from voicelat.tui.calls import call_words_text

    long = "I would like to book a table for four people tomorrow evening at eight, please. " * 2
    first, second = _turns()
    turns = [
        replace(first, expected="Hi, a table for four, please.", reply="Sure. For when?"),
        replace(second, expected=long, reply="Booked: four, tomorrow at eight. Goodbye!"),
        replace(second, index=2, extra={**second.extra, CALL_TURN: 3}, expected="Thanks.",
                failed=True, e2e_ns=None, failure_reason="no reply"),
    ]  # fmt: skip
    lines = call_words_text("c1", list(reversed(turns)), width=80).plain.split("\n")
    assert lines[0] == "  1. “Hi, a table for four, please.” → “Sure. For when?”  1000 ms"
    assert lines[1].startswith("  2. “I would like to book") and lines[1].endswith("  1000 ms")
    assert "…” → “Booked: four" in lines[1] and len(lines[1]) == 80  # cut, both sides kept
    assert lines[2] == "  3. “Thanks.”  failed"  # no reply text: no arrow
    assert call_words_text("other", turns).plain == ""
    console = Console(width=120, record=True)
    console.print(calls_view(turns, width=100))
    shown = console.export_text()
    assert "“Hi, a table for four, please.” → “Sure. For when?”" in shown
    assert shown.index("caller") < shown.index("1. “Hi")  # the words under the lanes
