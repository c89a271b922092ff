"""A minimal caller for the example bot: play one WAV in real time over a transport, time the reply.

Not voicelat's agent stages (those measure, with the contract's milestones); a smoke client::

    python call.py twilio     ws://127.0.0.1:9150/ws          ../../fixtures/weather_paris.wav
    python call.py pipecat-ws ws://127.0.0.1:9150/ws-client   ../../fixtures/weather_paris.wav
    python call.py webrtc     http://127.0.0.1:9150/api/offer ../../fixtures/weather_paris.wav

Each sends the WAV as 20 ms frames in real time, then silence (a call never stops sending),
and prints when the first non-silent reply audio arrived after the end of the WAV. twilio:
``connected`` + ``start`` then mu-law 8 kHz ``media``; pipecat-ws: ProtobufFrameSerializer
``audio`` frames (PCM16 16 kHz); webrtc: an aiortc peer with Opus audio and a data channel.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import time
import uuid
import wave
from dataclasses import dataclass, field

import numpy as np
import soxr
import websockets

FRAME_MS = 20
RATE = 8000
FRAME_BYTES = RATE * FRAME_MS // 1000  # 160 mu-law bytes
SILENCE = b"\xff" * FRAME_BYTES
PCM_RATE = 16000  # the bot's pipeline input rate (pipecat-ws does not resample input)
# A reply sample above this (int16) counts as audible: the transports pad with silence.
AUDIBLE = 200


def mulaw_encode(pcm: np.ndarray) -> bytes:
    """G.711 mu-law of int16 samples, bit-exact with CPython's audioop.lin2ulaw."""
    x = pcm.astype(np.int32) >> 2
    mask = np.where(x < 0, 0x7F, 0xFF)
    mag = np.minimum(np.abs(x), 8159) + 0x21
    seg = np.searchsorted(np.array([0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF]), mag)
    uval = np.where(seg >= 8, 0x7F, (seg << 4) | ((mag >> (seg + 1)) & 0x0F))
    return ((uval ^ mask) & 0xFF).astype(np.uint8).tobytes()


def mulaw_decode(data: bytes) -> np.ndarray:
    """int16 samples of G.711 mu-law bytes."""
    u = ~np.frombuffer(data, dtype=np.uint8).astype(np.int32) & 0xFF
    sign = u & 0x80
    exponent = (u >> 4) & 0x07
    mantissa = u & 0x0F
    mag = ((mantissa << 3) + 0x84 << exponent) - 0x84
    return np.where(sign != 0, -mag, mag).astype(np.int16)


def read_wav(path: str, rate: int) -> np.ndarray:
    """A 16-bit mono WAV as int16 samples at ``rate``."""
    with wave.open(path, "rb") as w:
        src, width, channels = w.getframerate(), w.getsampwidth(), w.getnchannels()
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)
    if width != 2 or channels != 1:
        raise SystemExit(f"{path}: expected 16-bit mono")
    return soxr.resample(pcm, src, rate).astype(np.int16) if src != rate else pcm


def frames_of(pcm: np.ndarray, rate: int) -> list[np.ndarray]:
    """20 ms frames, the last padded with zeros."""
    n = rate * FRAME_MS // 1000
    pcm = np.concatenate([pcm, np.zeros((-len(pcm)) % n, dtype=np.int16)])
    return [pcm[i : i + n] for i in range(0, len(pcm), n)]


@dataclass
class CallResult:
    """What one call saw, times in seconds of time.monotonic()."""

    t_audio_end: float = 0.0
    t_first_reply: float | None = None
    t_last_reply: float | None = None
    reply_s: float = 0.0
    messages: dict[str, int] = field(default_factory=dict)
    call_id: str = ""
    """Twilio: the callSid sent (the bot's conversation.id); webrtc: the answer's pc_id."""

    @property
    def response_s(self) -> float | None:
        """End of the played WAV -> first audible reply audio (includes the WAV's tail)."""
        return None if self.t_first_reply is None else self.t_first_reply - self.t_audio_end

    def heard(self, samples: np.ndarray, rate: int) -> None:
        """Account received reply audio; stamp the first audible sample's arrival."""
        now = time.monotonic()
        self.reply_s += len(samples) / rate
        if not self.t_audio_end or not len(samples):
            return
        if int(np.abs(samples.astype(np.int32)).max()) > AUDIBLE:
            if self.t_first_reply is None:
                self.t_first_reply = now
            self.t_last_reply = now

    def finished(self, idle_s: float | None) -> bool:
        """The reply started and nothing audible came for ``idle_s`` seconds."""
        if idle_s is None or self.t_last_reply is None:
            return False
        return time.monotonic() - self.t_last_reply >= idle_s

    def count(self, kind: str) -> None:
        self.messages[kind] = self.messages.get(kind, 0) + 1


async def _paced(
    n_frames: int, send: object, result: CallResult, n_speech: int, idle_s: float | None
) -> None:
    """Call ``send(i)`` every 20 ms on an absolute schedule (no drift), until the reply ends."""
    t0 = time.monotonic()
    for i in range(n_frames):
        if result.finished(idle_s):
            return
        await send(i)  # type: ignore[operator]
        if i == n_speech - 1:
            result.t_audio_end = time.monotonic()
        await asyncio.sleep(max(0.0, t0 + (i + 1) * FRAME_MS / 1000 - time.monotonic()))


async def twilio_call(
    url: str,
    wav: str,
    *,
    listen_s: float = 8.0,
    idle_s: float | None = None,
    params: dict[str, str] | None = None,
) -> CallResult:
    """One Twilio Media Streams call: the WAV as mu-law in real time, then silence."""
    frames = [mulaw_encode(f) for f in frames_of(read_wav(wav, RATE), RATE)]
    result = CallResult(call_id=f"CA{uuid.uuid4().hex}")
    sid = f"MZ{uuid.uuid4().hex}"
    async with websockets.connect(url, max_size=None) as ws:
        await ws.send(json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"}))
        start = {
            "streamSid": sid,
            "accountSid": "AC00000000000000000000000000000000",
            "callSid": result.call_id,
            "tracks": ["inbound"],
            "customParameters": params or {},
            "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": RATE, "channels": 1},
        }
        await ws.send(
            json.dumps({"event": "start", "sequenceNumber": "1", "streamSid": sid, "start": start})
        )

        async def receive() -> None:
            async for raw in ws:
                msg = json.loads(raw)
                result.count(str(msg.get("event")))
                if msg.get("event") == "media":
                    result.heard(mulaw_decode(base64.b64decode(msg["media"]["payload"])), RATE)

        async def send(i: int) -> None:
            payload = frames[i] if i < len(frames) else SILENCE
            media = {
                "track": "inbound",
                "chunk": str(i + 1),
                "timestamp": str(i * FRAME_MS),
                "payload": base64.b64encode(payload).decode(),
            }
            msg = {"event": "media", "sequenceNumber": str(i + 2), "streamSid": sid, "media": media}
            await ws.send(json.dumps(msg))

        receiver = asyncio.create_task(receive())
        total = len(frames) + int(listen_s * 1000 / FRAME_MS)
        await _paced(total, send, result, len(frames), idle_s)
        await ws.send(
            json.dumps({"event": "stop", "sequenceNumber": str(total + 2), "streamSid": sid})
        )
        receiver.cancel()
    return result


async def pipecat_ws_call(
    url: str, wav: str, *, listen_s: float = 8.0, idle_s: float | None = None
) -> CallResult:
    """One call over Pipecat's ProtobufFrameSerializer: PCM16 16 kHz ``audio`` frames."""
    from pipecat.frames.protobufs import frames_pb2

    frames = frames_of(read_wav(wav, PCM_RATE), PCM_RATE)
    silence = np.zeros_like(frames[0])
    result = CallResult()
    async with websockets.connect(url, max_size=None) as ws:

        async def receive() -> None:
            async for raw in ws:
                if not isinstance(raw, bytes):
                    continue
                frame = frames_pb2.Frame.FromString(raw)
                kind = frame.WhichOneof("frame") or "?"
                result.count(kind)
                if kind == "audio":
                    audio = frame.audio
                    result.heard(np.frombuffer(audio.audio, dtype=np.int16), audio.sample_rate)

        async def send(i: int) -> None:
            pcm = frames[i] if i < len(frames) else silence
            msg = frames_pb2.Frame(
                audio=frames_pb2.AudioRawFrame(
                    audio=pcm.tobytes(), sample_rate=PCM_RATE, num_channels=1
                )
            )
            await ws.send(msg.SerializeToString())

        receiver = asyncio.create_task(receive())
        total = len(frames) + int(listen_s * 1000 / FRAME_MS)
        await _paced(total, send, result, len(frames), idle_s)
        receiver.cancel()
    return result


async def webrtc_call(
    url: str, wav: str, *, listen_s: float = 8.0, idle_s: float | None = None
) -> CallResult:
    """One SmallWebRTC call: an aiortc peer sending the WAV as Opus, decoding the reply."""
    import aiohttp
    from aiortc import MediaStreamTrack, RTCPeerConnection, RTCSessionDescription
    from av import AudioFrame

    rate = 48000
    frames = frames_of(read_wav(wav, rate), rate)
    result = CallResult()
    total = len(frames) + int(listen_s * 1000 / FRAME_MS)

    class FixtureTrack(MediaStreamTrack):
        kind = "audio"

        def __init__(self) -> None:
            super().__init__()
            self.i = 0
            self.t0: float | None = None

        async def recv(self) -> AudioFrame:
            # Real time: frame i leaves at t0 + i * 20 ms (aiortc pulls as fast as we return).
            if self.t0 is None:
                self.t0 = time.monotonic()
            await asyncio.sleep(max(0.0, self.t0 + self.i * FRAME_MS / 1000 - time.monotonic()))
            pcm = frames[self.i] if self.i < len(frames) else np.zeros_like(frames[0])
            if self.i == len(frames) - 1:
                result.t_audio_end = time.monotonic()
            frame = AudioFrame.from_ndarray(pcm.reshape(1, -1), format="s16", layout="mono")
            frame.sample_rate = rate
            frame.pts = self.i * len(pcm)
            self.i += 1
            return frame

    pc = RTCPeerConnection()
    readers: list[asyncio.Task[None]] = []

    @pc.on("track")
    def on_track(track: MediaStreamTrack) -> None:
        async def read() -> None:
            while True:
                try:
                    frame = await track.recv()
                except Exception:
                    return
                result.count("audio")
                pcm = frame.to_ndarray().reshape(-1, len(frame.layout.channels))[:, 0]
                result.heard(pcm.astype(np.int16), frame.sample_rate)

        if track.kind == "audio":
            readers.append(asyncio.ensure_future(read()))

    pc.addTransceiver(FixtureTrack(), direction="sendrecv")
    pc.addTransceiver("video", direction="sendrecv")  # the bot expects audio, video (, screen)
    pc.createDataChannel("chat")  # the client creates it; the server only listens
    await pc.setLocalDescription(await pc.createOffer())
    offer = {"sdp": pc.localDescription.sdp, "type": pc.localDescription.type}
    async with aiohttp.ClientSession(trust_env=False) as http, http.post(url, json=offer) as resp:
        answer = await resp.json()
    await pc.setRemoteDescription(RTCSessionDescription(sdp=answer["sdp"], type=answer["type"]))
    result.call_id = str(answer.get("pc_id", ""))
    # The track paces itself; the call lasts for the WAV plus the listening time at most.
    deadline = time.monotonic() + total * FRAME_MS / 1000
    while time.monotonic() < deadline and not result.finished(idle_s):
        await asyncio.sleep(0.05)
    await pc.close()
    return result


CALLS = {"twilio": twilio_call, "pipecat-ws": pipecat_ws_call, "webrtc": webrtc_call}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("transport", choices=sorted(CALLS))
    p.add_argument("url")
    p.add_argument("wav")
    p.add_argument("--listen", type=float, default=8.0, help="seconds of silence after the WAV")
    p.add_argument("--idle", type=float, default=None, help="hang up after this quiet gap")
    args = p.parse_args()
    call = CALLS[args.transport]
    result = asyncio.run(call(args.url, args.wav, listen_s=args.listen, idle_s=args.idle))
    r = result.response_s
    print(
        f"first audible reply {'none' if r is None else f'{r * 1000:.0f} ms'} after the WAV "
        f"ended; {result.reply_s:.2f} s of reply audio; messages {result.messages}"
    )


if __name__ == "__main__":
    main()
