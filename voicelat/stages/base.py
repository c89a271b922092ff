"""Stage contracts and the registry that finds providers through the ``voicelat.stages`` entry points.

A stage is an async context manager (connect and warm up in ``__aenter__``, so handshakes are
visible on their own and never hide inside the first turn) that reports stamped facts as
:mod:`voicelat.core.measure.events`. Stages never aggregate and never decide what counts as "first".

Every shipped stage has an attribute ``clock`` (a :class:`~voicelat.core.measure.clock.Clock`,
:data:`MONOTONIC` unless set): the engine may replace it before ``__aenter__``, and the stage
takes every stamp from it, as the first statement after the ``await`` that delivered the data.
Its options are a frozen dataclass parsed by :func:`voicelat.stages.options.parse_options`.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterable, AsyncIterator
from importlib.metadata import entry_points
from typing import Any, ClassVar, Protocol, Self, runtime_checkable

from voicelat.core.base.errors import ConfigError
from voicelat.core.base.secrets import register_environment_secrets
from voicelat.core.measure.clock import Clock, MonotonicClock
from voicelat.core.measure.events import StageEvent, StageName

ENTRY_POINT_GROUP = "voicelat.stages"

#: The clock every stage stamps on unless the engine hands it another (a fake one in tests).
MONOTONIC: Clock = MonotonicClock()


@runtime_checkable
class Stage(Protocol):
    """What every stage has: its kind, a name for reports, and a connection lifecycle."""

    kind: ClassVar[StageName]

    async def __aenter__(self) -> Self: ...

    async def __aexit__(self, *exc: object) -> None: ...

    def describe(self) -> dict[str, Any]:
        """Provider, endpoint, model/voice and server version, for the results metadata."""
        ...

    async def prepare(self) -> None:
        """Keep connections warm: STT's is called as a turn starts, LLM's and TTS's at the
        endpoint, shortly before they are needed (never inside a measured request)."""
        ...


class STTStage(Stage, Protocol):
    """Speech in, transcript events out. ``audio`` ends at the endpoint."""

    input_rate: int

    def transcribe(self, audio: AsyncIterable[bytes]) -> AsyncIterator[StageEvent]: ...


class LLMStage(Stage, Protocol):
    """Transcript in, streamed deltas out. In a call the engine hands a
    :class:`~voicelat.core.calls.conversation.Conversation` instead (the call's messages so far; its
    ``str()`` is the transcript): a stage that keeps no history may just use ``str(text)``."""

    def complete(self, text: Any) -> AsyncIterator[StageEvent]: ...


class TTSStage(Stage, Protocol):
    """Streamed text in, audio out."""

    def synthesize(self, text: AsyncIterable[str]) -> AsyncIterator[StageEvent]: ...


class S2SStage(Stage, Protocol):
    """A realtime speech-to-speech model: the user's audio in, the reply's events out.

    ``converse`` gets the turn's audio at ``input_rate`` (the pacer's 20 ms frames, then
    silence, in real time) and yields stamped events: the server's VAD (``ServerSpeech``),
    ``EndOfTurn`` or the ``RequestSent("commit")`` of a client-side endpoint, the response
    opening (``ResponseStarted``), the reply's transcript (``Delta``), its audio (``Audio`` at
    ``output_rate``) and ``Done`` (with usage) or ``Failed``. ``endpoint_by_server`` says who
    ends the user's turn: True, the server's VAD (the engine keeps sending silence until it
    does); False, voicelat (the engine's endpointer ends the audio and the stage commits).
    """

    input_rate: int
    output_rate: int
    endpoint_by_server: bool

    def converse(self, audio: AsyncIterable[bytes]) -> AsyncIterator[StageEvent]: ...


class AgentStage(Stage, Protocol):
    """A running voice agent reached over its own transport (Twilio Media Streams, Pipecat's
    websocket, SmallWebRTC): the user's audio in, the reply's events out (docs/AGENTS.md).

    The S2SStage shape, with ``kind = "agent"``. One ``converse`` is one call (a fresh
    connection per turn). ``audio`` is the pacer's 20 ms frames at ``input_rate`` in real time,
    then silence; ``endpoint_by_server`` is always True (the agent endpoints itself; voicelat
    keeps the line open with silence, as a phone line does). It yields optionally
    ``ResponseStarted``, the reply's ``Audio`` (PCM16 mono at ``output_rate``, each stamped as
    the first statement after the await that delivered its bytes), ``Interrupted`` (the agent
    dropped its queued audio), and ends the turn with ``Done`` (the reply is over: the
    transport's end mark, else ``reply_idle_ms`` without reply audio) or ``Failed(reason)``.
    """

    input_rate: int
    output_rate: int
    endpoint_by_server: bool

    def converse(self, audio: AsyncIterable[bytes]) -> AsyncIterator[StageEvent]: ...


def use_clock(stage: object, clock: Clock) -> bool:
    """Hand ``stage`` the clock to stamp on (before ``__aenter__``); False for a stage that
    has no ``clock`` attribute (a third-party stage stamping on its own), which is left as
    it is."""
    if not hasattr(stage, "clock"):
        return False
    stage.clock = clock
    return True


def available_stages() -> dict[str, Any]:
    """Every registered stage class by name (entry point group ``voicelat.stages``)."""
    found: dict[str, Any] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep)
    return found


def load_stage_class(name: str, kind: StageName) -> type[Any]:
    """The class registered as ``name``; a clear error lists the known ones of this kind.

    Every stage is built after this call (in a worker process too): the environment's
    credentials are registered with the scrubber here, before any server can answer.
    """
    register_environment_secrets(os.environ)
    eps = available_stages()
    if name not in eps:
        known = sorted(n for n, ep in eps.items() if _kind_of(ep) in (kind, None))
        raise ConfigError(
            f"unknown {kind} stage {name!r}; known {kind} stages: {', '.join(known) or 'none'}"
        )
    cls = eps[name].load()
    if getattr(cls, "kind", None) != kind:
        raise ConfigError(
            f"stage {name!r} is a {getattr(cls, 'kind', '?')} stage, not a {kind} stage"
        )
    return cls  # type: ignore[no-any-return]


def _kind_of(ep: Any) -> str | None:
    try:
        return getattr(ep.load(), "kind", None)
    except Exception:
        return None
