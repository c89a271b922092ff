"""What the TUI shows, as plain data: a run's turns, the live turn, the budget, sort order.

Nothing here imports Textual or draws anything. Widgets ask this model for numbers and hand
them to the pure renderables in :mod:`voicelat.tui.render`, so every figure on screen can be
unit-tested with literal turns and no App.

The live run reaches the model as :data:`RunEvent` values: the measuring child process writes
its observer calls as JSON lines (:mod:`voicelat.tui.protocol`), a reader thread decodes them
onto a thread-safe queue (:mod:`voicelat.tui.live`), and the UI thread drains the queue and
calls :meth:`RunModel.apply`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from voicelat.core.base.contract import E2E
from voicelat.core.base.display import NS_PER_MS as NS_PER_MS
from voicelat.core.base.display import fmt_ms as core_fmt_ms
from voicelat.core.base.display import round_to_total as round_to_total
from voicelat.core.base.stats import PERCENTILES, Band, Distribution
from voicelat.core.base.turn import Turn

# Re-exported: the screen's modules (and their tests) import these from here.
from voicelat.core.judge.budget import BudgetVerdict as BudgetVerdict
from voicelat.core.judge.budget import crossing_segment as crossing_segment
from voicelat.core.judge.budget import judge as judge
from voicelat.core.judge.budget import lenient_budget
from voicelat.core.summaries.run_summary import RunSummary
from voicelat.core.summaries.summary import (
    headline_turns,
    segment_distributions,
    span_distributions,
    waterfall,
)
from voicelat.files.results import LoadedRun

#: Milestones the runner reports live, in the order they happen on a normal turn.
LIVE_MILESTONES: tuple[str, ...] = (
    "endpoint",
    "stt_final",
    "llm_first_token",
    "llm_first_speakable",
    "tts_first_byte",
    "output_first_audible",
)

#: Network sub-spans shown first, in this order (the ones DESIGN §2 names); others follow.
SPAN_ORDER: tuple[str, ...] = ("connect", "tls", "request_sent", "response_headers", "pool_wait")

#: Readable names for span names that are protocol jargon.
# "TTFB" alone reads as time to first token to Pipecat and LiveKit users: these are the HTTP
# response headers, which arrive before any token or audio.
SPAN_LABELS: dict[str, str] = {"response_headers": "response headers"}


# -- events from the measuring process --------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TurnStarted:
    """A turn is about to be paced in; ``speech_end_ns`` is relative to the turn's t0."""

    index: int
    fixture: str
    total: int
    warmup: bool
    speech_end_ns: int | None


@dataclass(frozen=True, slots=True)
class MilestoneSeen:
    """A live milestone: ``t_rel_ns`` after t0; ``seen_ns`` is ``perf_counter_ns`` at report time.

    ``seen_ns`` lets the UI place t0 on its own clock (perf_counter is system-wide), so it can
    draw a "now" cursor without asking the measuring loop for anything.
    """

    index: int
    name: str
    t_rel_ns: int
    seen_ns: int


@dataclass(frozen=True, slots=True)
class TurnFinished:
    """A turn ended and is already on disk."""

    turn: Turn
    total: int


@dataclass(frozen=True, slots=True)
class RunEnded:
    """The measuring process is done: ``status`` is complete, interrupted or failed."""

    status: str
    message: str | None = None
    #: The summary's ``instrument`` section (the run's error bar), read from the summary the
    #: child wrote; not compared (an event is the status, whatever the machine measured).
    instrument: Mapping[str, Any] | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class SetupLine:
    """A progress line printed while the stack and stages come up."""

    text: str


RunEvent = TurnStarted | MilestoneSeen | TurnFinished | RunEnded | SetupLine


# -- the live turn -----------------------------------------------------------------------------
@dataclass
class LiveTurn:
    """The turn being measured: the milestones seen so far, relative to its t0."""

    index: int
    fixture: str
    warmup: bool
    speech_end_ns: int | None
    milestones: dict[str, int] = field(default_factory=dict)
    #: t0 on the ``perf_counter_ns`` clock, known once the first milestone arrived.
    t0_clock_ns: int | None = None

    def since_speech_end(self, name: str) -> int | None:
        """Where a seen milestone lies on the timeline that starts at ``speech_end`` (ns)."""
        t = self.milestones.get(name)
        if t is None:
            return None
        return t - (self.speech_end_ns or 0)

    def elapsed_ns(self, clock_ns: int) -> int | None:
        """Time since ``speech_end`` at ``clock_ns`` (``perf_counter_ns``), if t0 is placed."""
        if self.t0_clock_ns is None:
            return None
        return clock_ns - self.t0_clock_ns - (self.speech_end_ns or 0)


# -- formatting ------------------------------------------------------------------------------
def fmt_ms(ns: float | int | None) -> str:
    """Milliseconds for a table cell: one decimal below 10 ms (sub-spans live there)."""
    return core_fmt_ms(ns, fine_below_ms=10)


# -- budget ------------------------------------------------------------------------------------
# The judging itself is core's (voicelat.core.judge.budget), the one the gate uses; these read the
# run's raw [budget] table the way the screen needs.
def e2e_budget_ns(budget: Mapping[str, Any], p: int) -> float | None:
    """The pipeline's e2e limit at percentile ``p`` (``[budget.e2e] pNN_ms``), in ns."""
    return segment_limit_ns(budget, E2E, p)


def segment_limit_ns(budget: Mapping[str, Any], name: str, p: int) -> float | None:
    """A ``[budget.<name>] pNN_ms`` limit in ns, or None when the budget sets none."""
    return lenient_budget(budget).limit_ns(name, p)


# -- turns table -------------------------------------------------------------------------------
SORT_KEYS: tuple[str, ...] = ("index", "e2e", "largest", "fixture", "status")
SORT_LABELS: dict[str, str] = {
    "index": "turn #",
    "e2e": "e2e (slowest first)",
    "largest": "largest segment (slowest first)",
    "fixture": "fixture",
    "status": "status (failed first)",
}


def turn_status(turn: Turn) -> str:
    """One word for the turns table: failed, warm-up, cold, flagged or ok."""
    if turn.failed:
        return "failed"
    if turn.warmup:
        return "warm-up"
    if turn.cold:
        return "cold"
    if turn.flags:
        return "flagged"
    return "ok"


_STATUS_RANK = {"failed": 0, "flagged": 1, "cold": 2, "warm-up": 3, "ok": 4}


def _sort_key(key: str) -> Callable[[Turn], tuple[Any, ...]]:
    if key == "index":
        return lambda t: (t.index,)
    if key == "e2e":
        return lambda t: (t.e2e_ns is None, -(t.e2e_ns or 0), t.index)
    if key == "largest":

        def largest(t: Turn) -> tuple[Any, ...]:
            big = t.largest_segment()
            return (big is None, -(big[1] if big else 0), t.index)

        return largest
    if key == "fixture":
        return lambda t: (t.fixture, t.index)
    if key == "status":
        return lambda t: (_STATUS_RANK[turn_status(t)], t.index)
    raise ValueError(f"unknown sort key {key!r} (one of {', '.join(SORT_KEYS)})")


def sorted_positions(turns: Sequence[Turn], key: str) -> list[int]:
    """Positions in ``turns`` in table order. Slow-first for times, so the turns worth a look
    come first; turns without the number (failed) go last; ties keep run order."""
    order = _sort_key(key)
    return sorted(range(len(turns)), key=lambda i: order(turns[i]))


def sort_turns(turns: Iterable[Turn], key: str) -> list[Turn]:
    """Turns in table order (see :func:`sorted_positions`)."""
    items = list(turns)
    return [items[i] for i in sorted_positions(items, key)]


def next_in(options: Sequence[Any], current: Any) -> Any:
    """The option after ``current``, wrapping around (keys cycle through choices)."""
    try:
        return options[(list(options).index(current) + 1) % len(options)]
    except ValueError:
        return options[0]


# -- the run ---------------------------------------------------------------------------------
@dataclass
class RunModel:
    """Everything the screen shows about one run, saved or live."""

    results_path: Path | None
    turns: list[Turn] = field(default_factory=list)
    planned: int | None = None
    budget: dict[str, Any] = field(default_factory=dict)
    pipeline_name: str = "?"
    #: starting, running, stopping, complete, interrupted, failed (or a saved run's status)
    status: str = "starting"
    message: str | None = None
    skipped_lines: int = 0
    pacer_lag_limit_ns: int | None = None
    live: LiveTurn | None = None
    live_mode: bool = False
    setup_log: deque[str] = field(default_factory=lambda: deque(maxlen=8))
    started: str | None = None
    #: The summary's ``instrument`` section: the run's error bar (None: not known yet, or a
    #: run from before calibration existed).
    instrument: Mapping[str, Any] | None = None

    @classmethod
    def from_loaded(cls, run: LoadedRun) -> RunModel:
        """A saved run: the turns that could be read, the summary's budget and run facts."""
        summary = run.run_summary
        s = summary or RunSummary()
        turn_cfg = s.pipeline.get("turn") or {}
        limit_ms = turn_cfg.get("pacer_lag_limit_ms")
        status = s.run.status if summary is not None else None
        return cls(
            results_path=run.path,
            turns=sorted(run.turns, key=lambda t: t.index),
            planned=s.run.planned_turns,
            budget=dict(s.budget),
            pipeline_name=s.pipeline_name or "?",
            # No summary means the run never reached its `finally`: killed mid-run.
            status=str(status) if status else "no summary (run killed?)",
            skipped_lines=run.skipped_lines,
            pacer_lag_limit_ns=(
                int(limit_ms * NS_PER_MS)
                if isinstance(limit_ms, int | float) and 0 <= limit_ms < 1e9
                else None
            ),
            started=s.run.started,
            instrument=inst if isinstance(inst := s.extra.get("instrument"), Mapping) else None,
        )

    # -- live updates --------------------------------------------------------------------------
    def apply(self, event: RunEvent) -> None:
        """Fold one event from the measuring process into the model."""
        if isinstance(event, TurnStarted):
            self.status = "stopping" if self.status == "stopping" else "running"
            self.planned = event.total
            self.live = LiveTurn(event.index, event.fixture, event.warmup, event.speech_end_ns)
        elif isinstance(event, MilestoneSeen):
            live = self.live
            if live is None or live.index != event.index:
                return  # a late event of a turn already settled
            live.milestones[event.name] = event.t_rel_ns
            if live.t0_clock_ns is None:
                live.t0_clock_ns = event.seen_ns - event.t_rel_ns
        elif isinstance(event, TurnFinished):
            self.planned = event.total
            self.turns.append(event.turn)
            if self.live is not None and self.live.index == event.turn.index:
                self.live = None
        elif isinstance(event, RunEnded):
            self.status = event.status
            self.message = event.message
            self.live = None
            if event.instrument is not None:
                self.instrument = event.instrument
        elif isinstance(event, SetupLine):
            text = event.text.strip()
            if text:
                self.setup_log.append(text)

    @property
    def running(self) -> bool:
        """The measuring process is still going (live runs only)."""
        return self.live_mode and self.status in ("starting", "running", "stopping")

    # -- figures -------------------------------------------------------------------------------
    def headline(self) -> list[Turn]:
        """Turns in the headline numbers (measured, warm, not warm-up): what percentiles use."""
        return headline_turns(self.turns)

    def bands(self) -> dict[int, Band]:
        """The percentile waterfall bands of the headline turns."""
        bands: dict[int, Band] = waterfall(self.headline(), PERCENTILES)
        return bands

    def segment_dists(self) -> dict[str, Distribution]:
        """Per-segment (and e2e) distributions of the headline turns."""
        return segment_distributions(self.headline())

    def span_dists(self) -> dict[str, dict[str, Distribution]]:
        """Network sub-span distributions per stage, of the headline turns."""
        return span_distributions(self.headline())

    def counts(self) -> dict[str, int]:
        """Turn counts for the status line."""
        turns = self.turns
        return {
            "done": len(turns),
            "failed": sum(t.failed for t in turns),
            "warmup": sum(t.warmup for t in turns),
            "cold": sum(t.cold and not t.warmup and t.ok for t in turns),
            "headline": len(self.headline()),
            "flagged": sum(bool(t.flags) for t in turns),
        }

    def max_figure(self, name: str) -> int | None:
        """The largest per-turn figure ``name`` over every turn (lag is judged on all turns)."""
        values = [v for t in self.turns if isinstance(v := t.figures.get(name), int | float)]
        return int(max(values)) if values else None
