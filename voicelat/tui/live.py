"""``voicelat run`` with the TUI: the runner on its own thread and event loop, the app on this one.

The measuring loop stamps events; the app must never delay it. So:

* the runner runs in a thread of its own, with its own event loop (``asyncio.run`` inside
  :func:`voicelat.cli.execute_run`, which also brings the embedded stack up and down);
* the runner's observer only puts small immutable events on a ``queue.SimpleQueue`` (a
  lock-free C call) and returns; it never waits for the UI (``App.call_from_thread`` would
  block the measuring loop until the UI had run the callback, so it is not used);
* the app drains that queue on its own timer and repaints at its own pace;
* quitting cancels the runner's task *on its loop* (``call_soon_threadsafe``), then waits for
  the thread to end: the runner writes its summary in ``finally`` and the stack context stops
  the servers it started.

One process still shares one GIL: while the UI thread runs Python, a measuring thread woken by
a socket waits for the interpreter to switch. The switch interval is lowered for the run so
that wait is at most ~1 ms instead of 5 ms, and the per-turn ``loop_lag_max_ns`` and
``pacer_lag_max_ns`` figures (shown on the status line) measure what is left.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import queue
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from voicelat.errors import EXIT_INTERRUPTED, EXIT_OK, VoicelatError
from voicelat.plan import PlannedTurn
from voicelat.tui.model import (
    NS_PER_MS,
    MilestoneSeen,
    RunEnded,
    RunEvent,
    RunModel,
    TurnFinished,
    TurnStarted,
)
from voicelat.turn import Turn

#: GIL switch interval while the TUI shares the process with the measuring loop (s).
SWITCH_INTERVAL_S = 0.001


class StopSwitch:
    """Cancels the runner's task from another thread, whenever that task becomes known.

    The task is the one ``asyncio.run`` made for ``Runner.run``; it becomes known at the first
    observer call made from it (``turn_started``). A stop asked for before then (while the
    stack or the stages come up) takes effect at that call.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        self.requested = False

    def bind_current_task(self) -> None:
        """Remember the running task (call on the measuring loop); cancel it if stop was asked."""
        with self._lock:
            if self._task is None:
                self._loop = asyncio.get_running_loop()
                self._task = asyncio.current_task()
            task, requested = self._task, self.requested
        if requested and task is not None:
            task.cancel()

    def request(self) -> None:
        """Ask for the run to stop (any thread; returns at once)."""
        with self._lock:
            self.requested = True
            loop, task = self._loop, self._task
        if loop is not None and task is not None:
            # A closed loop means the run already ended: nothing left to cancel.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(task.cancel)


class QueueObserver:
    """The runner's observer for the TUI: one ``SimpleQueue.put`` per call, nothing else.

    Runs on the measuring loop, so it must stay cheap: it builds a tiny frozen event and
    enqueues it. ``speech_end_ms`` (per fixture) places the live timeline's zero.
    """

    def __init__(
        self,
        events: queue.SimpleQueue[RunEvent],
        speech_end_ms: Mapping[str, int | None],
        stop: StopSwitch,
    ) -> None:
        self.events = events
        self.speech_end_ms = dict(speech_end_ms)
        self.stop = stop

    def turn_started(self, planned: PlannedTurn, total: int) -> None:
        """A turn is starting (called from the runner's own task, so its task is bound here)."""
        self.stop.bind_current_task()
        end_ms = self.speech_end_ms.get(planned.fixture)
        self.events.put(
            TurnStarted(
                planned.index,
                planned.fixture,
                total,
                planned.warmup,
                None if end_ms is None else end_ms * NS_PER_MS,
            )
        )

    def milestone(self, index: int, name: str, t_rel_ns: int) -> None:
        """A live milestone; the receipt time lets the UI place t0 on its clock."""
        self.events.put(MilestoneSeen(index, name, t_rel_ns, time.perf_counter_ns()))

    def turn_finished(self, turn: Turn, total: int) -> None:
        """A turn ended (it is already written to turns.jsonl)."""
        self.events.put(TurnFinished(turn, total))


class LiveRun:
    """The measuring thread: runs ``work(observer)`` and reports through ``events``."""

    def __init__(
        self,
        work: Callable[[QueueObserver], Any],
        speech_end_ms: Mapping[str, int | None],
    ) -> None:
        self.events: queue.SimpleQueue[RunEvent] = queue.SimpleQueue()
        self.stop = StopSwitch()
        self.observer = QueueObserver(self.events, speech_end_ms, self.stop)
        self._work = work
        self._thread: threading.Thread | None = None
        self._done = threading.Event()
        self.outcome: Any = None
        self.error: BaseException | None = None
        self.status = "starting"

    def start(self) -> None:
        """Start the measuring thread (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._main, name="voicelat-measure")
            self._thread.start()

    def _main(self) -> None:
        message: str | None = None
        try:
            self.outcome = self._work(self.observer)
            self.status = "complete"
        except (asyncio.CancelledError, KeyboardInterrupt):
            self.status = "interrupted"
            message = "stopped by the user; finished turns and the summary are saved"
        except BaseException as exc:  # reported on screen, re-raised by run_with_tui
            self.error = exc
            self.status = "failed"
            message = str(exc) if isinstance(exc, VoicelatError) else f"{type(exc).__name__}: {exc}"
        finally:
            self.events.put(RunEnded(self.status, message))
            self._done.set()

    def request_stop(self) -> None:
        """Cancel the run on its own loop (a no-op once it has ended)."""
        if not self._done.is_set():
            self.stop.request()

    @property
    def done(self) -> bool:
        """The thread has finished: summary written, servers stopped."""
        return self._done.is_set()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the thread."""
        if self._thread is not None:
            self._thread.join(timeout)


def want_tui(args: argparse.Namespace, stdout_isatty: bool | None = None) -> bool:
    """``--tui`` / ``--no-tui`` win; otherwise the TUI opens when stdout is a terminal."""
    forced = getattr(args, "tui", None)
    if forced is not None:
        return bool(forced)
    return sys.stdout.isatty() if stdout_isatty is None else stdout_isatty


def live_model(pipeline: Any, out_dir: Path, planned: int) -> RunModel:
    """The model of a run about to start: budget and lag limit from the pipeline."""
    return RunModel(
        results_path=out_dir,
        planned=planned,
        budget=dict(pipeline.budget or {}),
        pipeline_name=str(pipeline.name),
        status="starting",
        pacer_lag_limit_ns=int(pipeline.turn.pacer_lag_limit_ms * NS_PER_MS),
        live_mode=True,
        started=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    )


def run_with_tui(
    args: argparse.Namespace,
    pipeline: Any,
    fixtures: Sequence[Any],
    out_dir: Path,
    argv: Sequence[str] = (),
) -> int:
    """``voicelat run`` with the TUI; returns the exit code (130 when stopped with ``q``)."""
    # Imported here: voicelat.cli imports this module lazily, only when the TUI is wanted.
    from voicelat.cli import _info, execute_run
    from voicelat.plan import plan_turns
    from voicelat.report.text import summary_table
    from voicelat.results import load_run
    from voicelat.tui.app import VoicelatApp

    planned = len(
        plan_turns(
            [f.id for f in fixtures], repeat=args.repeat, turns=args.turns, warmup=args.warmup
        )
    )
    live = LiveRun(
        lambda observer: execute_run(
            args, pipeline, list(fixtures), out_dir, observer, argv=list(argv)
        ),
        {f.id: f.speech_end_ms for f in fixtures},
    )
    app = VoicelatApp(live_model(pipeline, out_dir, planned), controller=live)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        app.run()
    finally:
        # However the app ended (q, a crash), never leave the run and its servers behind.
        live.request_stop()
        live.join()
        sys.setswitchinterval(switch)
    if live.error is not None:
        raise live.error
    summary = getattr(live.outcome, "summary", None)
    if summary is None:
        try:
            summary = load_run(out_dir).summary
        except VoicelatError:
            summary = None
    if summary is not None:
        print(summary_table(summary, str(out_dir)))
    if live.status == "interrupted":
        _info(f"interrupted: finished turns kept, summary written to {out_dir}")
        return EXIT_INTERRUPTED
    return EXIT_OK
