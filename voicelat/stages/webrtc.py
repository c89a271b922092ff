"""A bot behind SmallWebRTC's offer/answer, heard through a real WebRTC stack: ``webrtc``.

voicelat is the caller's browser: an aiortc peer connection (no ICE servers: host candidates
only, nothing leaves the machine) with one ``sendrecv`` audio transceiver, the first one, as
Pipecat's SmallWebRTC expects. The offer is POSTed as ``{"sdp", "type": "offer"}`` JSON (plus
``request_data`` when set) to ``url``, the bot's offer endpoint (``/api/offer`` under Pipecat's
runner); the answer is ``{"sdp", "type", "pc_id"}`` (pipecat-ai 1.14.0,
``transports/smallwebrtc/request_handler.py``). With ``rtvi`` (default) a data channel is opened,
as Pipecat's clients do, and RTVI ``client-ready`` said on it: the bot's VAD events come back
as ``ServerSpeech`` and its ``bot-stopped-speaking`` ends the reply 300 ms after its last sound
(the message outruns the audio). Without it the bot falls back on the peer connection's state. Each turn is one call, opened before the turn (``__aenter__`` for
the first, ``prepare()`` for the next) and hung up when the reply is over. A call is ready when
the bot's audio track delivers its first frame (SmallWebRTC's output track streams silence as
soon as the bot's pipeline is up), so the bot's start-up never counts in a turn.

**Out.** The fixture's 20 ms frames go to the outgoing track as the pacer hands them over;
before and after them the track paces silence itself (a call carries silence). aiortc encodes
them with Opus at 48 kHz.

**In, and where the stamp is.** aiortc puts each RTP packet through its jitter buffer
(``jitter_buffer_packets``: a frame is released once that many later packets are in, aiortc's
default 4) and decodes it with Opus on its decoder thread; the decoded frame lands in the
remote track's queue. :meth:`WebRTC._read` stamps each frame as the first statement after the
``await track.recv()`` that delivered it: the stamp includes the bot's encoder, the network, the
jitter buffer, the decode and the hop from aiortc's thread to the event loop: what a caller
hears, less only the sound card. Converting it (left channel, resampled to ``output_rate``
when that is not the decoded rate, 48 kHz for Opus) happens after the stamp. WebRTC negotiates
its codec, so a reply is never at a "wrong" rate: it is decoded and resampled.

**The reply.** The line's decoded silence never starts a reply; the first frame with sound does;
the reply is over after ``reply_idle_ms`` without sound (:class:`ReplyWatch`). A bot that is
down, refuses the offer, never connects, hangs up or never answers fails the turn with the
reason; the run goes on. aiortc is imported only when the stage is used (extra ``webrtc``).

**Under a network profile** (``media_network``, set by the engine from ``--network``), each
call's media goes through its own impaired UDP relay (``stages/media_relay.py``): the offer and
the answer name only the relay's addresses, so RTP, STUN, DTLS and SCTP cross it both ways and
a profile's loss, delay and jitter reach the packets aiortc's jitter buffer and decoder see.
Per turn the stage reports ``webrtc_lost_frames`` (reply frames the decoder never got: gaps in
the decoded frames' RTP timestamps, what a browser's jitter buffer would conceal; aiortc
conceals nothing, so the sink hears each as a gap) and the relay's ``media_*`` tallies.
"""

from __future__ import annotations

import asyncio
import contextlib
import fractions
import importlib.util
import json
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, ClassVar, Self

import httpx
import numpy as np

from voicelat.core.base import jsontext
from voicelat.core.base.errors import StageError
from voicelat.core.base.network import NetworkProfile
from voicelat.core.base.secrets import excerpt
from voicelat.core.measure.clock import Clock
from voicelat.core.measure.events import Audio, Connected, Done, Failed, Span, StageEvent, StageName
from voicelat.stages.base import MONOTONIC
from voicelat.stages.http import error_message
from voicelat.stages.media_relay import MediaRelay, SdpProblem
from voicelat.stages.media_relay import host_candidate as host_candidate_of
from voicelat.stages.options import OptionProblem, parse_options, read_secret
from voicelat.stages.pipecat_ws import NS_PER_MS, AgentOptions
from voicelat.stages.protocols.pipecat_ws import (
    CLIENT_READY,
    ReplyWatch,
    rtvi_events,
    rtvi_message,
)

__all__ = ["WebRTC", "WebRTCOptions"]

_FRAME_S = 0.02
#: aiortc's audio jitter buffer: 16 packets, a frame released once 4 later ones are in.
_JITTER_CAPACITY = 16
#: After RTVI ``bot-stopped-speaking`` the reply ends this long after its last sound: the
#: message outruns the audio (the RTP path is ~100 ms on loopback, docs/AGENTS.md).
_END_MARK_GRACE_NS = 300 * NS_PER_MS
#: How long a hang-up waits for the media relay to deliver what is still in flight (the
#: hang-up's own datagrams among them): above any built-in profile's delay plus jitter.
RELAY_DRAIN_S = 1.0


@dataclass(frozen=True, kw_only=True)
class WebRTCOptions(AgentOptions):
    """``[agent]`` of ``webrtc``."""

    url: str = "http://127.0.0.1:7860/api/offer"
    #: Opus decodes at 48 kHz: another rate is resampled to.
    output_rate: int = 48000
    #: Packets aiortc's jitter buffer holds before it releases a frame (its default: 4).
    jitter_buffer_packets: int = 4
    #: Passed to the bot with the offer (Pipecat's runner hands it to the bot as ``body``).
    request_data: Mapping[str, Any] = field(
        default_factory=dict, metadata={"expect": "a table sent with the offer"}
    )
    #: Sent as ``Authorization: Bearer <key>`` when set.
    api_key_env: str | None = None
    #: Open a data channel and say RTVI ``client-ready`` on it (the bot's VAD events and its
    #: ``bot-stopped-speaking`` then come back on it).
    rtvi: bool = True

    def check(self) -> None:
        super().check()
        if not self.url.startswith(("http://", "https://")):
            raise OptionProblem("url", f"url must be the http(s):// offer URL, not {self.url!r}")
        if not 1 <= self.jitter_buffer_packets < _JITTER_CAPACITY:
            raise OptionProblem(
                "jitter_buffer_packets",
                f"jitter_buffer_packets must be between 1 and {_JITTER_CAPACITY - 1}",
            )


class CallRefused(Exception):
    """The bot's offer endpoint or its peer connection refused the call (the message says why)."""


# -- what the call's reader hands to the turn --------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Frame:
    t_ns: int
    frame: Any  # av.AudioFrame


@dataclass(frozen=True, slots=True)
class _Rtvi:
    t_ns: int
    text: str


@dataclass(frozen=True, slots=True)
class _InputEnded:
    t_ns: int


@dataclass(frozen=True, slots=True)
class _Hangup:
    t_ns: int
    why: str


_Item = _Frame | _Rtvi | _InputEnded | _Hangup


@cache
def _aiortc() -> Any:
    """aiortc, imported on first use (it pulls in av, cryptography...)."""
    import aiortc

    return aiortc


@cache
def _line_track_class() -> type[Any]:
    """The outgoing track's class (built on first use: aiortc is an optional import)."""
    from aiortc.mediastreams import MediaStreamTrack
    from av import AudioFrame

    class LineTrack(MediaStreamTrack):
        """The caller's microphone: the turn's frames as they come, silence around them."""

        kind = "audio"

        def __init__(self, rate: int) -> None:
            super().__init__()
            self.rate = rate
            self.samples = int(rate * _FRAME_S)
            self.input: asyncio.Queue[bytes | None] = asyncio.Queue()
            self.active = False
            self._pts = 0
            self._next = 0.0
            self._last = 0.0

        async def recv(self) -> Any:
            loop = asyncio.get_running_loop()
            data: bytes | None = None
            if self.active:
                data = await self.input.get()  # the pacer's real-time frames
                if data is None:  # the input ended: silence from one frame after the last
                    self.active = False
                    self._next = self._last + _FRAME_S
            if not self.active:
                self._next = self._next or loop.time()
                # Silence on our own clock, until the turn's first frame arrives.
                with contextlib.suppress(TimeoutError):
                    data = await asyncio.wait_for(
                        self.input.get(), max(0.0, self._next - loop.time())
                    )
                    self.active = data is not None
                self._next += _FRAME_S
            self._last = loop.time()
            return self._frame(data or bytes(self.samples * 2))

        def _frame(self, pcm: bytes) -> Any:
            samples = len(pcm) // 2
            frame = AudioFrame(format="s16", layout="mono", samples=samples)
            frame.planes[0].update(pcm)
            frame.sample_rate = self.rate
            frame.pts = self._pts
            frame.time_base = fractions.Fraction(1, self.rate)
            self._pts += samples
            return frame

    return LineTrack


class _Call:
    """One open call: the peer connection, our track, the reply's frames as they arrive."""

    def __init__(self, pc: Any, line: Any, clock: Clock) -> None:
        self.pc, self.line, self.clock = pc, line, clock
        self.items: asyncio.Queue[_Item] = asyncio.Queue()
        self.listening = False
        self.ready = asyncio.Event()
        self.spans: list[Span] = []
        self.t_open_ns = 0
        self.used = False
        self.pc_id: str | None = None
        #: The call's media relay (under a network profile), else None.
        self.relay: MediaRelay | None = None
        #: Reply frames never decoded while listening (gaps in the frames' RTP timestamps).
        self.lost_frames = 0
        self._next_pts: int | None = None
        self._reader: asyncio.Task[None] | None = None

    def read(self, track: Any) -> None:
        self._reader = asyncio.create_task(self._read(track))

    async def _read(self, track: Any) -> None:
        from aiortc.mediastreams import MediaStreamError

        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                self.items.put_nowait(_Hangup(self.clock.now_ns(), "the bot hung up"))
                return
            # THE STAMP (first statement after the await that delivered the decoded frame):
            # bot encoder + network + jitter buffer + Opus decode + aiortc's thread hop.
            t = self.clock.now_ns()
            self.ready.set()
            self._count_gap(frame)
            if self.listening:
                self.items.put_nowait(_Frame(t, frame))

    def _count_gap(self, frame: Any) -> None:
        """Frames lost before ``frame`` (its RTP timestamp past the one expected: aiortc's
        jitter buffer skipped them, lost on the network or too late), while listening."""
        pts, samples = frame.pts, frame.samples
        if not isinstance(pts, int) or not samples:
            return
        if self.listening and self._next_pts is not None and pts > self._next_pts:
            self.lost_frames += round((pts - self._next_pts) / samples)
        self._next_pts = pts + samples

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.pc.close(), 2.0)
        if self.relay is not None:
            # pc.close() has just sent the hang-up (DTLS close_notify, RTCP BYE) into the
            # relay: closing it now dropped them, so the bot only saw the call end at its ICE
            # consent timeout, ~30 s on, and its turn and conversation spans (ended by the
            # disconnect) came too late for the turn's trace wait: every turn `untraced`.
            # Let them cross first (the profile's delay and jitter: a bounded wait, between
            # turns, off every stamp).
            loop = asyncio.get_running_loop()
            deadline, quiet = loop.time() + RELAY_DRAIN_S, 0
            while quiet < 2 and loop.time() < deadline:
                quiet = 0 if self.relay.in_flight() else quiet + 1
                await asyncio.sleep(0.005)
            self.relay.close()


def _drain(items: asyncio.Queue[Any]) -> None:
    """Drop what is queued in ``items``."""
    while not items.empty():
        items.get_nowait()


class WebRTC:
    """A bot behind SmallWebRTC's offer/answer (see the module docstring)."""

    kind: ClassVar[StageName] = "agent"
    stage_name: ClassVar[str] = "webrtc"
    endpoint_by_server: bool = True
    #: Stamps every event; the engine may replace it before ``__aenter__``.
    clock: Clock = MONOTONIC
    #: Call mode (``engine/call.py``): one peer connection for every turn of a call.
    keep_call: bool = False
    #: A fresh call's first turn hears everything since the peer connected (its greeting).
    accept_from_open: bool = False
    #: The run's network profile for the media path (the engine sets it before
    #: ``__aenter__``; None: the media goes straight to the bot's candidate).
    media_network: NetworkProfile | None = None

    @property
    def call_open(self) -> bool:
        """The call's peer connection is still connected (a bot that hung up closed it)."""
        return self._call is not None and self._call.pc.connectionState == "connected"

    @property
    def fresh_call(self) -> bool:
        """A connected call no turn has used yet (a call can start on it)."""
        return self._call is not None and not self._call.used

    @property
    def call_opened_ns(self) -> int | None:
        """When the current call's peer connection started (a call's "connected")."""
        return self._call.t_open_ns if self._call is not None else None

    def __init__(self, options: Mapping[str, Any], *, table: str = "agent") -> None:
        o = self.options = parse_options(WebRTCOptions, table, options)
        if importlib.util.find_spec("aiortc") is None:
            raise StageError(
                "the webrtc stage needs aiortc: pip install 'voicelat[webrtc]' (or pip install"
                " aiortc)"
            )
        self.table = table
        self.input_rate = o.input_rate
        self.output_rate = o.output_rate
        self._key = read_secret(table, o.api_key_env)
        self._http: httpx.AsyncClient | None = None
        self._call: _Call | None = None
        self._last_error: str | None = None
        self._resampler: Any = None
        #: The current turn's call: the answer's ``pc_id`` (the example bot's traces'
        #: ``conversation.id``).
        self.call_id: str | None = None
        self._calls = 0  # calls opened: each media relay draws its own seeded sequence
        self._figures: dict[str, int | None] = {}

    # -- lifecycle --------------------------------------------------------------------------
    async def __aenter__(self) -> Self:
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        self._http = httpx.AsyncClient(timeout=self.options.timeout_s, headers=headers)
        await self.prepare()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._hang_up()
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def prepare(self) -> None:
        """Open the next call (outside the turn); a failure is the turn's to report."""
        if self._call is not None and (not self._call.used or self.keep_call):
            return
        await self._hang_up()
        try:
            self._call = await self._open()
        except Exception as exc:
            self._last_error = self._reason(exc)

    def describe(self) -> dict[str, Any]:
        o = self.options
        return {
            "stage": self.stage_name,
            "url": o.url,
            "input_rate": o.input_rate,
            "output_rate": o.output_rate,
            "jitter_buffer_packets": o.jitter_buffer_packets,
            "reply_idle_ms": o.reply_idle_ms,
            "rtvi": o.rtvi,
            "media_network": self.media_network.name if self.media_network else None,
        }

    async def _hang_up(self) -> None:
        call, self._call = self._call, None
        if call is not None:
            await call.close()

    # -- opening a call -----------------------------------------------------------------------
    async def _open(self) -> _Call:
        aiortc = _aiortc()
        now = self.clock.now_ns
        t0 = now()
        pc = aiortc.RTCPeerConnection(aiortc.RTCConfiguration(iceServers=[]))
        call = _Call(pc, _line_track_class()(self.input_rate), self.clock)
        try:
            await self._negotiate(call, t0)
            t3 = now()
            async with asyncio.timeout(self.options.timeout_s):
                await call.ready.wait()
        except BaseException as exc:
            await call.close()
            if isinstance(exc, TimeoutError):
                raise CallRefused(self._not_ready(pc)) from None
            raise
        call.spans.append(Span("agent_ready", t3, now()))
        call.t_open_ns = now()
        return call

    async def _negotiate(self, call: _Call, t0: int) -> None:
        """Offer, answer, ICE and DTLS: the call is connected when this returns."""
        aiortc, pc, now = _aiortc(), call.pc, self.clock.now_ns
        remote: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        connected = asyncio.Event()
        pc.addTrack(call.line)
        if self.options.rtvi:
            self._open_channel(call)

        @pc.on("track")  # type: ignore[untyped-decorator]
        def on_track(track: Any) -> None:
            if track.kind == "audio" and not remote.done():
                remote.set_result(track)

        @pc.on("connectionstatechange")  # type: ignore[untyped-decorator]
        def on_state() -> None:
            if pc.connectionState in ("connected", "failed", "closed"):
                connected.set()

        await pc.setLocalDescription(await pc.createOffer())  # gathers the host candidates
        offer = pc.localDescription.sdp
        if self.media_network is not None:
            call.relay = self._media_relay(offer)
            offer = call.relay.offer(offer)
        t1 = now()
        answer = await self._post_offer(offer)
        t2 = now()
        call.pc_id = answer.get("pc_id") if isinstance(answer.get("pc_id"), str) else None
        sdp = answer["sdp"]
        if call.relay is not None:
            try:
                sdp = call.relay.connect(sdp)
            except SdpProblem as exc:
                raise CallRefused(f"the answer from {self.options.url}: {exc}") from None
        await pc.setRemoteDescription(aiortc.RTCSessionDescription(sdp, answer["type"]))
        self._set_jitter_buffer(pc)
        async with asyncio.timeout(self.options.timeout_s):
            await connected.wait()
            if pc.connectionState != "connected":
                raise CallRefused(f"the WebRTC connection to {self.options.url} failed (ICE/DTLS)")
            call.read(await remote)
        call.spans += [
            Span("ice_gather", t0, t1),
            Span("offer", t1, t2),
            Span("connect", t2, now()),
        ]

    def _media_relay(self, offer: str) -> MediaRelay:
        """The call's media relay, standing between our host candidate and the bot's."""
        assert self.media_network is not None
        self._calls += 1
        try:
            caller = host_candidate_of(offer)
        except SdpProblem as exc:
            raise CallRefused(f"cannot relay the media under --network: {exc}") from None
        seed = self.media_network.seed * 1000 + self._calls
        return MediaRelay(self.media_network, caller, seed=seed)

    def _open_channel(self, call: _Call) -> None:
        """The data channel Pipecat's clients open (the bot only listens for one): RTVI
        ``client-ready`` once it is open, the bot's RTVI messages back."""
        channel = call.pc.createDataChannel("rtvi", ordered=True)

        @channel.on("open")  # type: ignore[untyped-decorator]
        def on_open() -> None:
            channel.send(json.dumps(CLIENT_READY))

        @channel.on("message")  # type: ignore[untyped-decorator]
        def on_message(message: Any) -> None:
            # THE STAMP of a message: the first statement of the callback SCTP delivered it to.
            t = self.clock.now_ns()
            if call.listening and isinstance(message, str):
                call.items.put_nowait(_Rtvi(t, message))

    async def _post_offer(self, sdp: str) -> dict[str, Any]:
        assert self._http is not None
        url = self.options.url
        body: dict[str, Any] = {"sdp": sdp, "type": "offer"}
        if self.options.request_data:
            body["request_data"] = dict(self.options.request_data)
        r = await self._http.post(url, json=body)
        if r.status_code != 200:
            # The provider's message out of a JSON body, scrubbed before it is cut.
            detail = error_message(r.content) if r.content else r.reason_phrase
            raise CallRefused(f"HTTP {r.status_code} from {url} (offer refused): {detail}")
        try:
            answer = jsontext.loads(r.content)
        except ValueError:
            answer = None
        if not (
            isinstance(answer, dict)
            and isinstance(answer.get("sdp"), str)
            and answer.get("type") == "answer"
        ):
            raise CallRefused(
                f"{url} did not answer with {{sdp, type: answer}} JSON: {excerpt(r.text, 80, quoted=True)}"
            )
        return answer

    def _set_jitter_buffer(self, pc: Any) -> None:
        """aiortc has no setting for it: the receiver's buffer is replaced, as Pipecat does."""
        packets = self.options.jitter_buffer_packets
        if packets == 4:
            return
        from aiortc.jitterbuffer import JitterBuffer

        for transceiver in pc.getTransceivers():
            if transceiver.kind == "audio":
                transceiver.receiver._RTCRtpReceiver__jitter_buffer = JitterBuffer(
                    capacity=_JITTER_CAPACITY, prefetch=packets
                )

    def _not_ready(self, pc: Any) -> str:
        state = pc.connectionState
        if state != "connected":
            return (
                f"no WebRTC connection to {self.options.url} within {self.options.timeout_s:g} s "
                f"(connection state: {state})"
            )
        return (
            f"the bot at {self.options.url} sent no audio within {self.options.timeout_s:g} s of "
            "connecting (is its pipeline running with audio_out_enabled?)"
        )

    def _reason(self, exc: BaseException) -> str:
        url = self.options.url
        if isinstance(exc, CallRefused):
            return str(exc)
        if isinstance(exc, httpx.ConnectError):
            return f"cannot connect to {url}: {exc or 'connection refused'}"
        if isinstance(exc, httpx.TimeoutException | TimeoutError):
            return f"no answer to the offer from {url} within {self.options.timeout_s:g} s"
        return f"cannot open a WebRTC call to {url}: {type(exc).__name__}: {exc}"

    def failed(self, reason: str, t_ns: int | None = None) -> Failed:
        t = self.clock.now_ns() if t_ns is None else t_ns
        return Failed(t, f"{self.stage_name}: {reason}")

    # -- one turn -----------------------------------------------------------------------------
    async def converse(self, audio: AsyncIterable[bytes]) -> AsyncIterator[StageEvent]:
        call = self._call
        cold = call is None or (call.used and not self.keep_call)
        if not cold and call is not None and call.used:
            _drain(call.items)  # a call's next turn: what came between turns is not its reply
        if cold:
            await self.prepare()
            call = self._call
        if call is None:
            yield self.failed(self._last_error or "no call")
            return
        first_use = not call.used
        call.used = True
        self.call_id = call.pc_id
        mark, lost = (call.relay.mark() if call.relay else None), call.lost_frames
        yield Connected(call.t_open_ns if cold else self.clock.now_ns(), cold=cold)
        if first_use:  # a call's later turns (call mode) reuse the peer: its spans once
            for span in call.spans:
                yield span
        try:
            async for event in self._turn(call, audio):
                yield event
        finally:
            # The turn's media figures, before a hang-up stops the relay.
            self._figures = {"webrtc_lost_frames": call.lost_frames - lost}
            if call.relay is not None and mark is not None:
                self._figures.update(call.relay.figures_since(mark))
            if not self.keep_call:
                await self._hang_up()

    def turn_figures(self) -> dict[str, int | None]:
        """The last turn's media figures (``webrtc_lost_frames``, the relay's ``media_*``),
        once: the engine records them with the turn."""
        figures, self._figures = self._figures, {}
        return figures

    async def end_call(self) -> None:
        """The call is over: hang up (the next turn opens a new call)."""
        await self._hang_up()

    async def _turn(self, call: _Call, audio: AsyncIterable[bytes]) -> AsyncIterator[StageEvent]:
        o = self.options
        watch = ReplyWatch(
            idle_ns=o.reply_idle_ms * NS_PER_MS, timeout_ns=int(o.answer_timeout_s * 1e9)
        )
        call.listening = True
        self._resampler = None  # a resampler keeps state: one per call
        feeder = asyncio.create_task(self._feed(call, audio))
        try:
            while True:
                deadline = watch.deadline_ns()
                wait = (
                    None if deadline is None else max(0.0, (deadline - self.clock.now_ns()) / 1e9)
                )
                try:
                    item = await asyncio.wait_for(call.items.get(), wait)
                except TimeoutError:
                    item = None
                events = self._on_item(item, watch)
                for event in events:
                    yield event
                if any(isinstance(e, Done | Failed) for e in events):
                    return
        finally:
            feeder.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await feeder

    def _on_item(self, item: _Item | None, watch: ReplyWatch) -> list[StageEvent]:
        if item is None:
            now = self.clock.now_ns()
            if not watch.expired(now):
                return []
            if watch.started:
                return [Done(now, watch.reason, {"reply_chunks": watch.chunks})]
            return [self.failed(f"no reply audio from {self.options.url} within "
                                f"{self.options.answer_timeout_s:g} s after the input ended")]  # fmt: skip
        if isinstance(item, _InputEnded):
            watch.input_ended(item.t_ns)
            return []
        if isinstance(item, _Rtvi):
            return self._rtvi(item, watch)
        if isinstance(item, _Hangup):
            if watch.started:
                return [Done(item.t_ns, "agent hung up", {"reply_chunks": watch.chunks})]
            return [self.failed(f"{item.why} before replying", item.t_ns)]
        released = watch.audio(self._pcm(item.frame), item.t_ns)
        return [Audio(t, pcm, self.output_rate) for t, pcm in released]

    def _rtvi(self, item: _Rtvi, watch: ReplyWatch) -> list[StageEvent]:
        msg = rtvi_message(item.text)
        if msg is None:
            return []
        out: list[StageEvent] = []
        for event in rtvi_events(msg, item.t_ns, watch, self.options.url):
            if isinstance(event, Done):  # ahead of the reply's last audio on the RTP path
                watch.end_mark(_END_MARK_GRACE_NS)
            elif isinstance(event, Failed):
                out.append(self.failed(event.reason, event.t_ns))
            else:
                out.append(event)
        return out

    async def _feed(self, call: _Call, audio: AsyncIterable[bytes]) -> None:
        async for frame in audio:
            call.line.input.put_nowait(frame)
        call.line.input.put_nowait(None)
        call.items.put_nowait(_InputEnded(self.clock.now_ns()))

    def _pcm(self, frame: Any) -> bytes:
        """A decoded frame as 16-bit mono PCM at ``output_rate`` (after the stamp)."""
        if frame.sample_rate != self.output_rate:
            if self._resampler is None:
                from av import AudioResampler

                self._resampler = AudioResampler(format="s16", layout="mono", rate=self.output_rate)
            return b"".join(
                bytes(f.planes[0])[: f.samples * 2] for f in self._resampler.resample(frame)
            )
        samples = frame.to_ndarray()
        if samples.dtype != np.int16:
            samples = (np.clip(samples, -1.0, 1.0) * 32767).astype(np.int16)
        if frame.format.is_planar:
            return bytes(samples[0].tobytes())
        channels = len(frame.layout.channels)
        return bytes(samples.reshape(-1)[::channels].tobytes())
