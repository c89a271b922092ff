"""The turn engine's shell: ONE timeout / cancel / figures wrapper around every turn shape.

A turn has a shape (``engine/shapes.py`` picks it from the pipeline), each its own stage set
type and recorder:

* cascade (``engine/cascade_turn.py``): listen -> endpoint -> STT -> LLM -> chunker -> TTS -> sink;
* realtime (``engine/s2s_turn.py``): the user's audio into one speech-to-speech stream, its
  reply into the sink;
* agent (``engine/agent_turn.py``): the same through a running agent's transport, then its trace.

:class:`TurnEngine` is what they share: the recorder, re-warming the hearing stage, the turn's
timeout, cancelling the body (a signal, a barge-in through the ``hold`` hook), the loop-lag and
schedule-lag figures. Each shape provides :meth:`TurnEngine.body`; the fixture runner, the load
shapes, live sessions, calls and ``voicelat compare`` all run their turns through :meth:`run`
(or :meth:`measure`, to add figures before the turn is finished).

Every stamp goes through the engine's clock (``TurnEngine.clock``), which also drives the
pacer, the simulated sink and, through ``StageSet.use_clock``, the stages: a fake or offset
clock moves every milestone of the turn alike. A stamp stays the first statement after the
``await`` that delivered the data.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from voicelat.audio import SimulatedSink
from voicelat.core.base.plan import PlannedTurn
from voicelat.core.base.turn import Turn
from voicelat.core.measure.clock import Clock, MonotonicClock
from voicelat.core.measure.events import StageName
from voicelat.core.measure.recorder import TurnRecorder
from voicelat.core.measure.schedule import schedule_lag_ns
from voicelat.engine.phases import cancel_tasks
from voicelat.engine.phone_leg import PhoneLeg, PhoneSink, PhoneSinks, heard_input, phone_leg
from voicelat.engine.probes import LoopLagProbe
from voicelat.engine.progress import NullObserver, Observer
from voicelat.engine.stageset import StageSet
from voicelat.engine.turn_input import FRAME_MS, FrameSource, Sink, TurnInput
from voicelat.files.pipeline import Pipeline
from voicelat.stages.base import Stage

#: Called with a turn's body task as soon as it starts (live mode cancels it on a barge-in).
Hold = Callable[[asyncio.Task[None]], None]


@dataclass
class TurnEngine:
    """Runs one turn at a time on the measuring loop (see the module docstring).

    ``pipeline`` gives the turn settings (endpointing, chunker, output, timeouts); ``out_dir``
    is where ``output.save_audio`` records replies; ``spin_ns`` is how close to a frame's due
    time the default pacer busy-waits (None: its default, 1 ms; 0: no busy-wait, the runner's
    default unless the pipeline sets ``[turn] busy_wait``).
    """

    pipeline: Pipeline
    clock: Clock = field(default_factory=MonotonicClock)
    observer: Observer = field(default_factory=NullObserver)
    loop_lag: LoopLagProbe | None = None
    out_dir: Path | None = None
    spin_ns: int | None = None
    #: The phone sinks of its turns, until their figures are recorded (engine/phone_leg.py).
    phone_sinks: PhoneSinks = field(default_factory=PhoneSinks, repr=False, compare=False)
    #: What records a turn of this shape.
    recorder_class: ClassVar[type[TurnRecorder]] = TurnRecorder
    #: The stage name a failure of the shape's own stream is recorded under.
    stage_key: ClassVar[StageName] = "tts"

    # -- a whole turn ---------------------------------------------------------------------------
    async def run(
        self,
        planned: PlannedTurn,
        stages: StageSet,
        inp: TurnInput,
        *,
        intended_ns: int | None = None,
        session: int | None = None,
        source: FrameSource | None = None,
        sink: Sink | None = None,
    ) -> Turn:
        """One turn under the pipeline's timeout, from ``source`` into ``sink`` (see
        :meth:`measure`), finished."""
        rec = await self.measure(
            planned, stages, inp, intended_ns=intended_ns, session=session, source=source, sink=sink
        )
        return rec.finish()

    async def measure(
        self,
        planned: PlannedTurn,
        stages: StageSet,
        inp: TurnInput,
        *,
        intended_ns: int | None = None,
        session: int | None = None,
        source: FrameSource | None = None,
        sink: Sink | None = None,
        rec: TurnRecorder | None = None,
        hold: Hold | None = None,
        scheduled: bool = True,
        body: Coroutine[Any, Any, None] | None = None,
    ) -> TurnRecorder:
        """One turn, recorded but not finished (the caller may add figures). ``intended_ns``:
        when it was meant to start (an open-loop arrival); by default now, i.e. the moment its
        session was free (a closed loop). The actual start is the first sample of its input
        audio (``t0_ns``); the difference is its schedule lag. ``rec``: a recorder the caller
        made (:meth:`recorder`); ``hold``: handed the body task (see :data:`Hold`);
        ``scheduled``: False for a turn nobody scheduled (live input starts when the user
        speaks), which has no schedule lag; ``body``: the turn's body instead of the shape's
        :meth:`body` (a call's turn, which carries the call's conversation), recording
        into ``rec``."""
        intended = self.clock.now_ns() if intended_ns is None else intended_ns
        if body is not None and rec is None:
            body.close()
            raise ValueError("a turn with its own body records into the caller's rec")
        if rec is None:
            rec = self.recorder(planned, expected=inp.fixture.text)
        await self.prepare(rec, stages.hearing)
        turn_start = self.clock.now_ns()
        if body is None:
            leg = self.phone_leg
            if leg is not None and source is None:
                inp = heard_input(inp, leg, rec)  # the caller's phone leg (docs/NETWORK.md)
            body = self.body(planned, inp, rec, stages, source=source, sink=sink)
        await self.guard(rec, body, hold=hold)
        self.phone_sinks.record(rec)
        self.record_loop_lag(rec, turn_start)
        if scheduled and rec.t0_ns:  # 0 until the first frame went out: never started, no lag
            rec.figure("intended_start_ns", intended)
            rec.figure("schedule_lag_ns", schedule_lag_ns(intended, rec.t0_ns))
        if session is not None:
            rec.extra("session", session)
        return rec

    async def guard(
        self, rec: TurnRecorder, body: Coroutine[Any, Any, None], *, hold: Hold | None = None
    ) -> None:
        """Run ``body`` under the pipeline's turn timeout. A timeout fails the turn, an error
        fails it with the error's text, a body cancelled through ``hold`` just stops; the body
        never outlives this call (a signal cancels it too)."""
        task = asyncio.create_task(body)
        if hold is not None:
            hold(task)
        try:
            async with asyncio.timeout(self.pipeline.turn.timeout_s):
                await asyncio.wait({task})
        except TimeoutError:
            self.fail_timed_out(rec)
        finally:
            # Cancelled mid-turn (a signal, the turn timeout): the body's tasks must not outlive
            # the turn. Left behind, an STT task waited for audio nobody would send, and the
            # loop's shutdown hung on it (tests/cli/test_signals_stack.py).
            await cancel_tasks(task)
        if task.done() and not task.cancelled() and (exc := task.exception()) is not None:
            rec.fail("runner", f"{type(exc).__name__}: {exc}")

    async def body(
        self,
        planned: PlannedTurn,
        inp: TurnInput,
        rec: TurnRecorder,
        stages: StageSet,
        *,
        source: FrameSource | None = None,
        sink: Sink | None = None,
    ) -> None:
        """The turn itself (each shape's own)."""
        raise NotImplementedError(f"{type(self).__name__} has no turn body")

    # -- the pieces every shape and caller composes ---------------------------------------------
    def recorder(self, planned: PlannedTurn, *, expected: str | None = None) -> TurnRecorder:
        """A recorder for ``planned`` (``t0_ns`` is set when its first frame goes out)."""
        return self.recorder_class(
            index=planned.index,
            fixture=planned.fixture,
            t0_ns=0,
            repeat=planned.repeat,
            warmup=planned.warmup,
            expected=expected,
            wall_time_ns=time.time_ns(),  # a label, never a duration
        )

    async def prepare(self, rec: TurnRecorder, *stages: Stage) -> None:
        """Re-warm ``stages``' connections; a failure is flagged (it shows again in the turn)."""
        for stage in stages:
            try:
                await stage.prepare()
            except Exception as exc:
                rec.flag(f"prepare_failed:{type(exc).__name__}")

    def fail_timed_out(self, rec: TurnRecorder) -> None:
        """Fail ``rec`` for running past the pipeline's turn timeout."""
        last = list(rec.milestones())[-1:] or ["start"]
        timeout = self.pipeline.turn.timeout_s
        rec.fail("turn", f"timed out after {timeout:g} s (last milestone: {last[0]})")

    def record_loop_lag(self, rec: TurnRecorder, since_ns: int) -> None:
        """The worst loop lag the probe saw from ``since_ns`` to now, as ``loop_lag_max_ns``."""
        worst = None
        if self.loop_lag is not None:
            worst = self.loop_lag.max_between(since_ns, self.clock.now_ns())
        rec.figure("loop_lag_max_ns", worst)

    def milestone(self, rec: TurnRecorder, name: str, t_ns: int) -> None:
        """Tell the observer that ``rec`` reached ``name`` at clock time ``t_ns``."""
        self.observer.milestone(rec.index, name, t_ns - rec.t0_ns)

    @property
    def phone_leg(self) -> PhoneLeg | None:
        """The pipeline's phone leg (a ``codec = "pcmu"`` network profile), if any."""
        return phone_leg(self.pipeline)

    def default_sink(self, planned: PlannedTurn) -> SimulatedSink:
        """The simulated speaker of a fixture turn (recording to ``out_dir`` with save_audio);
        behind the phone leg when the pipeline has one (engine/phone_leg.py)."""
        record_path = None
        if self.pipeline.output.save_audio and self.out_dir is not None:
            record_path = self.out_dir / "audio" / f"turn-{planned.index:04d}-{planned.fixture}.wav"
            record_path.parent.mkdir(parents=True, exist_ok=True)
        options: dict[str, Any] = {
            "output_latency_ms": self.pipeline.output.latency_ms,
            "record_path": record_path,
            "clock": self.clock,
        }
        leg = self.phone_leg
        if leg is not None:
            return self.phone_sinks.add(planned.index, PhoneSink(leg, planned.index, **options))
        return SimulatedSink(**options)


__all__ = ["FRAME_MS", "FrameSource", "Hold", "Sink", "TurnEngine", "TurnInput"]
