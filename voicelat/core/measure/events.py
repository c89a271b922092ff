"""Facts a stage reports, each stamped on the measuring clock by the code that observed it.

Stages report what arrived and when; they never decide what counts as "first" and never aggregate.
The :class:`~voicelat.core.measure.recorder.TurnRecorder` derives milestones from these facts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from voicelat.core.base.secrets import scrub_secrets

#: ``s2s`` is a realtime speech-to-speech model (one stage for the whole turn), ``agent`` a
#: running voice agent seen from outside (also one stage); the cascade is :data:`STAGES`.
StageName = Literal["stt", "llm", "tts", "s2s", "agent"]
STAGES: tuple[StageName, ...] = ("stt", "llm", "tts")


@dataclass(frozen=True, slots=True)
class Connected:
    """A stage has a connection for this request; ``cold`` when it is new where the protocol reuses one."""

    t_ns: int
    cold: bool
    new_connection: bool = True


@dataclass(frozen=True, slots=True)
class Span:
    """A network phase: connect, tls, handshake, request_sent, response_headers (TTFB), pool_wait."""

    name: str
    start_ns: int
    end_ns: int


@dataclass(frozen=True, slots=True)
class RequestSent:
    """The request (LLM prompt, STT end of audio, first TTS text) was handed to the transport."""

    t_ns: int
    what: str = "request"


@dataclass(frozen=True, slots=True)
class TextSent:
    """A piece of text was written to a TTS transport."""

    t_ns: int
    text: str


@dataclass(frozen=True, slots=True)
class Partial:
    """An interim transcript (may be empty; the recorder looks for the first non-empty one)."""

    t_ns: int
    text: str


@dataclass(frozen=True, slots=True)
class Final:
    """A transcript the STT server will not revise."""

    t_ns: int
    text: str


@dataclass(frozen=True, slots=True)
class EndOfTurn:
    """The STT provider's own end-of-turn signal."""

    t_ns: int


@dataclass(frozen=True, slots=True)
class Delta:
    """One streamed LLM event: content text and/or reasoning text (either may be empty)."""

    t_ns: int
    content: str = ""
    reasoning: str = ""


@dataclass(frozen=True, slots=True)
class Audio:
    """A piece of decoded audio: 16-bit little-endian mono PCM at ``rate`` (headers already stripped)."""

    t_ns: int
    pcm: bytes
    rate: int

    @property
    def n_samples(self) -> int:
        return len(self.pcm) // 2


@dataclass(frozen=True, slots=True)
class Done:
    """The stage's stream ended cleanly."""

    t_ns: int
    finish_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Failed:
    """The stage failed; ``reason`` is one line a person can act on."""

    t_ns: int
    reason: str

    def __post_init__(self) -> None:
        # Every failure reason passes here: a key a server echoed never reaches a report.
        object.__setattr__(self, "reason", scrub_secrets(self.reason))


@dataclass(frozen=True, slots=True)
class ServerTiming:
    """Timings the server reported about itself (e.g. llama.cpp ``timings``), kept for cross-checks."""

    t_ns: int
    values: dict[str, float]


@dataclass(frozen=True, slots=True)
class ProviderTiming:
    """What the provider says it spent on this request, on its own clock (ms).

    ``source`` names the field (``openai-processing-ms``, ``llama.timings``, ...). The report
    arrived at ``t_ns``, which also ends the measured span it is compared with; the span
    starts at ``start_ns``, or (None: a websocket parser does not know when its request left)
    at the stage's first ``RequestSent``/``TextSent`` (core/measure/provider_clock.py).
    """

    t_ns: int
    source: str
    provider_ms: float
    start_ns: int | None = None


@dataclass(frozen=True, slots=True)
class ServerSpeech:
    """A speech-to-speech server's own VAD saw the user's speech start (``started``) or stop.

    ``audio_ms`` is the server's offset of that point in the audio it was sent this session
    (OpenAI ``audio_start_ms`` / ``audio_end_ms``), when it says.
    """

    t_ns: int
    started: bool
    audio_ms: int | None = None


@dataclass(frozen=True, slots=True)
class ResponseStarted:
    """A speech-to-speech server opened its response (OpenAI ``response.created``)."""

    t_ns: int
    response_id: str = ""


@dataclass(frozen=True, slots=True)
class Interrupted:
    """The server dropped its reply because the user talked over it (barge-in)."""

    t_ns: int


StageEvent = (
    Connected
    | Span
    | RequestSent
    | TextSent
    | Partial
    | Final
    | EndOfTurn
    | Delta
    | Audio
    | Done
    | Failed
    | ServerTiming
    | ProviderTiming
    | ServerSpeech
    | ResponseStarted
    | Interrupted
)
