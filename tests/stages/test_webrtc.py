"""webrtc against a REAL Pipecat bot behind SmallWebRTC on loopback (tests/agents/pipecat_transport_agent.py:
FastAPI ``POST /api/offer`` -> ``SmallWebRTCRequestHandler`` -> a pipeline per call with
``SmallWebRTCTransport``, Silero VAD and a canned 30 ms-silence + 400 ms-tone reply), turns played
through the runner; the reply is Opus-encoded by the bot and decoded by aiortc here.

Bounds: the bot's VAD waits 300 ms, then answers; Opus, aiortc's 4-packet jitter buffer and the
bot's 10 ms output track add ~100-250 ms over the websocket transport, so the first decoded
sound comes 300-1200 ms after the fixture's speech end here. The error paths: a bot that is
down, one that refuses the offer, one that never answers (slow).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tests.stages.agent_helpers import MS, ROOT, pipecat_agent, run_agent_turns
from voicelat.core.base.errors import StageError
from voicelat.core.base.turn import Turn
from voicelat.files.pipeline import load_pipeline
from voicelat.stages.webrtc import WebRTC, _line_track_class

PORT = 9261


def _run(tmp_path: Path, port: int = PORT, turns: int = 2, **options: object) -> list[Turn]:
    url = f"http://127.0.0.1:{port}/api/offer"
    table = {"stage": "webrtc", "url": url, "reply_idle_ms": 300, "timeout_s": 5.0}
    return run_agent_turns(tmp_path, WebRTC, {**table, **options}, turns=turns)


@pytest.mark.e2e
def test_real_turns_through_smallwebrtc(tmp_path: Path) -> None:
    with pipecat_agent("webrtc", PORT) as agent:
        turns = _run(tmp_path)
        resampled = _run(tmp_path / "24k", output_rate=24000, turns=1)
    assert len(turns) == 2
    for turn in [*turns, *resampled]:
        assert turn.ok, turn.failure_reason
        assert turn.extra["kind"] == "agent" and "untraced" in turn.flags
        seg = turn.segments
        assert sum(seg.values()) == turn.e2e_ns and all(v >= 0 for v in seg.values())
        assert 300 * MS <= seg["agent_response"] <= 1200 * MS, seg
        # The reply's first decoded frame holds the tone's start (the line's silence before it
        # never starts a reply): its leading silence is under one 20 ms frame.
        assert seg["leading_silence"] < 20 * MS, seg
        # The 400 ms tone came through Opus and the jitter buffer (20 ms frames; the decoder
        # rings on for a frame or few after it); the line's silence after that is not reply
        # audio (the reply would be 700+ ms with it: 300 ms of idle).
        assert 400 * MS <= turn.figures["agent_audio_ns"] <= 540 * MS, turn.figures
    assert len(agent.named("reply")) >= 3 and len(agent.named("track")) >= 3


def test_a_bot_that_is_down_fails_every_turn(tmp_path: Path) -> None:
    turns = _run(tmp_path, PORT + 1)
    assert len(turns) == 2
    for turn in turns:
        assert not turn.ok
        reason = turn.failure_reason or ""
        assert "cannot connect to http://127.0.0.1:9262/api/offer" in reason, reason


def test_a_refused_offer_fails_with_the_bots_words(tmp_path: Path) -> None:
    with pipecat_agent("webrtc", PORT + 2, "--mode", "refuse"):
        (refused,) = _run(tmp_path, PORT + 2, turns=1)
    reason = refused.failure_reason or ""
    assert (
        "HTTP 403" in reason and "offer refused" in reason and "refused by this test bot" in reason
    )


@pytest.mark.slow  # ~8 s: the fixture, the silence tail, then the answer timeout
def test_a_bot_that_never_answers_times_out(tmp_path: Path) -> None:
    with pipecat_agent("webrtc", PORT + 3, "--mode", "mute") as agent:
        (mute,) = _run(tmp_path, PORT + 3, turns=1, answer_timeout_s=1.0)
    assert not mute.ok
    reason = mute.failure_reason or ""
    assert "no reply audio" in reason and "within 1 s after the input ended" in reason, reason
    assert agent.named("vad_stop")  # it heard the user and chose silence


def test_the_line_paces_silence_and_passes_the_turns_frames_at_once() -> None:
    async def run() -> tuple[list[float], list[bytes]]:
        line = _line_track_class()(16000)
        t0 = time.monotonic()
        times, pcms = [], []
        for k in range(6):
            if k == 3:
                line.input.put_nowait(b"\x01\x00" * 320)  # the pacer's frame: out at once
            frame = await line.recv()
            times.append(time.monotonic() - t0)
            pcms.append(bytes(frame.planes[0])[:640])
            if k == 3:
                line.input.put_nowait(None)  # the input ended: silence on our clock again
        return times, pcms

    times, pcms = asyncio.run(run())
    assert pcms[3] == b"\x01\x00" * 320 and all(
        p == bytes(640) for i, p in enumerate(pcms) if i != 3
    )
    # Silence on an absolute 20 ms cadence (never early; late only by the machine's load)...
    assert times[1] >= 0.019 and times[2] >= 0.039 and times[2] < 0.1
    # ... the turn's frame out at once, and the silence after it from one frame after it.
    assert times[3] - times[2] < 0.01
    assert times[4] - times[3] >= 0.019 and times[5] - times[3] >= 0.039
    assert times[5] - times[3] < 0.1


def test_the_shipped_pipeline_and_bad_options(monkeypatch: pytest.MonkeyPatch) -> None:
    p = load_pipeline(ROOT / "pipelines" / "agent-webrtc.toml")
    stage = WebRTC(p.agent or {})
    assert stage.kind == "agent" and stage.endpoint_by_server
    assert (stage.input_rate, stage.output_rate) == (16000, 48000)
    with pytest.raises(StageError, match="url must be the http"):
        WebRTC({"url": "ws://127.0.0.1:1/"})
    with pytest.raises(StageError, match="jitter_buffer_packets must be between 1 and 15"):
        WebRTC({"url": "http://127.0.0.1:1/api/offer", "jitter_buffer_packets": 16})
    import voicelat.stages.webrtc as webrtc

    monkeypatch.setattr(webrtc.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(StageError, match=r"needs aiortc: pip install 'voicelat\[webrtc\]'"):
        WebRTC({"url": "http://127.0.0.1:1/api/offer"})
