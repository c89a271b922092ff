"""openai-realtime, checked with the official ``openai`` SDK: many turns on one session,
input transcription, text output, client items, cancellation with an injected stop latency,
a greeting, and the per-response ground truth (docs/EMULATORS.md, "Realtime sessions").

Every server event is validated against the SDK's strict pydantic union
(``RealtimeServerEvent``): an unknown type or a missing field fails the test.
"""

from __future__ import annotations

import base64
import itertools
import json
from typing import Any

from tests.helpers import ROOT
from voicelat.audio import frames, load_for_stage
from voicelat.core.measure.clock import now_ns
from voicelat.emulate import Emulators

FAST = {"response_created": 5, "first_audio": 20, "audio_chunk": 1}
REPLY = "Sure. It is sunny and mild today."


def _manifest_text(fixture_id: str) -> str:
    data = json.loads((ROOT / "fixtures" / "manifest.json").read_text())
    items = data["fixtures"] if isinstance(data, dict) else data
    return next(f["text"] for f in items if f["id"] == fixture_id)


def _client(em: Emulators) -> Any:
    from openai import AsyncOpenAI

    return AsyncOpenAI(api_key="sk-test", base_url=em.url("openai-realtime"), max_retries=0)


def _utterance(name: str, silence_ms: int = 800) -> list[str]:
    pcm = load_for_stage(ROOT / "fixtures" / f"{name}.wav", 24000)
    chunks = [*frames(pcm, 20), *([bytes(960)] * (silence_ms // 20))]
    return [base64.b64encode(c).decode() for c in chunks]


async def _until(conn: Any, kind: str, seen: list[tuple[Any, int]]) -> Any:
    """Read (strictly validated, stamped on arrival) until an event of ``kind``."""
    from openai.types.realtime import RealtimeServerEvent
    from pydantic import TypeAdapter

    adapter: TypeAdapter[Any] = TypeAdapter(RealtimeServerEvent)
    while True:
        raw = await conn.recv_bytes()
        event = adapter.validate_json(raw)
        seen.append((event, now_ns()))
        if event.type == kind:
            return event


def _session(detection: Any, **extra: Any) -> dict[str, Any]:
    return {
        "type": "realtime",
        "audio": {"input": {"turn_detection": detection, **extra.pop("audio_in", {})}},
        **extra,
    }


async def test_many_turns_on_one_session_each_answered_with_items_and_transcripts() -> None:
    profile = {"openai-realtime": {"latency": {**FAST, "transcription": 10}}}
    async with Emulators(["openai-realtime"], profile=profile) as em:
        async with _client(em).realtime.connect(model="gpt-realtime") as conn:
            seen: list[tuple[Any, int]] = []
            await _until(conn, "session.created", seen)
            transcription = {"transcription": {"model": "gpt-4o-transcribe"}}
            await conn.session.update(
                session=_session({"type": "server_vad"}, audio_in=transcription)
            )
            await _until(conn, "session.updated", seen)
            dones = []
            for name in ("weather_paris", "call_mom", "weather_paris"):
                for audio in _utterance(name):
                    await conn.input_audio_buffer.append(audio=audio)
                dones.append(await _until(conn, "response.done", seen))
            # The input transcription is asynchronous, as the real API's: the last one may
            # come before or after its response's response.done.
            done_kind = "conversation.item.input_audio_transcription.completed"
            if sum(e.type == done_kind for e, _ in seen) < 3:
                await _until(conn, done_kind, seen)
        session = em.truth.last("openai-realtime", "realtime")
        assert em.errors == []
    events = [e for e, _ in seen]
    assert [d.response.status for d in dones] == ["completed"] * 3
    assert len({d.response.id for d in dones}) == 3
    transcripts = [
        e.transcript
        for e in events
        if e.type == "conversation.item.input_audio_transcription.completed"
    ]
    paris, mom = _manifest_text("weather_paris"), _manifest_text("call_mom")
    assert transcripts[:2] == [paris, mom] and transcripts[2] == paris
    # The conversation grows: user, assistant, user, assistant... each chained to the last.
    added = [e for e in events if e.type == "conversation.item.added"]
    assert [e.item.role for e in added] == ["user", "assistant"] * 3
    for before, after in itertools.pairwise(added):
        assert after.previous_item_id == before.item.id
    starts = [e for e in events if e.type == "input_audio_buffer.speech_started"]
    commits = [e for e in events if e.type == "input_audio_buffer.committed"]
    assert (
        [s.item_id for s in starts]
        == [c.item_id for c in commits]
        == [a.item.id for a in added if a.item.role == "user"]
    )
    assert session.detail["items"] == 6
    # Per-response truth: each response's audio window, in order, one after the other.
    responses = [em.truth.response("openai-realtime", i) for i in range(3)]
    assert [r.trigger for r in responses] == ["vad"] * 3
    assert [r.id for r in responses] == [d.response.id for d in dones]
    audio_at = {
        d.response.id: [t for e, t in seen if getattr(e, "response_id", None) == d.response.id
                        and e.type == "response.output_audio.delta"]
        for d in dones
    }  # fmt: skip
    for i, r in enumerate(responses):
        assert r.status == "completed" and r.done_ns is not None
        assert r.first_audio_ns is not None and r.last_audio_ns is not None
        assert r.trigger_ns < r.first_audio_ns < r.last_audio_ns <= r.done_ns
        arrivals = audio_at[r.id]
        # The client's arrival stamps are never earlier than the truth (and not far behind:
        # at 1 ms a chunk the strict validation of each delta is the backlog).
        assert 0 <= arrivals[0] - r.first_audio_ns < 50_000_000
        assert 0 <= arrivals[-1] - r.last_audio_ns < 500_000_000
        assert r.audio_bytes > 24000
        if i:
            assert r.trigger_ns > responses[i - 1].done_ns  # type: ignore[operator]
    assert session.to_json()["responses"][1]["id"] == responses[1].id


async def test_text_output_and_a_client_text_item_are_honoured() -> None:
    async with Emulators(["openai-realtime"], profile={"openai-realtime": {"latency": FAST}}) as em:
        async with _client(em).realtime.connect(model="gpt-realtime") as conn:
            seen: list[tuple[Any, int]] = []
            await _until(conn, "session.created", seen)
            await conn.session.update(session=_session(None, output_modalities=["text"]))
            updated = await _until(conn, "session.updated", seen)
            assert updated.session.output_modalities == ["text"]
            await conn.conversation.item.create(
                item={
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "What is the weather?"}],
                }
            )
            added = await _until(conn, "conversation.item.added", seen)
            done = await _until(conn, "conversation.item.done", seen)
            await conn.response.create()
            finished = await _until(conn, "response.done", seen)
        assert em.errors == []
    assert added.item.id == done.item.id and added.item.role == "user"
    assert done.item.content[0].text == "What is the weather?"
    events = [e for e, _ in seen]
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == REPLY
    assert not any(e.type == "response.output_audio.delta" for e in events)
    assert finished.response.output_modalities == ["text"]
    assert finished.response.output[0].content[0].text == REPLY
    assert finished.response.output[0].content[0].type == "output_text"


async def _cancel_once(stop_ms: float) -> tuple[Any, Any, list[tuple[Any, int]], int]:
    latency = {**FAST, "audio_chunk": 20, "cancel_stop": stop_ms}
    async with Emulators(
        ["openai-realtime"], profile={"openai-realtime": {"latency": latency}}
    ) as em:
        async with _client(em).realtime.connect(model="gpt-realtime") as conn:
            seen: list[tuple[Any, int]] = []
            await _until(conn, "session.created", seen)
            for audio in _utterance("weather_paris", silence_ms=0):
                await conn.input_audio_buffer.append(audio=audio)
            await conn.session.update(session=_session(None))
            await _until(conn, "session.updated", seen)
            await conn.input_audio_buffer.commit()
            await conn.response.create()
            first = await _until(conn, "response.output_audio.delta", seen)
            t_cancel = now_ns()
            await conn.response.cancel()
            done = await _until(conn, "response.done", seen)
            # A truncate at what was played is acknowledged.
            await conn.conversation.item.truncate(
                item_id=first.item_id, content_index=0, audio_end_ms=40
            )
            await _until(conn, "conversation.item.truncated", seen)
        assert em.errors == []
        return done, em.truth.response("openai-realtime", 0), seen, t_cancel


async def test_response_cancel_stops_the_audio_at_once() -> None:
    done, truth, seen, t_cancel = await _cancel_once(0)
    assert done.response.status == "cancelled"
    assert done.response.status_details.reason == "client_cancelled"
    assert truth.status == "cancelled" and truth.reason == "client_cancelled"
    assert truth.cancel_ns is not None and truth.cancel_ns >= t_cancel
    # Nothing of the response's audio was written after the cancel was read.
    assert truth.last_audio_ns is not None and truth.last_audio_ns <= truth.cancel_ns
    kinds = [e.type for e, _ in seen]
    assert "response.output_audio.delta" not in kinds[kinds.index("response.done") :]


async def test_cancel_stop_injects_a_known_stop_latency() -> None:
    done, truth, seen, _ = await _cancel_once(60)
    assert done.response.status == "cancelled"
    stop = truth.stop_ms()
    # The last chunk goes at exactly cancel + 60 ms (plus the timer's lateness, ~1 ms when quiet).
    assert stop is not None and 60 <= stop < 70, stop
    assert truth.stop_after_ms == 60
    last = max(t for e, t in seen if e.type == "response.output_audio.delta")
    assert 0 <= last - truth.last_audio_ns < 20_000_000  # type: ignore[operator]
    assert done.response.status_details.reason == "client_cancelled"


async def test_barge_in_cancels_then_the_new_turn_is_answered() -> None:
    latency = {**FAST, "audio_chunk": 40}
    async with Emulators(
        ["openai-realtime"], profile={"openai-realtime": {"latency": latency}}
    ) as em:
        async with _client(em).realtime.connect(model="gpt-realtime") as conn:
            seen: list[tuple[Any, int]] = []
            for audio in _utterance("weather_paris", silence_ms=700):
                await conn.input_audio_buffer.append(audio=audio)
            await _until(conn, "response.output_audio.delta", seen)
            for audio in _utterance("call_mom", silence_ms=800):  # talk over the reply
                await conn.input_audio_buffer.append(audio=audio)
            first = await _until(conn, "response.done", seen)
            second = await _until(conn, "response.done", seen)
        assert em.errors == []
        cut, answered = (em.truth.response("openai-realtime", i) for i in (0, 1))
    assert first.response.status == "cancelled"
    assert first.response.status_details.reason == "turn_detected"
    assert second.response.status == "completed"
    assert cut.status == "cancelled" and cut.reason == "turn_detected"
    assert cut.last_audio_ns is not None and cut.cancel_ns is not None
    assert cut.last_audio_ns <= cut.cancel_ns  # no audio after the speech was heard
    started = [t for e, t in seen if e.type == "input_audio_buffer.speech_started"]
    assert started and started[-1] >= cut.cancel_ns
    assert answered.trigger == "vad" and answered.status == "completed"
    assert answered.first_audio_ns is not None and answered.first_audio_ns > cut.cancel_ns


async def test_a_greeting_is_spoken_first_without_user_audio() -> None:
    greeting = "Hello, this is the weather line."
    profile = {"openai-realtime": {"latency": FAST, "content": {"greeting": greeting}}}
    async with Emulators(["openai-realtime"], profile=profile) as em:
        async with _client(em).realtime.connect(model="gpt-realtime") as conn:
            seen: list[tuple[Any, int]] = []
            await _until(conn, "session.created", seen)
            await conn.session.update(session=_session({"type": "server_vad"}))
            done = await _until(conn, "response.done", seen)
        assert em.errors == []
        truth = em.truth.response("openai-realtime", 0)
    said = "".join(e.delta for e, _ in seen if e.type == "response.output_audio_transcript.delta")
    assert said == greeting and done.response.status == "completed"
    assert truth.trigger == "greeting" and truth.first_audio_ns is not None
    assert not any(e.type == "input_audio_buffer.speech_started" for e, _ in seen)
