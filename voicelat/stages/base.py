"""Stage contracts and the registry that finds providers through the ``voicelat.stages`` entry points.

A stage is an async context manager (connect and warm up in ``__aenter__``, so handshakes are
visible on their own and never hide inside the first turn) that reports stamped facts as
:mod:`voicelat.core.events`. Stages never aggregate and never decide what counts as "first".
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from importlib.metadata import entry_points
from typing import Any, ClassVar, Protocol, Self, runtime_checkable

from voicelat.core.errors import ConfigError, StageError
from voicelat.core.events import StageEvent, StageName

ENTRY_POINT_GROUP = "voicelat.stages"


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
    """Transcript in, streamed deltas out."""

    def complete(self, text: str) -> AsyncIterator[StageEvent]: ...


class TTSStage(Stage, Protocol):
    """Streamed text in, audio out."""

    def synthesize(self, text: AsyncIterable[str]) -> AsyncIterator[StageEvent]: ...


def available_stages() -> dict[str, Any]:
    """Every registered stage class by name (entry point group ``voicelat.stages``)."""
    found: dict[str, Any] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep)
    return found


def load_stage_class(name: str, kind: StageName) -> type[Any]:
    """The class registered as ``name``; a clear error lists the known ones of this kind."""
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


class Options:
    """Typed access to a stage's table of the pipeline file, with errors that name the key."""

    def __init__(self, table: str, values: Mapping[str, Any], allowed: set[str]) -> None:
        self.table = table
        self.values = dict(values)
        unknown = sorted(set(self.values) - allowed - {"stage"})
        if unknown:
            raise ConfigError(
                f"[{table}] has unknown key(s) {', '.join(unknown)}; "
                f"valid keys: {', '.join(sorted(allowed))}"
            )

    def text(self, key: str, default: str | None = None) -> str:
        v = self.values.get(key, default)
        if v is None:
            raise ConfigError(f"[{self.table}] needs {key!r}")
        if not isinstance(v, str):
            raise ConfigError(f"[{self.table}] {key} must be a string, got {v!r}")
        return v

    def opt_text(self, key: str) -> str | None:
        v = self.values.get(key)
        if v is not None and not isinstance(v, str):
            raise ConfigError(f"[{self.table}] {key} must be a string, got {v!r}")
        return v

    def integer(self, key: str, default: int) -> int:
        v = self.values.get(key, default)
        if isinstance(v, bool) or not isinstance(v, int):
            raise ConfigError(f"[{self.table}] {key} must be an integer, got {v!r}")
        return v

    def number(self, key: str, default: float) -> float:
        v = self.values.get(key, default)
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ConfigError(f"[{self.table}] {key} must be a number, got {v!r}")
        return float(v)

    def flag(self, key: str, default: bool) -> bool:
        v = self.values.get(key, default)
        if not isinstance(v, bool):
            raise ConfigError(f"[{self.table}] {key} must be true or false, got {v!r}")
        return v

    def text_list(self, key: str, default: list[str]) -> list[str]:
        v = self.values.get(key, default)
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise ConfigError(f"[{self.table}] {key} must be a list of strings, got {v!r}")
        return list(v)

    def secret(self, key: str = "api_key_env") -> str | None:
        """The value of the environment variable the pipeline names (never the key itself)."""
        var = self.opt_text(key)
        if var is None:
            return None
        value = os.environ.get(var)
        if not value:
            raise StageError(
                f"[{self.table}] reads its API key from ${var}, which is not set: export {var}=..."
            )
        return value
