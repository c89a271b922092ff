"""Pipecat's websocket transports with its protobuf serializer (PROTOCOLS-AGENTS.md §4), sans-I/O.

**Wire format** (pipecat-ai 1.14.0, ``pipecat/frames/frames.proto`` and
``pipecat/serializers/protobuf.py``; BSD 2-Clause, Copyright (c) 2024-2026 Daily): every
websocket message is one binary ``pipecat.Frame``, a ``oneof`` of ``TextFrame`` (1),
``AudioRawFrame`` (2), ``TranscriptionFrame`` (3), ``MessageFrame`` (4, a JSON text: RTVI and
other transport messages) and ``InterruptionFrame`` (5). The bot deserializes our audio as
``InputAudioRawFrame(audio, sample_rate, num_channels)`` and sends its reply as
``OutputAudioRawFrame`` chunks (``audio_out_10ms_chunks`` x 10 ms, 40 ms by default) at its
output transport's rate, paced at twice real time. The schema is declared here, field for field,
as a ``FileDescriptorProto`` in a private descriptor pool, and the message classes come from the
protobuf runtime: voicelat never imports pipecat (tests check the bytes against pipecat's own
``frames_pb2`` both ways).

**Rate.** Pipecat's audio frames say their ``sample_rate`` and ``num_channels``. A reply at
another rate than ``output_rate`` (or not mono) fails the turn with both rates named: it is a
configuration mismatch (the bot's ``audio_out_sample_rate``), and resampling it on the stamping
loop would hide it and cost time there.

**The end of the reply.** Pipecat's RTVI observer (on by default) sends
``bot-started-speaking`` / ``bot-stopped-speaking`` and ``user-started-speaking`` /
``user-stopped-speaking`` as JSON ``MessageFrame`` s: the user's ones are the agent's VAD
(``ServerSpeech``: its endpoint, seen from outside), ``bot-stopped-speaking`` after reply audio is
the agent's own end mark (``Done``). Without RTVI the reply is over after ``reply_idle_ms``
without sound (:class:`ReplyWatch`), as for any agent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar

from voicelat.core.base import jsontext
from voicelat.core.base.errors import StageError
from voicelat.core.measure.events import (
    Audio,
    Delta,
    Done,
    Failed,
    Final,
    Interrupted,
    ServerSpeech,
    StageEvent,
)
from voicelat.stages.protocols.base import Send, WsProtocol

__all__ = [
    "CLIENT_READY",
    "PIPECAT_PROTO_VERSION",
    "PipecatFrame",
    "PipecatWsProtocol",
    "ReplyWatch",
    "decode_frame",
    "encode_audio",
    "encode_message",
    "frame_classes",
    "is_bot_ready",
    "rtvi_events",
    "rtvi_message",
]

#: The pipecat-ai release whose ``frames.proto`` this schema copies.
PIPECAT_PROTO_VERSION = "1.14.0"

_RTVI_LABEL = "rtvi-ai"

# (message, [(field name, number, type, optional)]): pipecat/frames/frames.proto, proto3.
_U64, _U32, _STR, _BYTES = 4, 13, 9, 12  # FieldDescriptorProto.Type values
_MESSAGES: tuple[tuple[str, tuple[tuple[str, int, int, bool], ...]], ...] = (
    ("TextFrame", (("id", 1, _U64, False), ("name", 2, _STR, False), ("text", 3, _STR, False))),
    (
        "AudioRawFrame",
        (
            ("id", 1, _U64, False),
            ("name", 2, _STR, False),
            ("audio", 3, _BYTES, False),
            ("sample_rate", 4, _U32, False),
            ("num_channels", 5, _U32, False),
            ("pts", 6, _U64, True),
        ),
    ),
    (
        "TranscriptionFrame",
        (
            ("id", 1, _U64, False),
            ("name", 2, _STR, False),
            ("text", 3, _STR, False),
            ("user_id", 4, _STR, False),
            ("timestamp", 5, _STR, False),
        ),
    ),
    ("MessageFrame", (("data", 1, _STR, False),)),
    ("InterruptionFrame", (("id", 1, _U64, False), ("name", 2, _STR, False))),
)
_ONEOF = (
    ("text", 1, "TextFrame"),
    ("audio", 2, "AudioRawFrame"),
    ("transcription", 3, "TranscriptionFrame"),
    ("message", 4, "MessageFrame"),
    ("interruption", 5, "InterruptionFrame"),
)


@cache
def frame_classes() -> dict[str, Any]:
    """The generated message classes by name (``Frame``, ``AudioRawFrame``...), built once from
    the schema above; a StageError names the missing package when protobuf is not installed."""
    try:
        # No stubs in the venv (types-protobuf would type it): Any is all this needs.
        from google.protobuf import (  # type: ignore[import-untyped,unused-ignore]
            descriptor_pb2,
            descriptor_pool,
            message_factory,
        )
    except ImportError:
        raise StageError(
            "the pipecat-ws stage needs the protobuf package: pip install 'voicelat[pipecat-ws]'"
            " (or pip install protobuf)"
        ) from None
    fdp = descriptor_pb2.FileDescriptorProto(
        name="voicelat_pipecat_frames.proto", package="pipecat", syntax="proto3"
    )
    label = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
    for name, fields in _MESSAGES:
        msg = fdp.message_type.add(name=name)
        for fname, number, ftype, optional in fields:
            field = msg.field.add(name=fname, number=number, type=ftype, label=label)
            if optional:  # proto3 `optional`: a synthetic oneof of its own
                field.proto3_optional = True
                field.oneof_index = len(msg.oneof_decl)
                msg.oneof_decl.add(name=f"_{fname}")
    frame = fdp.message_type.add(name="Frame")
    frame.oneof_decl.add(name="frame")
    for fname, number, type_name in _ONEOF:
        frame.field.add(
            name=fname,
            number=number,
            type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
            type_name=f".pipecat.{type_name}",
            label=label,
            oneof_index=0,
        )
    # A private pool: pipecat's own frames_pb2 may be loaded in the same process.
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    # Held so the pool's file outlives this call (Add's return value differs across runtimes).
    file = pool.FindFileByName(fdp.name)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"pipecat.{name}"))
        for name in [*(m for m, _ in _MESSAGES), "Frame"]
    } | {"_file": file}


def encode_audio(pcm: bytes, rate: int, channels: int = 1) -> bytes:
    """One ``Frame{audio}``: what the bot deserializes as an ``InputAudioRawFrame``."""
    cls = frame_classes()["Frame"]
    frame = cls()
    frame.audio.audio = pcm
    frame.audio.sample_rate = rate
    frame.audio.num_channels = channels
    return bytes(frame.SerializeToString())


def encode_message(message: Any) -> bytes:
    """One ``Frame{message}`` carrying ``message`` as JSON (an RTVI client message)."""
    cls = frame_classes()["Frame"]
    frame = cls()
    frame.message.data = json.dumps(message, separators=(",", ":"))
    return bytes(frame.SerializeToString())


@dataclass(frozen=True, slots=True)
class PipecatFrame:
    """A decoded ``pipecat.Frame``: which member of the ``oneof`` and its fields."""

    kind: str  # text | audio | transcription | message | interruption | none
    fields: dict[str, Any]


def decode_frame(data: bytes) -> PipecatFrame:
    """``data`` as a ``pipecat.Frame``; raises ValueError when it is not one."""
    cls = frame_classes()["Frame"]
    try:
        frame = cls.FromString(data)
    except Exception as exc:  # google.protobuf.message.DecodeError
        raise ValueError(f"not a pipecat protobuf Frame ({exc})") from None
    which = frame.WhichOneof("frame")
    if which is None:
        return PipecatFrame("none", {})
    inner = getattr(frame, which)
    return PipecatFrame(which, {f.name: getattr(inner, f.name) for f in inner.DESCRIPTOR.fields})


def rtvi_message(data: str | bytes) -> dict[str, Any] | None:
    """An RTVI message (label ``rtvi-ai``) from its JSON text; None for anything else."""
    try:
        msg = jsontext.loads(data)
    except ValueError:
        return None
    return msg if isinstance(msg, dict) and msg.get("label") == _RTVI_LABEL else None


def rtvi_events(msg: dict[str, Any], t_ns: int, watch: ReplyWatch, url: str) -> list[StageEvent]:
    """What one RTVI message from the bot (stamped ``t_ns``) stands for, on any transport:
    its VAD (``ServerSpeech``), the end of a reply (``bot-stopped-speaking`` once reply audio
    came: ``Done``), an error (``Failed``)."""
    kind = msg.get("type")
    if kind == "user-started-speaking":
        return [ServerSpeech(t_ns, True)]
    if kind == "user-stopped-speaking":
        return [ServerSpeech(t_ns, False)]
    if kind == "bot-stopped-speaking" and watch.started:
        return [Done(t_ns, "bot-stopped-speaking", {"reply_chunks": watch.chunks})]
    if kind == "error":
        detail = msg.get("data")
        text = detail.get("error") if isinstance(detail, dict) else None
        return [Failed(t_ns, f"error from {url}: {text or 'RTVI error'}")]
    return []


#: RTVI's ``client-ready`` (what Pipecat's client SDKs say once they listen).
CLIENT_READY: dict[str, Any] = {
    "label": _RTVI_LABEL,
    "type": "client-ready",
    "id": "voicelat",
    "data": {"version": "1.0.0", "about": {"library": "voicelat"}},
}


def is_bot_ready(data: bytes) -> bool:
    """Whether ``data`` is the RTVI ``bot-ready`` message (the bot's answer to client-ready)."""
    try:
        frame = decode_frame(data)
    except ValueError:
        return False
    if frame.kind != "message":
        return False
    try:
        msg = jsontext.loads(frame.fields.get("data", ""))
    except ValueError:
        return False
    return (
        isinstance(msg, dict) and msg.get("label") == _RTVI_LABEL and msg.get("type") == "bot-ready"
    )


# -- the end of a reply, for any agent transport -----------------------------------------------
class ReplyWatch:
    """When an agent's reply started and when it is over, from the audio alone (sans-I/O).

    Digital silence (every sample within ``silence_peak``; -1: none is) is the line, not the
    reply: a transport that streams silence between replies (SmallWebRTC's auto-silence, a bot
    with a mixer) never starts a reply with it, and it never keeps a reply going. From the first chunk
    with sound on, silent chunks are held back and released (with their own arrival stamps)
    when sound follows them: a pause inside the reply is reply audio, the line's silence after
    it is not. The reply is over ``idle_ns`` after the last chunk with sound; with no reply,
    the turn fails ``timeout_ns`` after the user's input ended.
    """

    def __init__(self, *, idle_ns: int, timeout_ns: int, silence_peak: int = 0) -> None:
        self.idle_ns = idle_ns
        self.timeout_ns = timeout_ns
        self.silence_peak = silence_peak
        self.started = False
        self.last_sound_ns: int | None = None
        self.input_ended_ns: int | None = None
        self.chunks = 0
        #: Why the reply is over when the deadline passes (``end_mark`` changes it).
        self.reason = "idle"
        self._held: list[tuple[int, bytes]] = []

    def audio(self, pcm: bytes, t_ns: int) -> list[tuple[int, bytes]]:
        """The reply audio to report now, as ``(stamp, pcm)``, for this chunk stamped ``t_ns``."""
        if _peak(pcm) <= self.silence_peak:
            if self.started:
                self._held.append((t_ns, pcm))
            return []
        self.started = True
        self.last_sound_ns = t_ns
        out, self._held = [*self._held, (t_ns, pcm)], []
        self.chunks += len(out)
        return out

    def end_mark(self, grace_ns: int) -> None:
        """The bot said its reply is over, ahead of its last audio (WebRTC: the data channel
        outruns the RTP path): the reply ends ``grace_ns`` after its last sound instead."""
        self.idle_ns = min(self.idle_ns, grace_ns)
        self.reason = "bot-stopped-speaking"

    def input_ended(self, t_ns: int) -> None:
        if self.input_ended_ns is None:
            self.input_ended_ns = t_ns

    def deadline_ns(self) -> int | None:
        """When :meth:`expire` is due (None: not before the input has ended)."""
        if self.last_sound_ns is not None:
            return self.last_sound_ns + self.idle_ns
        if self.input_ended_ns is not None:
            return self.input_ended_ns + self.timeout_ns
        return None

    def expired(self, now_ns: int) -> bool:
        deadline = self.deadline_ns()
        return deadline is not None and now_ns >= deadline


def _peak(pcm: bytes) -> int:
    """The largest absolute sample of 16-bit little-endian PCM (0 for nothing)."""
    if len(pcm) < 2:
        return 0
    view = memoryview(pcm[: len(pcm) // 2 * 2]).cast("h")
    return max(max(view), -min(view))


# -- one turn over the websocket -----------------------------------------------------------------
class PipecatWsProtocol(WsProtocol[bytes]):
    """One user turn and the agent's reply over Pipecat's websocket + protobuf serializer."""

    awaiting: ClassVar[str] = "the end of the reply"

    def __init__(
        self,
        url: str,
        *,
        input_rate: int,
        output_rate: int,
        watch: ReplyWatch,
    ) -> None:
        super().__init__(url)
        self.input_rate = input_rate
        self.output_rate = output_rate
        self.watch = watch
        self.last_event = "(none)"
        #: Audio stamped before this (sent before the turn's first frame) is not the reply.
        self.turn_start_ns = 0

    def send_input(self, item: bytes) -> Iterator[Send]:
        if item:
            yield Send(encode_audio(item, self.input_rate))

    def input_ended(self, t_ns: int) -> list[StageEvent]:
        self.watch.input_ended(t_ns)
        return []

    def stalled(self, timeout_s: float) -> str:
        return (
            f"no reply audio from {self.url} within {timeout_s:g} s after the input ended "
            f"(last event: {self.last_event})"
        )

    def expire(self, t_ns: int) -> list[StageEvent]:
        """The watch's deadline passed (``t_ns``: now): the reply is over, or never came."""
        if self.watch.started:
            return [self.done_as(t_ns, "idle")]
        return [Failed(t_ns, self.stalled(self.watch.timeout_ns / 1e9))]

    def receive(self, message: str | bytes, t_ns: int) -> list[StageEvent]:
        if isinstance(message, str):
            self.last_event = "a text message"
            return [self._failed(t_ns, "sent a text message: is the bot's serializer "
                                 "ProtobufFrameSerializer?")]  # fmt: skip
        try:
            frame = decode_frame(message)
        except ValueError as exc:
            self.last_event = "a malformed frame"
            return [self._failed(t_ns, str(exc))]
        f = frame.fields
        if frame.kind == "audio":
            return self._audio(f, t_ns)
        self.last_event = f"a {frame.kind} frame"
        if frame.kind == "message":
            return self._message(f.get("data", ""), t_ns)
        if frame.kind == "text" and f.get("text"):
            return [Delta(t_ns, content=f["text"])]
        if frame.kind == "transcription" and f.get("text"):
            return [Final(t_ns, f["text"])]
        if frame.kind == "interruption":
            # Pipecat broadcasts one whenever the user starts speaking: only during the
            # reply does it mean the bot dropped audio (a barge-in).
            return [Interrupted(t_ns)] if self.watch.started else []
        return []

    def _audio(self, f: dict[str, Any], t_ns: int) -> list[StageEvent]:
        self.last_event = "an audio frame"
        rate, channels, pcm = f.get("sample_rate", 0), f.get("num_channels", 0), f.get("audio", b"")
        if rate != self.output_rate or channels != 1:
            return [
                self._failed(
                    t_ns,
                    f"the agent sent {rate} Hz {channels}-channel audio, [agent] expects "
                    f"{self.output_rate} Hz mono: set output_rate = {rate} (the bot's "
                    "audio_out_sample_rate) or make the bot's output mono",
                )
            ]
        if t_ns < self.turn_start_ns:
            return []
        pcm = pcm[: len(pcm) // 2 * 2]
        return [Audio(t, chunk, rate) for t, chunk in self.watch.audio(pcm, t_ns)]

    def _message(self, data: str, t_ns: int) -> list[StageEvent]:
        msg = rtvi_message(data)
        if msg is None:
            return []
        self.last_event = f"RTVI {msg.get('type')}"
        events = rtvi_events(msg, t_ns, self.watch, self.url)
        self.finished = any(isinstance(e, Done) for e in events)
        return events

    def done_as(self, t_ns: int, reason: str) -> Done:
        """The reply is over (``reason``: the end mark or ``idle``), with its chunk count."""
        self.finished = True
        return Done(t_ns, reason, {"reply_chunks": self.watch.chunks})
