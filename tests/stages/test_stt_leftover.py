"""A provider cut-off must not end the next turn: Deepgram and AssemblyAI against their
emulators, two turns on one socket, played as ``[endpointing] mode = "provider"`` plays them.

Turn 1 is ``hesitate_flight``: the provider ends it inside its 1829-2528 ms pause, and the
end-of-turn arrives (``stt_final`` after the decision) once the user speaks on, so the socket
got speech the provider heard after its decision: a new, open utterance. Turn 2 is
``control_weather`` (speech 400-1880 ms). Before the fix the second turn "ended" 0.3-0.5 s
into its audio on turn 1's leftover (bench/provider_eot.py: 8 of 66 turns). Now the stage
flushes the leftover when turn 1's audio ends (Deepgram ``Finalize``, AssemblyAI
``ForceEndpoint``), drops the answer between the turns, and turn 2 ends on the emulator's
end-of-turn for its own speech, with its own transcript.

The audio is paced at 2x real time with ``stt_final`` = 300 ms: the provider's decision then
arrives 600 ms of audio later, well after the user spoke on (at 1x and 120 ms the same
happens only for some pauses: the bench's fixtures).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.helpers import ROOT
from tests.stages.ws_helpers import KEY, KEY_ENV
from voicelat.audio import PCM, frames, load_for_stage
from voicelat.core.base.errors import ConfigError
from voicelat.core.measure.clock import now_ns
from voicelat.core.measure.events import Done, EndOfTurn, Final, StageEvent
from voicelat.emulate import Emulators
from voicelat.stages.assemblyai import AssemblyAISTT
from voicelat.stages.deepgram import DeepgramSTT

MS = 1_000_000
SPEED = 2.0  # audio time per wall time
PAUSE = (1829, 2528)  # hesitate_flight's annotated pause, ms of its audio
SPEECH_END_2 = 1880  # control_weather's annotated speech end
PROFILE = {"latency": {"stt_partial": 60, "stt_final": 300}}


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


def _pcm(name: str) -> PCM:
    return load_for_stage(ROOT / "fixtures" / "pauses" / f"{name}.wav", 16000)


async def _emulators(name: str) -> Emulators:
    """``name``'s emulator on a free port of 19360-19379 (this project's test range)."""
    for port in range(19360, 19380):
        em = Emulators([name], profile={name: PROFILE}, seed=1, port=port)
        try:
            await em.__aenter__()
        except ConfigError:
            continue
        return em
    raise RuntimeError("no free port in 19360-19379")


async def _provider_turn(stt: Any, pcm: PCM) -> tuple[int, list[StageEvent]]:
    """One turn as engine/turn.py plays it in provider mode: 20 ms frames at ``SPEED`` x real
    time into ``transcribe``; on the first EndOfTurn the frame after it still goes out, then
    the audio ends. Returns the turn's t0 (its first frame) and its events."""
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()
    eot = asyncio.Event()

    async def audio() -> AsyncIterator[bytes]:
        while (frame := await queue.get()) is not None:
            yield frame

    async def play() -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        for k, frame in enumerate(frames(pcm, 20)):
            queue.put_nowait(frame)
            if eot.is_set():
                break
            await asyncio.sleep(max(0.0, start + (k + 1) * 0.02 / SPEED - loop.time()))
        queue.put_nowait(None)

    await stt.prepare()  # as the engine does, before the turn's first sample
    t0 = now_ns()
    player = asyncio.create_task(play())
    events: list[StageEvent] = []
    async with asyncio.timeout(10):
        async for event in stt.transcribe(audio()):
            events.append(event)
            eot.set() if isinstance(event, EndOfTurn) else None
    await player
    return t0, events


def _audio_ms(t_ns: int, t0: int) -> float:
    """A stamp as ms of the turn's audio."""
    return (t_ns - t0) / MS * SPEED


async def _two_turns(name: str, stt_class: type[Any], **options: Any) -> tuple[Any, ...]:
    em = await _emulators(name)
    try:
        ws = em.root(name).replace("http://", "ws://")
        async with stt_class({"base_url": ws, "api_key_env": KEY_ENV, **options}) as stt:
            first = await _provider_turn(stt, _pcm("hesitate_flight"))
            second = await _provider_turn(stt, _pcm("control_weather"))
        (ex,) = em.truth.select(name, "listen" if name == "deepgram" else "v3_ws")
        assert em.errors == []
    finally:
        await em.__aexit__(None, None, None)
    return first, second, ex


def _check_turns(first: tuple[int, list[StageEvent]], second: tuple[int, list[StageEvent]],
                 eot_written: list[int]) -> tuple[int, int]:  # fmt: skip
    """Turn 1 cut in the pause, turn 2 ended on its own speech; returns both EOT stamps."""
    (t1, ev1), (t2, ev2) = first, second
    eot1 = next(e for e in ev1 if isinstance(e, EndOfTurn))
    eot2 = next(e for e in ev2 if isinstance(e, EndOfTurn))
    # Turn 1: the provider's cut-off is its endpoint; it arrived after the user spoke on.
    assert PAUSE[1] < _audio_ms(eot1.t_ns, t1) < PAUSE[1] + 600, _audio_ms(eot1.t_ns, t1)
    assert isinstance(ev1[-1], Done) and ev1[-1].t_ns - eot1.t_ns < 100 * MS
    # Its transcript is what the provider had final at its cut-off (that one message): not
    # the leftover's words, which the flush brought after it.
    (final1,) = [e for e in ev1 if isinstance(e, Final)]
    assert final1.t_ns == eot1.t_ns and final1.text
    # Turn 2: its own end-of-turn, after its speech end, as the emulator wrote it (the
    # stale one came 300-490 ms into the audio, before the speech even started at 400 ms).
    assert _audio_ms(eot2.t_ns, t2) > SPEECH_END_2, _audio_ms(eot2.t_ns, t2)
    truth = [t for t in eot_written if t > t2]
    assert truth and 0 <= eot2.t_ns - truth[0] < 5 * MS, (eot2.t_ns, truth)
    # Its transcript is that one message's: no leftover words before it.
    (final2,) = [e for e in ev2 if isinstance(e, Final)]
    assert final2.t_ns == eot2.t_ns and final2.text
    assert isinstance(ev2[-1], Done)
    return eot1.t_ns, eot2.t_ns


async def test_deepgram_cut_off_leftover_is_flushed_and_the_next_turn_ends_on_its_own() -> None:
    first, second, ex = await _two_turns("deepgram", DeepgramSTT, endpointing=300)
    eot1, _ = _check_turns(first, second, ex.all("end_of_turn_written"))
    # The fix at work: a Finalize after turn 1, answered with the leftover's words, before
    # turn 2 began; turn 1 did not wait for it.
    (finalize,) = [t for t in ex.all("finalize_received") if t < second[0]]
    assert finalize > eot1
    assert any(finalize < t < second[0] for t in ex.all("final_written"))
    assert first[1][-1].t_ns < finalize + 300 * MS


async def test_assemblyai_cut_off_leftover_is_ended_and_the_next_turn_ends_on_its_own() -> None:
    first, second, ex = await _two_turns("assemblyai", AssemblyAISTT, min_turn_silence=400)
    eot1, _ = _check_turns(first, second, ex.all("end_of_turn_written"))
    (force,) = [t for t in ex.all("force_endpoint_received") if t < second[0]]
    assert force > eot1
    # The leftover's turn, ended by that ForceEndpoint, was answered (and dropped) before
    # turn 2 began.
    assert any(force < t < second[0] for t in ex.all("end_of_turn_written"))
    assert first[1][-1].t_ns < force + 300 * MS
