"""A session's stages as one typed object, tagged with its turn shape (cascade, realtime, agent)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Self, cast

from voicelat.core.measure.clock import Clock
from voicelat.files.pipeline import Pipeline
from voicelat.stages.base import (
    AgentStage,
    LLMStage,
    S2SStage,
    Stage,
    STTStage,
    TTSStage,
    load_stage_class,
    use_clock,
)

#: The turn shape a stage set is for (its tag).
Shape = Literal["cascade", "s2s", "agent"]


@dataclass(frozen=True, eq=False)
class StageSet:
    """One session's stages (so its own connections), tagged with the turn shape they serve:
    :class:`CascadeStageSet` (STT, LLM, TTS), :class:`S2SStageSet` (one realtime model),
    :class:`AgentStageSet` (one agent's transport).

    An async context manager: ``async with stages:`` enters (connects, warms up) its stages in
    order and exits them in reverse; a stage that fails to enter closes the ones before it.
    """

    shape: ClassVar[Shape]
    _exit: AsyncExitStack = field(default_factory=AsyncExitStack, init=False, repr=False)

    @classmethod
    def from_pipeline(cls, pipeline: Pipeline) -> StageSet:
        """Construct (but do not connect) ``pipeline``'s stages; config errors surface here."""
        p = pipeline
        if p.s2s is not None:
            return S2SStageSet(load_stage_class(p.s2s["stage"], "s2s")(p.s2s))
        if p.agent is not None:
            agent = load_stage_class(p.agent["stage"], "agent")(p.agent)
            # A stage whose media takes its own path (WebRTC's UDP) applies the run's profile
            # there; a phone leg (pcmu) is applied to the audio instead (engine/phone_leg.py).
            net = p.network
            if net is not None and net.codec != "pcmu" and hasattr(agent, "media_network"):
                agent.media_network = net
            return AgentStageSet(agent)
        return CascadeStageSet(
            load_stage_class(p.stt["stage"], "stt")(p.stt),
            load_stage_class(p.llm["stage"], "llm")(p.llm),
            load_stage_class(p.tts["stage"], "tts")(p.tts),
        )

    @classmethod
    def of(cls, stages: StageSet | tuple[Any, Any, Any] | list[Any]) -> StageSet:
        """``stages`` as a StageSet (a plain ``(stt, llm, tts)`` triple is a cascade's)."""
        if isinstance(stages, StageSet):
            return stages
        stt, llm, tts = stages
        return CascadeStageSet(stt, llm, tts)

    def items(self) -> list[tuple[str, Any]]:
        """``[(name, stage), ...]`` in the order they are entered."""
        raise NotImplementedError

    @property
    def hearing(self) -> Stage:
        """The stage that hears the user (the STT, the realtime model, the agent)."""
        return cast(Stage, self.items()[0][1])

    def use_clock(self, clock: Clock) -> Self:
        """Make every stage that has a ``clock`` attribute stamp on ``clock`` (call before
        entering; a third-party stage without one keeps its own stamps). Returns ``self``."""
        for _, stage in self.items():
            use_clock(stage, clock)
        return self

    def describe(self) -> dict[str, dict[str, Any]]:
        """Each stage's ``describe()`` by its name (the summary's ``stages``)."""
        return {name: stage.describe() for name, stage in self.items()}

    @property
    def input_rate(self) -> int:
        """The sample rate the hearing stage takes the user's audio at."""
        return int(cast(Any, self.hearing).input_rate)

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

    @classmethod
    def expect(cls, stages: StageSet) -> Self:
        """``stages`` if it is of this shape, else a TypeError naming both shapes."""
        if not isinstance(stages, cls):
            raise TypeError(
                f"a {cls.shape} turn needs a {cls.__name__}, not a {type(stages).__name__} "
                f"(the pipeline's [{'s2s' if cls.shape == 's2s' else cls.shape}] shape)"
            )
        return stages


@dataclass(frozen=True, eq=False)
class CascadeStageSet(StageSet):
    """A cascade's STT, LLM and TTS stages (``stt, llm, tts = stages``)."""

    shape: ClassVar[Shape] = "cascade"
    stt: STTStage
    llm: LLMStage
    tts: TTSStage

    def __iter__(self) -> Iterator[Any]:
        """``stt, llm, tts = stages``."""
        return iter((self.stt, self.llm, self.tts))

    def items(self) -> list[tuple[str, Any]]:
        """``[("stt", stt), ("llm", llm), ("tts", tts)]``."""
        return [("stt", self.stt), ("llm", self.llm), ("tts", self.tts)]


@dataclass(frozen=True, eq=False)
class S2SStageSet(StageSet):
    """A speech-to-speech pipeline's one realtime stage, listed (entered, clocked, described)
    once as ``s2s``."""

    shape: ClassVar[Shape] = "s2s"
    s2s: S2SStage

    @classmethod
    def single(cls, stage: S2SStage) -> S2SStageSet:
        """The set of one S2S stage (not connected yet)."""
        return cls(stage)

    def items(self) -> list[tuple[str, Any]]:
        """``[("s2s", stage)]``."""
        return [("s2s", self.s2s)]


@dataclass(frozen=True, eq=False)
class AgentStageSet(StageSet):
    """A black-box agent pipeline's one transport stage, listed as ``agent``."""

    shape: ClassVar[Shape] = "agent"
    agent: AgentStage

    @classmethod
    def agent_of(cls, stage: AgentStage) -> AgentStageSet:
        """The set of one agent stage (not connected yet)."""
        return cls(stage)

    def items(self) -> list[tuple[str, Any]]:
        """``[("agent", stage)]``."""
        return [("agent", self.agent)]


__all__ = ["AgentStageSet", "CascadeStageSet", "S2SStageSet", "Shape", "StageSet"]
