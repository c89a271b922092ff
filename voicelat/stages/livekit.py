"""A LiveKit Agents ``AgentSession`` hosted without a LiveKit server, over its audio bridge: ``livekit``.

LiveKit's agents normally hear and speak through a room (WebRTC through a LiveKit server). An
``AgentSession`` also runs with no room when its ``session.input.audio`` and
``session.output.audio`` are given: a host process bridges them to a websocket
(:mod:`voicelat.stages.protocols.livekit` has the wire format; examples/livekit-agent/agent.py is
such a host, a fresh session per connection). voicelat is the bridge's client: each turn is one
call (a fresh websocket, opened before the turn, after the host's ``ready``: the session's
start-up never counts), the user's 20 ms PCM frames go out as the pacer hands them over, then
silence for as long as the call lasts (LiveKit's VAD endpoints itself); the reply's frames are
``Audio`` stamped when their bytes arrived, LiveKit's ``user_state_changed`` is
``ServerSpeech``, and the reply is over at the host's ``playback_finished`` (or after
``reply_idle_ms`` without sound).

With ``traces = "livekit"`` the session's OTLP spans (LiveKit's ``agent_turn`` > ``llm_node`` /
``tts_node`` / ``agent_speaking``, the ``user_turn`` beside it) split the turn through the same
mapping as ``voicelat import --mapping livekit`` (:mod:`voicelat.core.traces.livekit_trace`), on
voicelat's clock; ``call_id_param`` gives the call an id the host puts on its spans as
``conversation.id``, so calls at once are told apart.

Nothing here imports livekit: the host is the user's process, not voicelat's.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, ClassVar

from voicelat.core.base.errors import StageError
from voicelat.stages._ws import WsConn, plain_url
from voicelat.stages.options import OptionProblem
from voicelat.stages.pipecat_ws import PipecatWs, PipecatWsOptions
from voicelat.stages.protocols.livekit import LiveKitBridgeProtocol, ready_rates
from voicelat.stages.protocols.pipecat_ws import ReplyWatch

__all__ = ["LiveKit", "LiveKitOptions"]


@dataclass(frozen=True, kw_only=True)
class LiveKitOptions(PipecatWsOptions):
    """``[agent]`` of ``livekit``: the websocket agent options (``url``, ``input_rate``,
    ``output_rate``, ``reply_idle_ms``, ``answer_timeout_s``, ``timeout_s``, ``origin``,
    ``api_key_env``, ``call_id_param``); ``ready_timeout_s`` is the wait for the host's
    ``ready``. The bridge has no RTVI and sends only audio the session gave it."""

    url: str = "ws://127.0.0.1:7880/ws"
    #: OpenAI's TTS (and the example's) speaks 24 kHz; the host's ``ready`` must say the same.
    output_rate: int = 24000
    rtvi: bool = False
    #: The host's ``ready`` (its ``session.start(agent)`` returned) within this, before the turn.
    ready_timeout_s: float = 20.0

    def check(self) -> None:
        super().check()
        if self.rtvi:
            raise OptionProblem("rtvi", "the LiveKit bridge speaks no RTVI: leave rtvi out")
        if self.streams_silence:
            raise OptionProblem(
                "streams_silence",
                "the LiveKit bridge sends only the session's audio: leave streams_silence out",
            )


class LiveKit(PipecatWs):
    """A LiveKit ``AgentSession`` over its audio bridge (see the module docstring). The call's
    life (a fresh connection per turn, a fresh call id, the line's silence, the reply's end) is
    the websocket agent transport's; the wire and the ``ready`` handshake are the bridge's."""

    stage_name: ClassVar[str] = "livekit"
    options_class: ClassVar[type[PipecatWsOptions]] = LiveKitOptions

    def _line_silence(self, pcm: bytes) -> bytes:
        return pcm  # raw PCM16LE: no framing

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._key}"} if self._key else {}

    async def _on_open(self, conn: WsConn) -> None:
        """The host's ``ready``: its session started (a host builds one per connection)."""
        o = self.options
        try:
            async with asyncio.timeout(o.ready_timeout_s):
                while True:
                    message, _ = await conn.recv()
                    rates = ready_rates(message)
                    if rates is not None:
                        break
        except TimeoutError:
            raise StageError(
                f"no ready message from the LiveKit host at {plain_url(conn.url)} within "
                f"{o.ready_timeout_s:g} s (its AgentSession did not start)"
            ) from None
        if rates != (o.input_rate, o.output_rate):
            raise StageError(
                f"the LiveKit host takes {rates[0]} Hz and sends {rates[1]} Hz, [agent] says "
                f"input_rate = {o.input_rate}, output_rate = {o.output_rate}: make them agree"
            )

    def _protocol(self, url: str, watch: ReplyWatch) -> LiveKitBridgeProtocol:
        return LiveKitBridgeProtocol(
            url, input_rate=self.input_rate, output_rate=self.output_rate, watch=watch
        )

    def describe(self) -> dict[str, Any]:
        o = self.options
        return {
            "stage": self.stage_name,
            "url": plain_url(o.url),
            "input_rate": o.input_rate,
            "output_rate": o.output_rate,
            "reply_idle_ms": o.reply_idle_ms,
            "server": self._server,
        }
