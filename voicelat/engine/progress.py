"""Progress events of a run: what the engine tells an observer (the terminal lines, the TUI's
event stream) while it measures. Calls run on the measuring loop, so they must be cheap."""

from __future__ import annotations

from typing import Protocol

from voicelat.core.plan import PlannedTurn
from voicelat.core.turn import Turn


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


__all__ = ["NullObserver", "Observer"]
