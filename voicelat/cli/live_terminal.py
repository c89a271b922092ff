"""``voicelat live``'s terminal side: the per-turn lines without the TUI, the keys read from
stdin (q stops, space/Enter is push-to-talk), and the observer wrapper that announces a live
turn's speech end to the TUI's event stream."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from typing import TYPE_CHECKING, Any

from voicelat.core.base.plan import PlannedTurn
from voicelat.core.base.turn import Turn
from voicelat.engine.progress import stderr_progress as _info

if TYPE_CHECKING:
    from voicelat.engine.live import LiveSession

__all__ = ["Keys", "LivePrinter", "SpeechEndAnnouncer"]


class LivePrinter:
    """The observer without the TUI: a line per turn on stdout, progress on stderr."""

    def __init__(self, ptt: bool) -> None:
        self.ptt = ptt

    def turn_started(self, planned: PlannedTurn, total: int) -> None:
        what = "talking" if self.ptt else "speech heard"
        _info(f"turn {planned.index + 1}: {what} ...")

    def milestone(self, index: int, name: str, t_rel_ns: int) -> None:
        return None

    def turn_finished(self, turn: Turn, total: int) -> None:
        from voicelat.report.text import turn_line

        print(turn_line(turn, total), flush=True)


class Keys:
    """Keys from stdin without the TUI: q stops, space/Enter is push-to-talk.

    A terminal is put in cbreak mode (keys arrive without Enter; Ctrl-C still interrupts)
    and restored on exit; a pipe works too (tests drive a session through it).
    """

    def __init__(self, session: LiveSession, ptt: bool) -> None:
        self.session = session
        self.ptt = ptt
        self._fd: int | None = None
        self._saved: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def install(self) -> None:
        """On the session's loop, once it listens."""
        try:
            fd = sys.stdin.fileno()
        except (AttributeError, OSError, ValueError):
            return
        if os.isatty(fd):
            import termios
            import tty

            with contextlib.suppress(termios.error):
                self._saved = termios.tcgetattr(fd)
                tty.setcbreak(fd)
        loop = asyncio.get_running_loop()
        try:
            loop.add_reader(fd, self._read)
        except (OSError, ValueError, NotImplementedError):
            return  # a regular file or /dev/null: no keys, q is Ctrl-C
        self._fd, self._loop = fd, loop

    def _read(self) -> None:
        assert self._fd is not None and self._loop is not None
        try:
            data = os.read(self._fd, 256)
        except OSError:
            data = b""
        if not data:
            self._loop.remove_reader(self._fd)
            return
        for ch in data.decode("utf-8", "ignore"):
            if ch in "qQ":
                self.session.request_stop()
            elif ch in " \r\n" and self.ptt:
                self.session.press()

    def restore(self) -> None:
        """Give the terminal back as it was."""
        if self._saved is not None:
            import termios

            with contextlib.suppress(termios.error, OSError):
                termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, self._saved)
            self._saved = None


class SpeechEndAnnouncer:
    """An observer wrapper for the TUI's event stream: a live turn's ``speech_end`` (the
    live timeline's zero) is known only at its endpoint, so the turn is announced again
    then, with it, just before the endpoint milestone (the first one a turn reports)."""

    def __init__(self, inner: Any, session: LiveSession) -> None:
        self.inner = inner
        self.session = session
        self._planned: dict[int, tuple[PlannedTurn, int]] = {}

    def turn_started(self, planned: PlannedTurn, total: int) -> None:
        self._planned[planned.index] = (planned, total)
        self.inner.turn_started(planned, total)

    def milestone(self, index: int, name: str, t_rel_ns: int) -> None:
        if name == "endpoint" and index in self._planned:
            end = self.session.speech_end_rel_ns(index)
            ends = getattr(self.inner, "speech_end_ns", None)
            if end is not None and isinstance(ends, dict):
                planned, total = self._planned[index]
                ends[planned.fixture] = end
                self.inner.turn_started(planned, total)
        self.inner.milestone(index, name, t_rel_ns)

    def turn_finished(self, turn: Turn, total: int) -> None:
        self._planned.pop(turn.index, None)
        self.inner.turn_finished(turn, total)
