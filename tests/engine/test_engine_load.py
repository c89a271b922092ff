"""The load shapes on their own: sessions from a pool and turns from a callable, no runner."""

from __future__ import annotations

import asyncio

import pytest

from tests.engine.test_turn_engine import ClockedLLM, ClockedSTT, ClockedTTS, _BrokenTTS
from voicelat.core.base.plan import PlannedTurn, plan_turns
from voicelat.core.base.turn import Turn
from voicelat.core.measure.clock import FakeClock
from voicelat.core.measure.recorder import TurnRecorder
from voicelat.engine.load import Session, SessionPool, closed_loop
from voicelat.engine.progress import NullObserver
from voicelat.engine.stageset import CascadeStageSet, StageSet


def _stages(sid: int) -> StageSet:
    return CascadeStageSet(ClockedSTT(), ClockedLLM(), _BrokenTTS() if sid == 2 else ClockedTTS())


def test_a_pool_opens_sessions_on_its_clock_and_closes_them_all() -> None:
    clock = FakeClock()
    opened: list[Session] = []

    async def main() -> None:
        async with SessionPool(_stages, clock) as pool:
            opened.extend([await pool.open(0), *await pool.open_many([1])])
            assert pool.opened == 2
            assert all(stage.clock is clock for s in opened for stage in s.stages)

    asyncio.run(main())
    assert [s.id for s in opened] == [0, 1]
    assert all(stage.exited for s in opened for stage in s.stages)  # type: ignore[attr-defined]


def test_opening_sessions_is_all_or_nothing_with_one_clear_error() -> None:
    async def main() -> None:
        async with SessionPool(_stages) as pool:
            await pool.open_many([1, 2, 3])

    with pytest.raises(ConnectionRefusedError, match="no server"):
        asyncio.run(main())


def test_a_closed_loop_runs_warm_up_first_then_every_turn_once() -> None:
    plan = plan_turns(["a", "b"], turns=4, warmup=1)
    ran: list[tuple[int, int, bool]] = []

    async def run_turn(planned: PlannedTurn, s: Session, intended: int | None) -> Turn:
        assert intended is None  # a closed loop starts a turn when its session is free
        ran.append((s.id, planned.index, planned.warmup))
        await asyncio.sleep(0)
        rec = TurnRecorder(index=planned.index, fixture=planned.fixture, t0_ns=0)
        return rec.finish()

    done: list[Turn] = []

    async def main() -> None:
        async with SessionPool(_stages) as pool:
            sessions = [await pool.open(0), await pool.open(1)]
            await closed_loop(
                plan, sessions, run_turn, done.append, observer=NullObserver(), clock=FakeClock()
            )

    asyncio.run(main())
    assert ran[0][2] is True and not any(w for _, _, w in ran[1:])
    assert sorted(i for _, i, _ in ran) == [p.index for p in plan]
    assert {sid for sid, _, _ in ran[1:]} == {0, 1}  # the measured turns spread over both
    assert len(done) == len(plan)
