"""``voicelat compare``'s lines while it measures: each finished turn on stdout, and the
comparison's progress with an ETA on stderr (the engine's ``CompareObserver``)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence

from voicelat.core.base.turn import Turn
from voicelat.files.matrix import Slot

__all__ = ["CompareLines"]


class CompareLines:
    """Each finished turn's line on stdout, and the comparison's progress with an ETA on
    stderr (turns, combinations finished, elapsed, ETA from the mean turn so far).

    Called between turns, never during one: nothing here runs while a turn is stamped.
    """

    def __init__(
        self, schedule: Sequence[Slot], combos: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        from voicelat.report.text import turn_line

        self._turn_line = turn_line
        self.total = len(schedule)
        self.combos = combos
        #: The position of each combination's last turn: past it, the combination is done.
        self.last = {s.combination: s.position for s in schedule}
        self.clock = clock
        self.t0 = self.mark = clock()
        self.done = self.failed = 0
        self.finished: set[int] = set()
        self.turn_s: list[float] = []

    def start(self) -> None:
        """Set-up is over: the clock of the ETA starts with the first turn."""
        self.t0 = self.mark = self.clock()

    def skip(self, slot: Slot) -> None:
        """A turn of a combination that could not start: counted, not timed."""
        self.done += 1
        self._count(slot)

    def __call__(self, slot: Slot, combo: str, turn: Turn) -> None:
        now = self.clock()
        self.turn_s.append(now - self.mark)
        self.mark = now
        self.done += 1
        self.failed += turn.failed
        self._count(slot)
        width = len(str(self.total))
        line = self._turn_line(turn, 1).split("] ", 1)[-1]
        print(f"[{slot.position + 1:>{width}}/{self.total}] {combo:<28} {line}", flush=True)
        print(self.line(), file=sys.stderr, flush=True)

    def _count(self, slot: Slot) -> None:
        if self.last.get(slot.combination) == slot.position:
            self.finished.add(slot.combination)

    def line(self) -> str:
        from voicelat.report.progress import CompareProgress, progress_line

        return progress_line(
            CompareProgress(
                done=self.done,
                total=self.total,
                combos_done=len(self.finished),
                combos=self.combos,
                elapsed_s=self.clock() - self.t0,
                turn_s=tuple(self.turn_s),
                failed=self.failed,
            )
        )
