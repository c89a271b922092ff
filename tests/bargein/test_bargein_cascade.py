"""Barge-in on voicelat's own cascade (the OpenAI emulator's STT, LLM and TTS on loopback,
real fixture audio): an interruption stops the reply at the ear with a waterfall that sums,
and the interrupting utterance is the next turn; the ``[turn_taking]`` policy decides whether
an "mm-hmm" stops it (a false barge-in) or not."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.bargein.bargein_helpers import (
    BACKCHANNEL_STEPS,
    INTERRUPT_STEPS,
    LONG_REPLY,
    MS,
    scenario,
)
from tests.calls.calls_helpers import openai_profile
from tests.helpers import emulated_openai_pipeline
from voicelat.core.base.plan import PlannedTurn
from voicelat.core.calls.call import INTERRUPTED, INTERRUPTING
from voicelat.emulate import Emulators
from voicelat.engine.call import plan_calls
from voicelat.engine.runner import Runner
from voicelat.files.pipeline import TurnTaking
from voicelat.files.results import read_calls
from voicelat.files.scenario import load_scenario

PROFILE = openai_profile(LONG_REPLY, 30.0)


async def _run(tmp_path: Path, steps: str, taking: TurnTaking) -> tuple[list, list]:  # type: ignore[type-arg]
    loaded = load_scenario(scenario(tmp_path, "bi", steps))
    calls = plan_calls([loaded.scenario])
    plan = [PlannedTurn(i, f, 0, False) for i, f in enumerate(loaded.scenario.fixture_ids())]
    async with Emulators(["openai"], profile=PROFILE, seed=1, thread=True) as em:
        pipeline = replace(emulated_openai_pipeline(em), turn_taking=taking)
        runner = Runner(pipeline, list(loaded.fixtures.values()), tmp_path / "run", calls=calls)
        outcome = await runner.run(plan)
    return sorted(outcome.turns, key=lambda t: t.index), read_calls(tmp_path / "run")


async def test_an_interruption_stops_the_cascade_with_a_waterfall_that_sums(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    turns, calls = await _run(tmp_path, INTERRUPT_STEPS, TurnTaking(min_speech_ms=300))
    assert len(turns) == 3 and all(t.ok for t in turns), [t.failure_reason for t in turns]
    first, cut, last = turns
    assert first.extra.get(INTERRUPTED) is True and "barge_in:stopped" in first.flags
    assert cut.extra.get(INTERRUPTING) is True and cut.e2e_ns is not None
    (ov,) = calls[0].overlays
    assert ov.kind == "interrupt" and ov.stopped and not ov.never_stopped
    assert ov.onset_ns is not None and ov.stop_ns is not None
    # The interrupting turn's t0 is the overlay's first sample: its onset is its speech start.
    assert cut.t0_ns + cut.milestones["speech_start"] == ov.onset_ns
    # Detection is the policy's minimum speech (15 loud 20 ms frames, the first holding the
    # onset) after the onset.
    seg = ov.segments
    assert sum(seg.values()) == ov.stop_ns
    assert 280 * MS <= seg["detection"] <= 380 * MS, seg
    # voicelat cancels and flushes at once: the ear goes quiet within one frame of the cancel.
    assert ov.last_audible_ns is not None and ov.cancel_ns is not None
    assert ov.last_audible_ns - ov.cancel_ns <= 21 * MS
    # The reply was cut: its audible audio ends long before its 3.6 s of speech.
    reply_start = first.t0_ns + first.milestones["output_first_audible"]
    assert ov.last_audible_ns - reply_start < 2_000 * MS
    assert last.ok and calls[0].turns_completed == 3


# The same two policies are compared in CI by tests/bargein/test_bargein_compare_e2e.py.
@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.parametrize(("min_speech_ms", "false_barge_in"), [(200, True), (900, False)])
async def test_the_turn_taking_policy_decides_whether_mm_hmm_stops_the_reply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, min_speech_ms: int, false_barge_in: bool
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    taking = TurnTaking(min_speech_ms=min_speech_ms)
    turns, calls = await _run(tmp_path, BACKCHANNEL_STEPS, taking)
    assert len(turns) == 2 and all(t.ok for t in turns), [t.failure_reason for t in turns]
    (ov,) = calls[0].overlays
    assert ov.kind == "backchannel" and ov.measured
    assert ov.false_barge_in is false_barge_in
    assert ov.stopped is false_barge_in
    if not false_barge_in:
        # It talked on: the backchannel overlapped its speech for the whole "mm-hmm".
        assert ov.talk_over_ns is not None and ov.talk_over_ns >= 500 * MS
        assert (ov.pause_ns or 0) < ov.pause_threshold_ns
