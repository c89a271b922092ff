"""The stage triple as one typed object: a pipeline's STT, LLM and TTS stages together."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Self, cast

from voicelat.core.clock import Clock
from voicelat.files.pipeline import Pipeline
from voicelat.stages.base import (
    AgentStage,
    LLMStage,
    S2SStage,
    STTStage,
    TTSStage,
    load_stage_class,
    use_clock,
)


@dataclass(frozen=True, eq=False)
class StageSet:
    """One session's STT, LLM and TTS stages (so its own connections).

    An async context manager: ``async with stages:`` enters (connects, warms up) the three in
    order and exits them in reverse; a stage that fails to enter closes the ones before it.
    """

    stt: STTStage
    llm: LLMStage
    tts: TTSStage
    _exit: AsyncExitStack = field(default_factory=AsyncExitStack, init=False, repr=False)

    @classmethod
    def from_pipeline(cls, pipeline: Pipeline) -> StageSet:
        """Construct (but do not connect) ``pipeline``'s stages; config errors surface here."""
        p = pipeline
        if p.s2s is not None:
            return S2SStageSet.single(load_stage_class(p.s2s["stage"], "s2s")(p.s2s))
        if p.agent is not None:
            return AgentStageSet.agent_of(load_stage_class(p.agent["stage"], "agent")(p.agent))
        return cls(
            load_stage_class(p.stt["stage"], "stt")(p.stt),
            load_stage_class(p.llm["stage"], "llm")(p.llm),
            load_stage_class(p.tts["stage"], "tts")(p.tts),
        )

    @classmethod
    def of(cls, stages: StageSet | tuple[Any, Any, Any] | list[Any]) -> StageSet:
        """``stages`` as a StageSet (a plain ``(stt, llm, tts)`` triple is accepted)."""
        if isinstance(stages, StageSet):
            return stages
        stt, llm, tts = stages
        return cls(stt, llm, tts)

    def __iter__(self) -> Iterator[Any]:
        """``stt, llm, tts = stages``."""
        return iter((self.stt, self.llm, self.tts))

    def items(self) -> list[tuple[str, Any]]:
        """``[("stt", stt), ("llm", llm), ("tts", tts)]``."""
        return [("stt", self.stt), ("llm", self.llm), ("tts", self.tts)]

    def use_clock(self, clock: Clock) -> Self:
        """Make every stage that has a ``clock`` attribute stamp on ``clock`` (call before
        entering; a third-party stage without one keeps its own stamps). Returns ``self``."""
        for _, stage in self.items():
            use_clock(stage, clock)
        return self

    def describe(self) -> dict[str, dict[str, Any]]:
        """Each stage's ``describe()``, keyed ``stt``, ``llm``, ``tts`` (the summary's ``stages``)."""
        return {name: stage.describe() for name, stage in self.items()}

    @property
    def input_rate(self) -> int:
        """The sample rate the STT stage takes its audio at."""
        return int(self.stt.input_rate)

    async def __aenter__(self) -> Self:
        try:
            for _, stage in self.items():
                await self._exit.enter_async_context(stage)
        except BaseException:
            await self._exit.aclose()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._exit.aclose()

    async def aclose(self) -> None:
        """Exit the stages entered so far (what ``__aexit__`` does)."""
        await self._exit.aclose()


@dataclass(frozen=True, eq=False)
class S2SStageSet(StageSet):
    """A speech-to-speech pipeline's one stage, where the engine and the runner expect a
    :class:`StageSet`.

    ``stt``, ``llm`` and ``tts`` all hold the S2S stage, so what is written for the triple
    (``prepare()``, ``input_rate``) reaches it; :meth:`items` lists it once, as ``s2s``, so it
    is entered, clocked and described once.
    """

    s2s: S2SStage = field(kw_only=True)

    @classmethod
    def single(cls, stage: S2SStage) -> S2SStageSet:
        """The set of one S2S stage (not connected yet)."""
        same = cast(Any, stage)
        return cls(same, same, same, s2s=stage)

    def items(self) -> list[tuple[str, Any]]:
        """``[("s2s", stage)]``."""
        return [("s2s", self.s2s)]

    @property
    def input_rate(self) -> int:
        """The sample rate the S2S stage takes the user's audio at."""
        return int(self.s2s.input_rate)


@dataclass(frozen=True, eq=False)
class AgentStageSet(S2SStageSet):
    """A black-box agent pipeline's one transport stage (an :class:`S2SStageSet`, so the S2S
    turn machinery runs it); :meth:`items` lists it as ``agent``."""

    @classmethod
    def agent_of(cls, stage: AgentStage) -> AgentStageSet:
        """The set of one agent stage (not connected yet)."""
        same = cast(Any, stage)
        return cls(same, same, same, s2s=same)

    @property
    def agent(self) -> AgentStage:
        """The agent's transport stage."""
        return self.s2s  # the same shape as an S2S stage (structural)

    def items(self) -> list[tuple[str, Any]]:
        """``[("agent", stage)]``."""
        return [("agent", self.s2s)]


__all__ = ["AgentStageSet", "S2SStageSet", "StageSet"]
