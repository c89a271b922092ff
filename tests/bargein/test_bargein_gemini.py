"""Barge-in on Gemini Live with automatic activity detection (the emulator on loopback, one
session per call): the overlays go on the call's open line while the reply plays; the
server's own VAD hears them on the input stream. An "mm-hmm" shorter than the session's
``prefixPaddingMs`` is never committed as speech, so the model talks on; the interruption is,
so the server sends ``serverContent.interrupted`` (the detection: Gemini has no client
cancel, so cancel folds into drain), keeps streaming the injected ``cancel_stop`` = X ms,
then ``turnComplete``. The measured provider drain is X against the emulator's write stamps."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.bargein.bargein_helpers import MS, run_call, scenario
from voicelat.core.calls.call import INTERRUPTING
from voicelat.emulate import Emulators
from voicelat.files.pipeline import load_pipeline
from voicelat.files.results import read_calls
from voicelat.files.scenario import load_scenario

# Real-time end to end (~20 s): the e2e set .ci/run runs (pyproject's markers).
pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
STOP_MS = 150
#: Committed speech: "mm-hmm" has 600 ms of loud 20 ms frames, the interruption 2280.
PREFIX_MS = 700
#: 76 characters at 40 ms: a 3 s reply, long enough to cut into and quick to play out.
REPLY = "The forecast for today is mostly sunny with a light breeze from the west, ok."
STEPS = (
    '[[step]]\nsay = "short_01_weather"\n'
    '[[step]]\nbackchannel = "bc_mmhmm"\nafter_ms = 400\n'
    '[[step]]\nsay = "short_02_tomorrow"\ngap_ms = 300\n'
    '[[step]]\ninterrupt = "int_01_wait"\nafter_ms = 500\n'
    '[[step]]\nsay = "short_03_thanks"\ngap_ms = 300\n'
)


async def test_gemini_live_talks_through_a_backchannel_and_stops_for_an_interruption(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    loaded = load_scenario(scenario(tmp_path, "gl", STEPS))
    name = "gemini-live"
    content = {"reply": REPLY, "ms_per_char": 40.0}
    # Parts paced in real time (40 ms of audio each 40 ms): audio is left to drop at the cut.
    latency = {"cancel_stop": STOP_MS, "audio_chunk": 40}
    profile = {name: {"content": content, "latency": latency}}
    async with Emulators([name], profile=profile, seed=1, thread=True) as em:
        base = load_pipeline(ROOT / "pipelines" / "emulated-gemini-live-auto.toml")
        s2s = dict(base.s2s or {}) | {
            "base_url": f"ws://127.0.0.1:{em.servers[name].port}",
            "vad": {"silenceDurationMs": 500, "prefixPaddingMs": PREFIX_MS},
        }
        outcome = await run_call(replace(base, s2s=s2s), loaded, tmp_path / "run")
        sessions = [s for s in em.truth.select(name) if s.responses]
    turns = sorted(outcome.turns, key=lambda t: t.index)
    assert len(turns) == 4 and all(t.ok for t in turns), [t.failure_reason for t in turns]
    assert turns[2].extra.get(INTERRUPTING) is True
    (record,) = read_calls(tmp_path / "run")
    bc, ov = record.overlays
    # The backchannel was played into the first reply and never committed: no false barge-in.
    assert bc.kind == "backchannel" and bc.onset_ns is not None and not bc.reply_ended_before
    assert bc.false_barge_in is False and bc.detected_ns is None
    # One session, four responses: the second one (the reply the interruption cut) cancelled
    # by the server's VAD, the others completed; none answered the "mm-hmm".
    (session,) = sessions
    assert [r.status for r in session.responses] == [
        "completed", "cancelled", "completed", "completed"
    ]  # fmt: skip
    cut = session.responses[1]
    assert cut.reason == "interrupted" and cut.stop_after_ms == STOP_MS
    assert cut.cancel_ns is not None and cut.last_audio_ns is not None
    assert ov.kind == "interrupt" and ov.stopped and ov.stop_ns is not None
    assert sum(ov.segments.values()) == ov.stop_ns
    assert ov.cancel_ns is None and "cancel" not in ov.segments  # no client cancel on Gemini
    # The detection is `interrupted` as it arrived: after the emulator wrote it, and the
    # server committed the speech PREFIX_MS of loud frames (and their gaps) after the onset.
    assert ov.detected_ns is not None and ov.onset_ns is not None
    assert 0 <= ov.detected_ns - cut.cancel_ns < 3 * MS
    assert PREFIX_MS * MS <= ov.detected_ns - ov.onset_ns <= (PREFIX_MS + 600) * MS
    # The provider's drain against the injected truth: X ± 2 ms (the emulator puts its last
    # part exactly X after the decision), and against its own write stamps.
    assert ov.provider_drain_ns is not None
    assert abs(ov.provider_drain_ns - STOP_MS * MS) <= 2 * MS, ov.provider_drain_ns
    assert abs(ov.provider_drain_ns - (cut.last_audio_ns - cut.cancel_ns)) <= 2 * MS
    # voicelat flushed its playback at `interrupted`: the ear was quiet within a frame.
    assert ov.last_audible_ns is not None and ov.last_audible_ns - ov.detected_ns <= 21 * MS
    # The interrupting turn was heard on from where the line left it.
    cut_turn = turns[2]
    assert cut_turn.t0_ns + cut_turn.milestones["speech_start"] == ov.onset_ns
    assert cut_turn.e2e_ns is not None and cut_turn.e2e_ns > 0
