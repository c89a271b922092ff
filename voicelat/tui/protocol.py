"""The measuring process's event stream: one JSON object per line, on the child's stdout.

``voicelat run --tui`` measures in a child process (``voicelat run --no-tui --events jsonl``) so
the TUI can never hold up a timestamp (see :mod:`voicelat.tui.live`). The child reports through
the runner's observer, one line per call::

    {"event": "turn_started", "index": 0, "fixture": "book_table", "warmup": true,
     "total": 6, "speech_end_ns": 2338000000}
    {"event": "milestone", "index": 0, "name": "endpoint", "t_rel_ns": 2851234567,
     "seen_ns": 81234567890123}
    {"event": "turn_finished", "total": 6, "turn": {... voicelat.files.results.turn_to_json ...}}
    {"event": "summary", "path": "runs/.../summary.json"}

``seen_ns`` is the child's measuring clock (:class:`voicelat.core.measure.clock.MonotonicClock`,
``time.perf_counter_ns``) when the milestone was reported. That clock is system-wide
(CLOCK_MONOTONIC), so the TUI process can place the turn's t0 on its own clock and move a
"now" cursor without asking the measuring process anything.

Human output (stack start-up progress, warnings, the one-line error) stays on the child's
stderr, which the TUI reads as a second pipe: it carries whatever the child prints, including
what libraries and the interpreter write to file descriptor 2, so nothing needs rerouting.

Reading is forgiving: a line that is not JSON or names an unknown event is counted and
skipped, so a stray print or a newer child never crashes the screen.

Nothing here imports Textual: the measuring child imports this module.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import queue
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from voicelat.core.base import jsontext
from voicelat.core.base.plan import PlannedTurn
from voicelat.core.base.turn import Turn
from voicelat.core.measure.clock import Clock, MonotonicClock
from voicelat.files.fixtures import Fixture
from voicelat.files.results import SUMMARY_FILE, turn_from_json, turn_to_json
from voicelat.tui.model import NS_PER_MS, MilestoneSeen, RunEvent, TurnFinished, TurnStarted

#: The value of the hidden ``--events`` option that selects this stream.
EVENTS_FORMAT = "jsonl"

#: The TUI passes its own command line here, so the child's summary records what the user
#: typed rather than the child's ``--events jsonl`` invocation.
ARGV_ENV = "VOICELAT_RUN_ARGV"

#: The clock a milestone's report time is read on: the one the run measures with.
_MEASURING_CLOCK: Clock = MonotonicClock()


class ByteSink(Protocol):
    """Where the event lines go: the child's claimed stdout (tests pass their own)."""

    def write(self, data: bytes, /) -> object:
        """Write the bytes (may block: only the writer thread calls it)."""

    def flush(self) -> object:
        """Push them to the reader."""


@dataclass(frozen=True, slots=True)
class SummaryWritten:
    """The child wrote its ``summary.json`` (the last line of a run that got that far)."""

    path: Path


#: What one line decodes to: an event for the model, the summary's path, or nothing usable.
Decoded = RunEvent | SummaryWritten | None


# -- writing (the measuring child) ------------------------------------------------------------
def encode(item: tuple[Any, ...]) -> bytes:
    """One queued observer call as one JSON line (runs on the writer thread, never the loop)."""
    kind = item[0]
    obj: dict[str, Any]
    if kind == "turn_started":
        _, planned, total, speech_end_ns = item
        obj = {
            "event": kind,
            "index": planned.index,
            "fixture": planned.fixture,
            "warmup": planned.warmup,
            "total": total,
            "speech_end_ns": speech_end_ns,
        }
    elif kind == "milestone":
        _, index, name, t_rel_ns, seen_ns = item
        obj = {
            "event": kind,
            "index": index,
            "name": name,
            "t_rel_ns": t_rel_ns,
            "seen_ns": seen_ns,
        }
    elif kind == "turn_finished":
        _, turn, total = item
        obj = {"event": kind, "total": total, "turn": turn_to_json(turn)}
    elif kind == "summary":
        obj = {"event": kind, "path": str(item[1])}
    else:
        raise ValueError(f"unknown event kind {kind!r}")
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


class JsonlObserver:
    """The runner's observer in the measuring child: one ``SimpleQueue.put`` per call.

    The calls run on the measuring loop, so they only enqueue a tuple of the objects they were
    given (``PlannedTurn`` and ``Turn`` are frozen) and return. A writer thread encodes each
    one as a JSON line and writes it: a reader that stalls, a full pipe or a slow encode of a
    big turn can only ever hold up that thread.

    If the reader has gone (the TUI process was killed: ``EPIPE``), ``on_broken`` is called
    once, from the writer thread; later events are dropped.
    """

    def __init__(
        self,
        stream: ByteSink,
        speech_end_ms: Mapping[str, int | None],
        *,
        clock: Clock = _MEASURING_CLOCK,
        on_broken: Callable[[], None] | None = None,
    ) -> None:
        self.stream = stream
        self.speech_end_ns = {
            k: None if v is None else v * NS_PER_MS for k, v in speech_end_ms.items()
        }
        self.clock = clock
        self.on_broken = on_broken
        self.broken = False
        self._queue: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
        # A daemon thread: if the child is torn down without close(), it must not hang exit.
        self._thread = threading.Thread(target=self._write_all, name="voicelat-events", daemon=True)
        self._thread.start()

    # -- the runner's Observer protocol (on the measuring loop: enqueue and return) ----------
    def turn_started(self, planned: PlannedTurn, total: int) -> None:
        """A turn is starting; its fixture's ``speech_end`` places the timeline's zero."""
        self._queue.put(("turn_started", planned, total, self.speech_end_ns.get(planned.fixture)))

    def milestone(self, index: int, name: str, t_rel_ns: int) -> None:
        """A live milestone, stamped with the report time on the system-wide clock."""
        self._queue.put(("milestone", index, name, t_rel_ns, self.clock.now_ns()))

    def turn_finished(self, turn: Turn, total: int) -> None:
        """A turn ended (already in turns.jsonl); the whole turn goes to the TUI."""
        self._queue.put(("turn_finished", turn, total))

    # -- after the run -----------------------------------------------------------------------
    def summary(self, path: Path) -> None:
        """Announce the summary file (called once the run is over)."""
        self._queue.put(("summary", path))

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued, then stop the writer thread (waits at most ``timeout`` s)."""
        self._queue.put(None)
        self._thread.join(timeout)

    def _write_all(self) -> None:
        while (item := self._queue.get()) is not None:
            if self.broken:
                continue  # keep draining so the queue cannot grow; nobody is reading
            try:
                self.stream.write(encode(item))
                self.stream.flush()
            except (BrokenPipeError, ValueError, OSError):
                # ValueError: the stream was closed under us. Either way the reader is gone.
                self.broken = True
                if self.on_broken is not None:
                    self.on_broken()


def claim_stdout() -> IO[bytes]:
    """Take file descriptor 1 for the event stream; point it (and ``print``) at stderr.

    Anything else that writes to stdout in the child (a stray ``print``, a library, C code)
    then lands on stderr, where the TUI shows it as a log line, instead of corrupting the
    event stream.
    """
    sys.stdout.flush()
    fd = os.dup(1)
    os.dup2(2, 1)
    return os.fdopen(fd, "wb")


def obey_stop_requests() -> None:
    """The measuring child stops on its TUI's SIGINT, whatever it inherited: a TUI started as a
    background job (``voicelat run --tui &`` in a script) has SIGINT ignored, its child would
    inherit that across ``exec``, ignore the stop and run on while the TUI waited for it (a
    SIGTERM to ``run --tui`` then never ended it). Only the TUI signals this process: it runs
    in a session of its own, out of the terminal's reach."""
    main = threading.current_thread() is threading.main_thread()
    if main and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def interrupt_self() -> None:
    """Stop the run as Ctrl-C would: the summary is written and started servers are stopped.

    Used when the TUI process has gone: there is nobody left to show the run to.
    """
    os.kill(os.getpid(), signal.SIGINT)


class QuietStderr(io.TextIOBase):
    """``sys.stderr`` for the measuring child: writes that hit a closed pipe are dropped.

    If the TUI process has gone, the child's stderr pipe is broken too. The clean-up path
    (``stopping the servers this run started ...``) prints before it stops the servers; a
    ``BrokenPipeError`` there would skip the stop and leave servers behind.
    """

    def __init__(self, inner: IO[str]) -> None:
        super().__init__()
        self.inner = inner

    def write(self, s: str) -> int:
        """Write through; a broken pipe swallows the text."""
        with contextlib.suppress(OSError, ValueError):
            return self.inner.write(s)
        return len(s)

    def flush(self) -> None:
        """Flush through; a broken pipe is ignored."""
        with contextlib.suppress(OSError, ValueError):
            self.inner.flush()

    def fileno(self) -> int:
        """The real descriptor (faulthandler and subprocesses ask for it)."""
        return self.inner.fileno()

    def isatty(self) -> bool:
        """Never a terminal here: the TUI reads it through a pipe."""
        return False


def recorded_argv(default: list[str]) -> list[str]:
    """The command line to record in the summary: the TUI's, when it started this child."""
    raw = os.environ.get(ARGV_ENV)
    if raw is None:
        return default
    try:
        value = jsontext.loads(raw)
    except ValueError:
        return default
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    return default


# -- reading (the TUI process) ----------------------------------------------------------------
def decode(line: bytes | str) -> Decoded:
    """One line of the stream as a model event; ``None`` for a line that is not one."""
    try:
        obj = jsontext.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    kind = obj.get("event")
    try:
        if kind == "turn_started":
            end = obj.get("speech_end_ns")
            return TurnStarted(
                int(obj["index"]),
                str(obj["fixture"]),
                int(obj["total"]),
                bool(obj["warmup"]),
                None if end is None else int(end),
            )
        if kind == "milestone":
            return MilestoneSeen(
                int(obj["index"]), str(obj["name"]), int(obj["t_rel_ns"]), int(obj["seen_ns"])
            )
        if kind == "turn_finished":
            return TurnFinished(turn_from_json(obj["turn"]), int(obj["total"]))
        if kind == "summary":
            return SummaryWritten(Path(str(obj["path"])))
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
        return None  # int(Infinity) is an OverflowError: still just a line that is not one
    return None


@contextlib.contextmanager
def event_stream(fixtures: Sequence[Fixture], out_dir: Path) -> Iterator[JsonlObserver]:
    """``voicelat run --events jsonl``: the observer for the run, on a claimed stdout.

    However the run ends (complete, Ctrl-C, an error), the summary's path is announced if the
    runner got to write it, and every queued line is written before the process exits.
    """
    stream = claim_stdout()
    sys.stderr = QuietStderr(sys.stderr)
    obey_stop_requests()
    observer = JsonlObserver(
        stream, {f.id: f.speech_end_ms for f in fixtures}, on_broken=interrupt_self
    )
    try:
        yield observer
    finally:
        summary = out_dir / SUMMARY_FILE
        if summary.exists():
            observer.summary(summary)
        observer.close()
        with contextlib.suppress(OSError):
            stream.close()
