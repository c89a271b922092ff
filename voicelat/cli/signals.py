"""One signal policy for every command: SIGINT, SIGTERM and SIGHUP all stop the command the way
Ctrl-C does (finished turns kept, the summary and reports written, servers it started stopped)
and the exit status says which signal it was: 128 + the signal's number (130 SIGINT, 143
SIGTERM, 129 SIGHUP), the convention shells, ``timeout`` and CI runners read.

SIGTERM is what ``timeout``, CI cancellation and ``docker stop`` send; its default action kills
Python before any ``finally`` runs. Rather than teach every command a second stop path, the
handler re-raises the signal as SIGINT, so whatever handles Ctrl-C at that moment (Python's
KeyboardInterrupt, asyncio's cancel-the-main-task, an emulator's loop handler) handles it.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any, TextIO, cast

__all__ = [
    "STOP_SIGNALS",
    "ReaderSafeStream",
    "exit_status",
    "install",
    "output_readers_may_leave",
    "received",
    "reset",
]

#: The signals that stop a command cleanly.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_received: list[int] = []


def _as_interrupt(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    current = signal.getsignal(signal.SIGINT)
    if current in (signal.SIG_IGN, signal.SIG_DFL, None):
        # A background job (`voicelat run &` in a script) starts with SIGINT ignored: the
        # SIGTERM must still stop it, through the same KeyboardInterrupt path.
        raise KeyboardInterrupt
    signal.raise_signal(signal.SIGINT)


def install() -> None:
    """Route SIGTERM and SIGHUP to the Ctrl-C path (main thread only; a no-op elsewhere).

    A signal someone chose to ignore stays ignored (``nohup`` ignores SIGHUP).
    """
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is signal.SIG_DFL:
            signal.signal(sig, _as_interrupt)


def received() -> int | None:
    """The first stop signal this process received (SIGTERM re-raised as SIGINT counts as
    SIGTERM), or None."""
    return _received[0] if _received else None


def reset() -> None:
    """Forget the signals received (for tests that call ``main`` twice in one process)."""
    _received.clear()


def exit_status(default: int) -> int:
    """128 + the stop signal received, else ``default`` (130 for a bare KeyboardInterrupt)."""
    sig = received()
    return default if sig is None else 128 + sig


# -- a reader that leaves (``voicelat run | head -1``) ------------------------------------------
class ReaderSafeStream:
    """A text stream (stdout, stderr) whose reader may go away: the first write that finds the
    pipe closed (``BrokenPipeError``, what Python makes of SIGPIPE) ends the printing, silently,
    and nothing else. The run goes on and its results are written; only the lines nobody can
    read any more are dropped.

    Everything but writing is the wrapped stream's (``isatty``, ``fileno``, ``encoding``...).
    """

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner
        #: True once the reader has gone: every later write is dropped.
        self.reader_gone = False

    def write(self, text: str) -> int:
        """Write through, until the reader has gone."""
        if not self.reader_gone:
            try:
                return self._inner.write(text)
            except BrokenPipeError:
                self._gone()
        return len(text)

    def writelines(self, lines: Any) -> None:
        """Each line through :meth:`write`."""
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        """Flush through, until the reader has gone."""
        if not self.reader_gone:
            try:
                self._inner.flush()
            except BrokenPipeError:
                self._gone()

    def _gone(self) -> None:
        self.reader_gone = True
        # The descriptor now points at /dev/null: the interpreter's last flush of what is still
        # buffered, and a write from below Python (a library's C code), then go nowhere instead
        # of failing again ("Exception ignored ... BrokenPipeError" at exit).
        with contextlib.suppress(OSError, ValueError, AttributeError, io.UnsupportedOperation):
            fd = self._inner.fileno()
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, fd)
            finally:
                os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@contextlib.contextmanager
def output_readers_may_leave() -> Iterator[None]:
    """While a command runs, stdout and stderr are :class:`ReaderSafeStream`: a closed pipe
    (``| head -1``, a pager quit early) ends the printing, never the command or its results.
    Python ignores SIGPIPE (a write gets ``BrokenPipeError`` instead), so this is the one place
    it is handled, for every command."""
    saved = sys.stdout, sys.stderr
    if not isinstance(sys.stdout, ReaderSafeStream) and sys.stdout is not None:
        sys.stdout = cast(TextIO, ReaderSafeStream(sys.stdout))
    if not isinstance(sys.stderr, ReaderSafeStream) and sys.stderr is not None:
        sys.stderr = cast(TextIO, ReaderSafeStream(sys.stderr))
    try:
        yield
    finally:
        # Flushed while still guarded: the last lines may be the ones that find the pipe closed.
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:  # None under pythonw: nothing to flush
                with contextlib.suppress(OSError, ValueError):
                    stream.flush()
        sys.stdout, sys.stderr = saved
