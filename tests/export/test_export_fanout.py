"""The fan-out: the measuring loop pays a queue put; exporters run on one background thread."""

from __future__ import annotations

import threading
import time
from typing import Any

from synthetic_turns import synthetic_turns

from voicelat.core.base.turn import Turn
from voicelat.core.summaries.run_summary import RunSummary
from voicelat.export import Exporter, ExportFanout, ExportObserver, LoopLagSink


class Recording:
    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.turns: list[int] = []
        self.threads: set[int] = set()
        self.summary: RunSummary | None = None
        self.closed = 0

    def on_turn(self, turn: Turn) -> None:
        time.sleep(self.delay_s)
        self.threads.add(threading.get_ident())
        self.turns.append(turn.index)

    def close(self, summary: RunSummary | None) -> None:
        self.closed += 1
        self.summary = summary


class Lagging(Recording):
    def __init__(self) -> None:
        super().__init__()
        self.lags: list[int] = []

    def on_loop_lag(self, lag_ns: int) -> None:
        self.lags.append(lag_ns)


class Broken(Recording):
    def on_turn(self, turn: Turn) -> None:
        raise ConnectionError("collector gone")


def test_submit_never_waits_for_a_slow_exporter() -> None:
    slow = Recording(delay_s=0.02)
    turns = synthetic_turns(40)
    fan = ExportFanout([slow])
    fan.start()
    t0 = time.perf_counter()
    for t in turns:
        fan.submit(t)
    submit_s = time.perf_counter() - t0
    # 40 turns x 20 ms of exporting = 800 ms; the caller spent a tiny fraction of that.
    assert submit_s < 0.05, submit_s
    assert len(slow.turns) < 40  # still exporting when submit returned
    fan.close({"counts": {"turns": 40}})
    assert slow.turns == list(range(40))  # all of them, in order
    assert slow.threads and threading.get_ident() not in slow.threads
    assert slow.summary is not None and slow.closed == 1
    assert slow.summary.counts.turns == 40


def test_a_failing_exporter_warns_once_and_the_others_carry_on() -> None:
    warnings: list[str] = []
    good, bad = Recording(), Broken()
    with ExportFanout([bad, good], warn=warnings.append) as fan:
        for t in synthetic_turns(5):
            fan.submit(t)
    assert good.turns == [0, 1, 2, 3, 4] and good.closed == 1
    assert len(warnings) == 1
    assert "Broken" in warnings[0] and "collector gone" in warnings[0]
    assert bad.turns == []
    assert bad.closed == 1  # closed all the same (its port or file released), without a warning


def test_loop_lag_goes_only_to_exporters_that_take_it() -> None:
    plain, lagging = Recording(), Lagging()
    assert isinstance(lagging, LoopLagSink) and not isinstance(plain, LoopLagSink)
    assert isinstance(plain, Exporter)
    with ExportFanout([plain, lagging]) as fan:
        fan.loop_lag(1234)
        fan.submit(synthetic_turns(1)[0])
    assert lagging.lags == [1234] and plain.turns == [0] == lagging.turns


def test_close_without_start_still_exports_what_was_queued() -> None:
    rec = Recording()
    fan = ExportFanout([rec])
    for t in synthetic_turns(3):
        fan.submit(t)
    fan.close(None)
    fan.close(None)  # idempotent
    fan.submit(synthetic_turns(1)[0])  # after close: dropped, not an error
    assert rec.turns == [0, 1, 2] and rec.closed == 1


def test_observer_forwards_and_queues() -> None:
    seen: list[tuple[str, object]] = []

    class Inner:
        def turn_started(self, planned: Any, total: int) -> None:
            seen.append(("started", planned))

        def milestone(self, index: int, name: str, t_rel_ns: int) -> None:
            seen.append(("milestone", name))

        def turn_finished(self, turn: Turn, total: int) -> None:
            seen.append(("finished", turn.index))

    rec = Recording()
    fan = ExportFanout([rec])
    obs = ExportObserver(Inner(), fan)
    turn = synthetic_turns(1)[0]
    obs.turn_started("p", 1)
    obs.milestone(0, "endpoint", 5)
    obs.turn_finished(turn, 1)
    fan.close(None)
    assert seen == [("started", "p"), ("milestone", "endpoint"), ("finished", 0)]
    assert rec.turns == [0]
    ExportObserver(None, fan).turn_finished(turn, 1)  # no inner observer: fine


def test_every_exporter_receives_the_summary_typed() -> None:
    """A run's outcome holds the summary.json document; the fan-out types it once, so an
    exporter reads attributes, not string keys."""
    got: list[object] = []

    class Keeps:
        def on_turn(self, turn: Turn) -> None:
            pass

        def close(self, summary: RunSummary | None) -> None:
            got.append(summary)

    fan = ExportFanout([Keeps()])
    fan.close({"counts": {"turns": 40, "failed": 2}, "instrument": {"status": "calibrated"}})
    (summary,) = got
    assert isinstance(summary, RunSummary)
    assert summary.counts.turns == 40 and summary.counts.failed == 2
    assert summary.extra["instrument"] == {"status": "calibrated"}
