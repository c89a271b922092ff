"""The audio bridge of a LiveKit ``AgentSession`` hosted without a LiveKit server, sans-I/O.

LiveKit Agents (1.8) lets an ``AgentSession`` run with no room: ``session.input.audio`` and
``session.output.audio`` are any ``AudioInput`` / ``AudioOutput``. A host that bridges the two to a
websocket (examples/livekit-agent/agent.py is one) speaks this wire format, which voicelat's
``livekit`` stage is the client of:

* **open**: ``GET <url>?conversation_id=<id>`` upgraded to a websocket; the host builds a fresh
  ``AgentSession`` for the connection and, once ``session.start(agent)`` returned, sends the text
  message ``{"type": "ready", "input_rate": 16000, "output_rate": 24000}`` (the rates its input
  expects and its output sends). Nothing is timed before it.
* **client -> host**: binary messages, PCM16LE mono at ``input_rate``: the caller's 20 ms frames
  (the session's ``AudioInput`` yields each as one ``rtc.AudioFrame``), then the line's silence.
* **host -> client**: binary messages, PCM16LE mono at ``output_rate``: each frame the session's
  ``AudioOutput.capture_frame`` was given, sent as it was given (the host reports
  ``on_playback_started`` on a segment's first frame, as LiveKit's RoomIO does when it pushes
  the frame to the track). Text messages (JSON objects, ``type``):

  - ``user_state`` (``state``: ``speaking`` / ``listening`` / ``away``): LiveKit's
    ``user_state_changed``, its VAD as seen from outside (``ServerSpeech``);
  - ``playback_finished`` (``interrupted``, ``position`` s): the segment has played out (the host
    paces its output in real time) and LiveKit has taken it so (its agent state left
    ``speaking``): the reply is over (``Done``; the caller then hangs up, which must not cut
    the reply LiveKit is still closing);
  - ``clear``: ``AudioOutput.clear_buffer`` (LiveKit dropped the rest of the reply: a barge-in,
    ``Interrupted`` when reply audio had come);
  - ``error`` (``message``): the host failed the call (``Failed``).

  Other types are ignored (a host may say more).

The reply is over at ``playback_finished`` after reply audio, else after ``reply_idle_ms`` without
sound (:class:`~voicelat.stages.protocols.pipecat_ws.ReplyWatch`, shared by every agent transport).
"""

from __future__ import annotations

from collections.abc import Iterator

from voicelat.core.base import jsontext
from voicelat.core.measure.events import Audio, Failed, Interrupted, ServerSpeech, StageEvent
from voicelat.stages.protocols.base import Send
from voicelat.stages.protocols.pipecat_ws import PipecatWsProtocol

__all__ = ["LiveKitBridgeProtocol", "ready_rates"]


def ready_rates(message: str | bytes) -> tuple[int, int] | None:
    """``(input_rate, output_rate)`` of the host's ``ready`` message; None for anything else."""
    if not isinstance(message, str):
        return None
    try:
        msg = jsontext.loads(message)
    except ValueError:
        return None
    if not isinstance(msg, dict) or msg.get("type") != "ready":
        return None
    rates = msg.get("input_rate"), msg.get("output_rate")
    if not all(isinstance(r, int) and not isinstance(r, bool) and r > 0 for r in rates):
        return None
    return int(rates[0]), int(rates[1])  # type: ignore[arg-type]


class LiveKitBridgeProtocol(PipecatWsProtocol):
    """One user turn and the session's reply over the bridge (see the module docstring): the
    reply's bookkeeping (:class:`ReplyWatch`, the idle end, the stall) is every agent
    transport's, the wire is the bridge's."""

    def send_input(self, item: bytes) -> Iterator[Send]:
        if item:
            yield Send(item)  # raw PCM16LE at input_rate, one binary message a frame

    def receive(self, message: str | bytes, t_ns: int) -> list[StageEvent]:
        if isinstance(message, bytes):
            self.last_event = "an audio frame"
            if t_ns < self.turn_start_ns:
                return []
            pcm = message[: len(message) // 2 * 2]
            return [Audio(t, chunk, self.output_rate) for t, chunk in self.watch.audio(pcm, t_ns)]
        try:
            msg = jsontext.loads(message)
        except ValueError:
            msg = None
        if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
            self.last_event = "a malformed text message"
            return [self._failed(t_ns, f"sent a text message that is not a JSON object with a "
                                 f"type: {message[:80]!r} (is this a LiveKit bridge?)")]  # fmt: skip
        kind = msg["type"]
        self.last_event = kind
        if kind == "user_state":
            state = msg.get("state")
            if state == "speaking":
                return [ServerSpeech(t_ns, True)]
            return [ServerSpeech(t_ns, False)] if state == "listening" else []
        if kind == "playback_finished" and self.watch.started:
            return [self.done_as(t_ns, "playback-finished")]
        if kind == "clear":
            return [Interrupted(t_ns)] if self.watch.started else []
        if kind == "error":
            return [Failed(t_ns, f"error from {self.url}: {msg.get('message') or 'no message'}")]
        return []
