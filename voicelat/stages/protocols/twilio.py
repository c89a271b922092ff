"""Twilio Media Streams, voicelat in Twilio's place, toward an agent's websocket (sans-I/O).

voicelat is the phone line (PROTOCOLS-AGENTS.md §3): after the upgrade it sends ``connected``
and ``start`` (``streamSid``, ``callSid``, ``mediaFormat`` audio/x-mulaw 8000 Hz mono,
``customParameters``), then one ``media`` message per 20 ms frame (base64 mu-law, with
``sequenceNumber``, ``chunk`` and ``timestamp`` as Twilio numbers them), and ``stop`` when the
call ends. The agent answers with ``media`` (base64 mu-law 8 kHz: each is an ``Audio`` at
its arrival stamp), ``mark`` (Twilio echoes a mark once the audio sent before it has played:
so do we, from a real-time playback timeline of the reply) and ``clear`` (barge-in: the
queued audio is dropped, every pending mark is echoed at once; ``Interrupted`` when audio
was still to play).

The reply is over (``Done``, stamped at the last reply audio's arrival) when no reply audio
came for ``reply_idle_ms`` after the last chunk, or at the agent's end mark (``end_mark``)
once its audio has played. Nothing in the protocol says the reply is over otherwise (Pipecat's
Twilio serializer sends no marks). The protocol keeps its own deadlines (``tick``): no reply
audio within ``answer_timeout_s`` of the end of the user's audio is a failure that names the
last message the agent sent.

Media the agent sent before the turn's first frame (a greeting on connect) is not this turn's
reply: it is counted (``pre_turn_media``) and ignored.
"""

from __future__ import annotations

import base64
import binascii
from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from voicelat.audio.mulaw import mulaw_to_pcm16, pcm16_to_mulaw
from voicelat.core.base.secrets import excerpt
from voicelat.core.measure.events import Audio, Done, Failed, Interrupted, StageEvent
from voicelat.stages.protocols.base import Send, WsProtocol, json_object, json_text

__all__ = ["FRAME_MS", "RATE", "TwilioProtocol"]

#: Twilio Media Streams carries 8 kHz mu-law, mono, one byte per sample.
RATE = 8000
FRAME_MS = 20
NS_PER_MS = 1_000_000
_NS_PER_S = 1_000_000_000


class TwilioProtocol(WsProtocol[bytes]):
    """One call (one turn): what to send for each 20 ms PCM16 frame, what each message means."""

    awaiting: ClassVar[str] = "the end of the agent's reply"
    #: The driver calls :meth:`tick` at least this often (the protocol's own deadlines).
    tick_s: ClassVar[float | None] = 0.02

    def __init__(
        self,
        url: str,
        *,
        stream_sid: str,
        call_sid: str,
        account_sid: str = "AC00000000000000000000000000000000",
        reply_idle_ms: int = 1200,
        answer_timeout_s: float = 15.0,
        end_mark: str | None = None,
    ) -> None:
        super().__init__(url)
        self.stream_sid, self.call_sid, self.account_sid = stream_sid, call_sid, account_sid
        self.reply_idle_ns = reply_idle_ms * NS_PER_MS
        self.answer_timeout_ns = int(answer_timeout_s * _NS_PER_S)
        self.end_mark = end_mark
        self._seq = 0
        self._chunk = 0
        #: When the turn's first frame went out (set by the stage right before it), and when
        #: the user's audio (fixture + tail) ended: after it only the line's silence flows.
        self.started_ns: int | None = None
        self.user_ended_ns: int | None = None
        self.pre_turn_media = 0
        self._first_media_ns: int | None = None
        self._last_media_ns: int | None = None
        #: The reply's playback timeline: when its audio queued so far will have played.
        self._play_end_ns: int | None = None
        #: Marks the agent sent, with when the audio before them ends playing.
        self._marks: deque[tuple[str, int]] = deque()
        self._outbox: deque[str] = deque()
        self._end_at: int | None = None
        self._last_seen = "none since the call started"

    # -- what voicelat sends ---------------------------------------------------------------
    def _next_seq(self) -> str:
        self._seq += 1
        return str(self._seq)  # Twilio sends its counters as strings

    def connected(self) -> str:
        """The first message of a stream."""
        return json_text({"event": "connected", "protocol": "Call", "version": "1.0.0"})

    def start(self, custom_parameters: Mapping[str, str]) -> str:
        """The ``start`` message: who is calling, and the media format."""
        return json_text(
            {
                "event": "start",
                "sequenceNumber": self._next_seq(),
                "start": {
                    "accountSid": self.account_sid,
                    "streamSid": self.stream_sid,
                    "callSid": self.call_sid,
                    "tracks": ["inbound"],
                    "customParameters": dict(custom_parameters),
                    "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": RATE, "channels": 1},
                },
                "streamSid": self.stream_sid,
            }
        )

    def stop(self) -> str:
        """The last message of a stream (the call hung up)."""
        return json_text(
            {
                "event": "stop",
                "sequenceNumber": self._next_seq(),
                "streamSid": self.stream_sid,
                "stop": {"accountSid": self.account_sid, "callSid": self.call_sid},
            }
        )

    def media(self, pcm16: bytes) -> str:
        """One ``media`` message: a frame of PCM16 at 8 kHz as base64 mu-law."""
        self._chunk += 1
        timestamp = (self._chunk - 1) * FRAME_MS  # ms since the stream started
        return json_text(
            {
                "event": "media",
                "sequenceNumber": self._next_seq(),
                "media": {
                    "track": "inbound",
                    "chunk": str(self._chunk),
                    "timestamp": str(timestamp),
                    "payload": base64.b64encode(pcm16_to_mulaw(pcm16)).decode("ascii"),
                },
                "streamSid": self.stream_sid,
            }
        )

    def _mark_echo(self, name: str) -> str:
        return json_text(
            {
                "event": "mark",
                "sequenceNumber": self._next_seq(),
                "streamSid": self.stream_sid,
                "mark": {"name": name},
            }
        )

    def send_input(self, item: bytes) -> Iterator[Send]:
        """The marks now due (echoes), then the frame."""
        while self._outbox:
            yield Send(self._outbox.popleft())
        yield Send(self.media(item))

    # -- what the agent sends ---------------------------------------------------------------
    def receive(self, message: str | bytes, t_ns: int) -> list[StageEvent]:
        if isinstance(message, bytes):
            return [
                self._failed(
                    t_ns,
                    f"the agent sent a binary websocket message ({len(message)} bytes): Twilio "
                    "Media Streams carries base64 audio/x-mulaw in JSON text messages (is this "
                    "a Twilio endpoint?)",
                )
            ]
        data = json_object(message)
        event = data.get("event") if data is not None else None
        if data is None or not isinstance(event, str):
            return [self._failed(t_ns, f"not a Media Streams message: {excerpt(message, 80, quoted=True)}")]
        self._last_seen = f"{event!r} at +{self._since(t_ns)}"
        if event == "media":
            events = self._media(data, t_ns)
        elif event == "mark":
            events = self._mark(data, t_ns)
        elif event == "clear":
            events = self._clear(t_ns)
        else:
            events = []  # nothing else a server sends Twilio changes the reply
        return [*events, *self.tick(t_ns)]

    def _since(self, t_ns: int) -> str:
        start = self.started_ns
        return "?" if start is None else f"{(t_ns - start) // NS_PER_MS} ms"

    def _media(self, data: dict[str, Any], t_ns: int) -> list[StageEvent]:
        media = data.get("media")
        payload = media.get("payload") if isinstance(media, dict) else None
        if not isinstance(payload, str):
            return [self._failed(t_ns, "a media message without media.payload")]
        try:
            ulaw = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            return [self._failed(t_ns, "a media payload that is not base64 (audio/x-mulaw)")]
        if self.started_ns is None or t_ns < self.started_ns:
            self.pre_turn_media += 1
            return []
        if not ulaw:
            return []
        if self._first_media_ns is None:
            self._first_media_ns = t_ns
        self._last_media_ns = t_ns
        # Played in real time from its arrival, or after the audio queued before it.
        start = t_ns if self._play_end_ns is None else max(self._play_end_ns, t_ns)
        self._play_end_ns = start + len(ulaw) * _NS_PER_S // RATE
        return [Audio(t_ns, mulaw_to_pcm16(ulaw), RATE)]

    def _mark(self, data: dict[str, Any], t_ns: int) -> list[StageEvent]:
        mark = data.get("mark")
        name = mark.get("name") if isinstance(mark, dict) else None
        if not isinstance(name, str):
            return [self._failed(t_ns, "a mark message without mark.name")]
        due = t_ns if self._play_end_ns is None else max(t_ns, self._play_end_ns)
        self._marks.append((name, due))
        if self.end_mark is not None and name == self.end_mark and self._first_media_ns:
            self._end_at = due
        return []

    def _clear(self, t_ns: int) -> list[StageEvent]:
        # Twilio empties its buffer and echoes every mark still pending straight away. Only a
        # clear that dropped audio still to play interrupted anything: Pipecat sends one each
        # time the user starts speaking, reply or not.
        dropped = self._play_end_ns is not None and self._play_end_ns > t_ns
        if self._play_end_ns is not None:
            self._play_end_ns = t_ns
        while self._marks:
            self._outbox.append(self._mark_echo(self._marks.popleft()[0]))
        return [Interrupted(t_ns)] if dropped else []

    def next_turn(self) -> None:
        """The call goes on with another turn on the same stream: the reply's state starts
        afresh (what arrives before its first frame is not its reply); marks still pending and
        the playback timeline carry over."""
        self.finished = False
        self.started_ns = self.user_ended_ns = None
        self._first_media_ns = self._last_media_ns = None
        self._end_at = None

    # -- time passing -----------------------------------------------------------------------
    def user_audio_ended(self, t_ns: int) -> None:
        """The fixture and its silence tail have gone out; the line's silence follows."""
        self.user_ended_ns = t_ns

    def tick(self, now_ns: int) -> list[StageEvent]:
        """Deadlines due by ``now_ns``: mark echoes, the reply's end, no answer at all."""
        while self._marks and self._marks[0][1] <= now_ns:
            self._outbox.append(self._mark_echo(self._marks.popleft()[0]))
        if self.finished:
            return []
        last = self._last_media_ns
        if self._end_at is not None and self._end_at <= now_ns and last is not None:
            return [self._done(last)]
        if last is not None and now_ns - last >= self.reply_idle_ns:
            return [self._done(last)]
        ended = self.user_ended_ns
        if last is None and ended is not None and now_ns - ended >= self.answer_timeout_ns:
            return [
                Failed(
                    now_ns,
                    f"{self.url}: no reply audio within {self.answer_timeout_ns / _NS_PER_S:g} s "
                    f"of the end of the user's audio (last message from the agent: "
                    f"{self._last_seen})",
                )
            ]
        return []

    def _done(self, t_ns: int) -> Done:
        self.finished = True
        return Done(t_ns, "reply_idle" if self._end_at is None else "end_mark")
