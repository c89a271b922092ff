"""The turns writer thread: finished turns go to ``turns.jsonl`` off the measuring loop."""

from __future__ import annotations

import queue
import threading

from voicelat.core.base.turn import Turn
from voicelat.files.results import TurnsWriter


class TurnsWriterThread:
    """Writes finished turns (JSON + fsync) on a thread of its own: with several sessions,
    other turns are being stamped while one is written, and an fsync can block for
    milliseconds. Order is kept; :meth:`close` waits until every turn is on disk."""

    def __init__(self, writer: TurnsWriter) -> None:
        self._writer = writer
        self._queue: queue.SimpleQueue[Turn | None] = queue.SimpleQueue()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._work, name="voicelat-writer", daemon=True)
        self._thread.start()

    def write(self, turn: Turn) -> None:
        """Queue ``turn`` for writing (returns at once); raises the first write error (a full
        disk) at the next turn, so that the run stops then rather than measure turns it
        cannot keep."""
        if self.error is not None:
            raise self.error
        self._queue.put(turn)

    def _work(self) -> None:
        while (turn := self._queue.get()) is not None:
            try:
                self._writer.write(turn)
            except BaseException as exc:  # reported by close(), on the caller's thread
                self.error = self.error or exc

    def close(self) -> None:
        """Wait until every queued turn is written, close the file; re-raise a write error."""
        self._queue.put(None)
        self._thread.join()
        self._writer.close()
        if self.error is not None:
            raise self.error


__all__ = ["TurnsWriterThread"]
