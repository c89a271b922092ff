"""``voicelat run`` with the TUI: the run is measured in a child process, the screen lives here.

A measuring tool must not disturb what it measures. Two threads of one process share one GIL:
while the UI thread paints, a measuring thread woken by a socket waits for the interpreter,
and that wait lands in the timestamps (measured: loop lag max 6-12 ms with an in-process TUI
against 4-6 ms without). So the run gets a process, and an interpreter, of its own:

* this process starts ``python -m voicelat run --no-tui --events jsonl ...the same options...``
  in a new session (terminal signals reach only the TUI, which decides what the child gets);
* the child's observer hands each call to a writer thread (see :mod:`voicelat.tui.protocol`),
  which writes one JSON line per call to its stdout;
* here, a reader thread turns those lines into the model's events on a ``SimpleQueue``, and
  another turns the child's stderr (stack start-up progress, its one-line error) into setup
  lines; the app drains the queue on its own timer, as it did when the runner was a thread;
* ``q`` / ctrl+c sends the child SIGINT, which it handles like Ctrl-C in a terminal: finished
  turns kept, ``summary.json`` written with status ``interrupted``, servers it started
  stopped, exit 130. The app waits for that, then this process prints the summary table and
  exits with the child's code (its one-line error first, if it failed);
* what the two processes still share is the CPU, so this one lowers its priority once the
  child runs (:data:`TUI_NICE`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import IO, Any

from voicelat.core.base.errors import EXIT_INTERRUPTED, EXIT_OK, VoicelatError
from voicelat.core.summaries.run_summary import RunSummary
from voicelat.tui.model import NS_PER_MS, RunEnded, RunEvent, RunModel, SetupLine
from voicelat.tui.protocol import ARGV_ENV, SummaryWritten, decode

#: How the child's one-line errors start (``voicelat.cli.main._err`` writes them).
ERROR_PREFIX = "voicelat: error: "
#: The first line Python prints for an uncaught exception.
TRACEBACK_START = "Traceback (most recent call last):"
#: How far the TUI process lowers its own CPU priority once the child runs. The two still
#: share the cores (with the servers): when a repaint holds a core as the measuring loop wakes
#: up, the scheduler should hand it over at once. On the 2-core A/B machine the TUI used ~5%
#: of a core and this made no measurable difference (docs/TUI.md); it is there for saturated
#: cores. ``VOICELAT_TUI_NICE`` overrides it (0: off).
TUI_NICE = 10
NICE_ENV = "VOICELAT_TUI_NICE"
#: How long the measuring child may take, once asked to stop, to write its summary and stop
#: the servers it started, before it is killed (a stop must end the command, always).
STOP_GRACE_S = 60.0
#: How long the pipes' readers may take to finish once the child was killed.
KILL_WAIT_S = 10.0
#: The signals that stop ``run --tui`` (the command-wide policy's: voicelat.cli.signals).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def exit_status(returncode: int) -> int:
    """A child's return code as a process exit status (killed by signal N -> 128 + N)."""
    return 128 - returncode if returncode < 0 else returncode


class ChildRun:
    """The measuring child process as the app sees it (``voicelat.tui.app.RunController``).

    ``events`` gets the child's observer calls as model events, its stderr as setup lines,
    and finally one :class:`RunEnded` built from its exit code.
    """

    def __init__(
        self,
        command: Sequence[str],
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        nice: int = 0,
    ) -> None:
        self.command = list(command)
        #: Added to this process's niceness once the child runs (see :data:`TUI_NICE`).
        self.nice = nice
        self.env = None if env is None else dict(env)
        self.cwd = cwd
        self.events: queue.SimpleQueue[RunEvent] = queue.SimpleQueue()
        self.proc: subprocess.Popen[bytes] | None = None
        self.returncode: int | None = None
        #: complete, interrupted or failed once the child has exited.
        self.status = "starting"
        #: The child's reason for failing, one line (its ``voicelat: error:`` message).
        self.message: str | None = None
        self.summary_path: Path | None = None
        #: Lines on the child's stdout that were not events (counted, never shown).
        self.bad_lines = 0
        #: The child's stderr, last lines kept (its error is usually the last one).
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=200)
        self.stop_sent = False
        #: How long a stopped child may take to write its summary and stop its servers.
        self.stop_grace_s = STOP_GRACE_S
        self._done = threading.Event()
        self._threads: list[threading.Thread] = []

    # -- RunController ------------------------------------------------------------------------
    def start(self) -> None:
        """Start the child and the threads that read its two pipes (once)."""
        if self.proc is not None or self._done.is_set():
            return
        try:
            with _sigint_not_inherited_ignored():
                self.proc = subprocess.Popen(
                    self.command,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env=self.env,
                    cwd=self.cwd,
                    # Its own session: a Ctrl-C typed at the terminal (outside the app's raw
                    # mode) reaches this process only, and it alone decides what the child gets.
                    start_new_session=True,
                )
        except OSError as exc:
            self._finish("failed", f"cannot start the measuring process: {exc}", None)
            return
        if self.nice > 0 and hasattr(os, "nice"):
            # After the fork, so the child keeps the caller's priority and this process alone
            # steps back (an unprivileged process cannot raise the child's instead).
            with contextlib.suppress(OSError):
                os.nice(self.nice)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        err = threading.Thread(
            target=self._read_stderr, args=(self.proc.stderr,), name="voicelat-child-stderr"
        )
        main = threading.Thread(target=self._main, args=(err,), name="voicelat-child")
        self._threads = [err, main]
        # Not daemons: the process must not exit while the child's last lines are unread.
        err.start()
        main.start()

    def request_stop(self) -> None:
        """Send the child SIGINT (its Ctrl-C) once; returns at once. A no-op after it exited.

        Before the child started (a signal while the app was still starting up), it never
        will: the run ends as interrupted, with nothing to wait for. (Waiting for a child that
        was never started used to hang ``run --tui`` for good.)"""
        if self.proc is None and not self._done.is_set():
            self.stop_sent = True
            self._finish("interrupted", "stopped before the run started", None)
            return
        if not self.stop_sent:
            self._interrupt()

    def _interrupt(self) -> None:
        proc = self.proc
        if proc is None or self._done.is_set() or proc.poll() is not None:
            return
        # A second SIGINT would interrupt the child's own clean-up: only the user sends one.
        self.stop_sent = True
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGINT)

    @property
    def done(self) -> bool:
        """The child has exited and both pipes are read to the end."""
        return self._done.is_set()

    # -- after the app -----------------------------------------------------------------------
    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the child and the readers; True once done."""
        return self._done.wait(timeout)

    def stop_and_wait(self) -> None:
        """However the app ended: never leave the run and its servers behind.

        A Ctrl-C while waiting is passed on once more (the user insists) and the wait goes on:
        the child is writing its summary and stopping servers. The wait is bounded: a child
        still there :attr:`stop_grace_s` after its SIGINT (it ignores it, or is stuck) gets
        SIGKILL, so the command always ends.
        """
        self.request_stop()
        deadline = time.monotonic() + self.stop_grace_s
        while True:
            try:
                if self.wait(max(0.0, deadline - time.monotonic())):
                    return
                self._kill()
                self.wait(KILL_WAIT_S)  # the pipes' readers end with the child
                return
            except KeyboardInterrupt:
                self._interrupt()

    def _kill(self) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()

    @property
    def exit_code(self) -> int:
        """The child's exit status (0, 2, 3, 130, 128+signal); 3 if it never ran."""
        if self.returncode is None:
            return 3
        return exit_status(self.returncode)

    # -- the reader threads --------------------------------------------------------------------
    def _main(self, stderr_reader: threading.Thread) -> None:
        proc = self.proc
        assert proc is not None and proc.stdout is not None
        for raw in proc.stdout:
            decoded = decode(raw)
            if isinstance(decoded, SummaryWritten):
                self.summary_path = decoded.path
            elif decoded is not None:
                self.events.put(decoded)
            elif raw.strip():
                self.bad_lines += 1
        stderr_reader.join()
        returncode = proc.wait()
        status, message = self._outcome(returncode)
        self._finish(status, message, returncode)

    def _read_stderr(self, stream: IO[bytes]) -> None:
        """Stderr lines become setup lines, except a traceback's (kept for the error line)."""
        in_traceback = False
        for raw in stream:
            line = raw.decode(errors="replace").rstrip()
            if not line.strip():
                continue
            self.stderr_tail.append(line)
            in_traceback = in_traceback or line.startswith(TRACEBACK_START)
            if not in_traceback:
                self.events.put(SetupLine(line))

    def _outcome(self, returncode: int) -> tuple[str, str | None]:
        if returncode == 0:
            return "complete", None
        if exit_status(returncode) == EXIT_INTERRUPTED:
            return "interrupted", "stopped; finished turns and the summary are saved"
        return "failed", self._error_line(returncode)

    def _instrument(self) -> dict[str, Any] | None:
        """The ``instrument`` section of the summary the child wrote (the run's error bar,
        for the percentiles pane); None without one. Read here, on this reader thread, once
        the child has exited: never on the loop that measured."""
        if self.summary_path is None:
            return None
        try:
            section = json.loads(self.summary_path.read_text()).get("instrument")
        except (OSError, ValueError, AttributeError):
            return None  # no summary, or not one: the pane shows no error bar
        return section if isinstance(section, dict) else None

    def _error_line(self, returncode: int) -> str:
        """The child's one-line error, or the last line it printed, or how it ended."""
        lines = list(self.stderr_tail)
        for line in reversed(lines):
            if line.startswith(ERROR_PREFIX):
                return line[len(ERROR_PREFIX) :]
        if returncode < 0:
            try:
                name = signal.Signals(-returncode).name
            except ValueError:
                name = f"signal {-returncode}"
            return f"the measuring process was killed by {name}"
        last = lines[-1].strip() if lines else ""
        detail = f": {last}" if last else ""
        return (
            f"the measuring process failed (exit {returncode}){detail}; "
            "run with --no-tui for the details"
        )

    def _finish(self, status: str, message: str | None, returncode: int | None) -> None:
        self.status, self.message, self.returncode = status, message, returncode
        self.events.put(RunEnded(status, message, self._instrument()))
        self._done.set()


@contextlib.contextmanager
def _sigint_not_inherited_ignored() -> Iterator[None]:
    """While the child is started: SIGINT handled in Python (and dropped) instead of ignored.

    An ignored signal stays ignored across ``exec``, a handled one is reset to its default:
    a TUI started as a background job (SIGINT ignored) would otherwise start a child that
    ignores the SIGINT it is stopped with, from its first instruction until it resets it
    itself (``voicelat.tui.protocol.obey_stop_requests``, after its imports: seconds on a
    loaded machine, and a stop sent then was lost). This process still ignores SIGINT."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, _drop_signal)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _drop_signal(signum: int, frame: FrameType | None) -> None:
    return None


def tui_nice() -> int:
    """:data:`TUI_NICE`, or ``$VOICELAT_TUI_NICE`` when it is a whole number."""
    raw = os.environ.get(NICE_ENV, "").strip()
    return int(raw) if raw.lstrip("-").isdigit() else TUI_NICE


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
    pipeline: Any,
    out_dir: Path,
    *,
    planned: int,
    command: Sequence[str],
    argv: Sequence[str] = (),
) -> int:
    """``voicelat run`` with the TUI; returns the child's exit code (130 when stopped with q).

    ``planned`` is the number of turns the child will run (the progress bar's end);
    ``command`` is the measuring child (``voicelat.cli.tui_child.child_command``; tests replay
    a recorded run).
    """
    # Imported here: the command line imports this module lazily, only when the TUI is wanted.
    from voicelat.files.results import load_run
    from voicelat.report.text import summary_table
    from voicelat.tui.app import VoicelatApp

    env = {**os.environ, ARGV_ENV: json.dumps(list(argv))}
    child = ChildRun(command, env=env, nice=tui_nice())
    app = VoicelatApp(live_model(pipeline, out_dir, planned), controller=child)
    with _stop_on_signals(app) as stopped_by:
        try:
            app.run()
        finally:
            # However the app ended (q, a crash, a signal), the child stops cleanly (or is
            # killed: bounded) before this returns.
            child.stop_and_wait()
    summary: RunSummary | None = None
    with contextlib.suppress(VoicelatError):
        summary = load_run(out_dir).run_summary
    # A run that failed before its first turn has only its error to show (as without the TUI).
    if summary is not None and summary.counts.turns:
        print(summary_table(summary, str(out_dir)))
    if child.status == "interrupted" or stopped_by:
        print(
            f"interrupted: finished turns kept, summary written to {out_dir}",
            file=sys.stderr,
            flush=True,
        )
        # One signal policy (docs/FAILURES.md): 128 + the signal, 130 for the q key.
        return 128 + stopped_by[0] if stopped_by else EXIT_INTERRUPTED
    if child.status == "failed":
        # One line, like `run --no-tui` prints it, with the child's exit code.
        raise VoicelatError(
            child.message or "the measuring process failed", exit_code=child.exit_code
        )
    return EXIT_OK


@contextlib.contextmanager
def _stop_on_signals(app: Any) -> Iterator[list[int]]:
    """While the app runs, SIGINT, SIGTERM and SIGHUP stop the run the way ``q`` does (the
    child stops and writes its summary, the app exits, the terminal is given back) and are
    recorded for the exit status. The quit is scheduled on the app's loop, not raised into it:
    textual swallows the main task's cancellation asyncio's SIGINT handling relies on, and a
    background job (``voicelat run --tui &``) has SIGINT ignored, so SIGTERM used to find no
    Ctrl-C path at all. Outside the app's loop (starting up, winding down) the command-wide
    policy applies. A signal someone chose to ignore stays ignored."""
    stopped: list[int] = []
    previous: dict[int, Any] = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}

    def handler(signum: int, frame: FrameType | None) -> None:
        stopped.append(signum)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            old = previous[signum]
            if callable(old):
                old(signum, frame)
            raise KeyboardInterrupt from None
        # Thread-safe scheduling is also the signal-handler-safe way into a running loop.
        loop.call_soon_threadsafe(lambda: loop.create_task(app.action_quit()))

    for sig, old in previous.items():
        if old is not signal.SIG_IGN:
            signal.signal(sig, handler)
    try:
        yield stopped
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
