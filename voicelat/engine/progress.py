"""Progress of a run: the events the engine tells an observer (the terminal lines, the TUI's
event stream) while it measures (calls run on the measuring loop, so they must be cheap), and
the human progress lines (``Progress``: "embedded stack ready", warnings) handed to whoever
starts a run, so that ``-q`` is the caller's choice and not a module-wide switch."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Protocol

from voicelat.core.base.plan import PlannedTurn
from voicelat.core.base.turn import Turn


class Observer(Protocol):
    """Receives progress from the engine. Calls must be cheap: they run on the measuring loop."""

    def turn_started(self, planned: PlannedTurn, total: int) -> None: ...

    def milestone(self, index: int, name: str, t_rel_ns: int) -> None: ...

    def turn_finished(self, turn: Turn, total: int) -> None: ...


class NullObserver:
    """An observer that ignores everything (the default)."""

    def turn_started(self, planned: PlannedTurn, total: int) -> None:
        return None

    def milestone(self, index: int, name: str, t_rel_ns: int) -> None:
        return None

    def turn_finished(self, turn: Turn, total: int) -> None:
        return None


#: Where a run's progress lines go: one call per line, never on the measuring loop's hot path.
Progress = Callable[[str], None]


def stderr_progress(msg: str) -> None:
    """A progress line for the person at the terminal (stderr: stdout may carry results)."""
    print(msg, file=sys.stderr, flush=True)


def no_progress(msg: str) -> None:
    """``-q``: progress lines are dropped (errors still print)."""
    return None


def progress_for(quiet: bool) -> Progress:
    """The progress lines a command prints: none under ``-q``, else on stderr."""
    return no_progress if quiet else stderr_progress


__all__ = [
    "NullObserver",
    "Observer",
    "Progress",
    "no_progress",
    "progress_for",
    "stderr_progress",
]
