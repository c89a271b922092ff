"""Whole calls: a scenario's steps, a call's own record, and the figures of calls in a run.

A call is one connection or session (the cascade's stage connections and conversation, one
realtime session, one agent call) that runs a scenario's steps in order on one clock:

* ``say``: the user speaks a fixture, after the agent's reply ended plus a human gap
  (``gap_ms``, with an optional seeded ``spread_ms``), or at a fixed offset on the call's clock
  (``at_ms``); each is a measured turn like any other (its e2e and segments), with its call id
  and its index in the call;
* ``silence``: the user says nothing for that long (does the agent re-prompt, and when?);
* ``expect_greeting``: the agent speaks first; its greeting latency is call connected -> the
  first audible agent audio at the sink.

Pure: the scenario model, the :class:`CallRecord` a call leaves, and :func:`calls_section`,
the ``calls`` section of ``summary.json`` (greeting and per-index percentiles, dead air,
duration). Tested with plain integers.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from voicelat.core.base.stats import Distribution
from voicelat.core.base.turn import Turn
from voicelat.core.calls.bargein import OverlayOutcome, barge_in_section
from voicelat.core.calls.caller import CallerSpec

__all__ = [
    "CALL_CONNECTED",
    "CALL_GREETING",
    "CALL_ID",
    "CALL_TURN",
    "DEFAULT_AFTER_MS",
    "INTERRUPTED",
    "INTERRUPTING",
    "OVERLAY_STEPS",
    "TURN_STEPS",
    "CallRecord",
    "Scenario",
    "SilenceOutcome",
    "Step",
    "calls_section",
    "gap_ns",
    "index_label",
]

#: The ``extra`` keys a call's turns carry: its call, its index in the call (1-based), when the
#: call connected (ns on the run's clock, like ``t0_ns``), and on a call's first turn the
#: greeting's latency before it (ns).
CALL_ID = "call_id"
CALL_TURN = "call_turn"
CALL_CONNECTED = "call_connected_ns"
CALL_GREETING = "call_greeting_ns"
#: The ``extra`` key of a turn whose input cut into the reply before it (an ``interrupt``).
INTERRUPTING = "interrupting"
#: The ``extra`` key of a turn whose reply an interruption stopped.
INTERRUPTED = "interrupted"
#: Turn indexes from this one on share a row in the per-index table ("5+").
MAX_INDEX_ROWS = 10
NS_PER_MS = 1_000_000

StepKind = Literal["say", "silence", "greeting", "interrupt", "backchannel", "noise"]
#: The steps that play during the previous step's reply (``core/calls/bargein.py``).
OVERLAY_STEPS = ("interrupt", "backchannel", "noise")
#: The steps the user speaks a measured turn in (an interruption is the next turn).
TURN_STEPS = ("say", "interrupt")
#: An overlay's default offset: this long after the reply became audible.
DEFAULT_AFTER_MS = 1000


@dataclass(frozen=True)
class Step:
    """One step of a scenario (see the module docstring). ``fixture``: for ``say``;
    ``ms``: the silence's length; ``gap_ms``/``spread_ms``: the human gap after the reply;
    ``at_ms``: a fixed start on the call's clock instead; ``line``: where it was written.
    Overlays (``interrupt``, ``backchannel``, ``noise``) play ``fixture`` during the previous
    step's reply, ``after_ms`` after it became audible; ``pause_ms``: the pause that counts
    as a false barge-in on a backchannel or noise (``core/calls/bargein.py``)."""

    kind: StepKind
    fixture: str | None = None
    ms: int = 0
    gap_ms: int = 600
    spread_ms: int = 0
    at_ms: int | None = None
    line: str = ""
    after_ms: int = DEFAULT_AFTER_MS
    pause_ms: int | None = None

    @property
    def overlay(self) -> bool:
        """The step plays during the previous step's reply."""
        return self.kind in OVERLAY_STEPS


@dataclass(frozen=True)
class Scenario:
    """A call's script: its steps in order, where it came from, what a failed step does."""

    name: str
    steps: tuple[Step, ...]
    source: str = ""
    description: str = ""
    #: ``continue``: a step whose reply never came is recorded failed and the call goes on;
    #: ``end``: the call ends there.
    on_failure: Literal["continue", "end"] = "continue"
    seed: int = 1
    #: What voicelat's own cascade says when it greets (it has no greeting of its own).
    greeting: str = "Hello, thanks for calling. How can I help you today?"
    #: A simulated caller (docs/CALLER.md): its lines follow the scripted steps, decided one
    #: by one from what the agent said; None: the steps are the whole call.
    caller: CallerSpec | None = None

    @property
    def max_turns(self) -> int:
        """The most measured turns the call can have: its ``say`` steps, and the simulated
        caller's hard turn limit (turn indexes are set aside for that many)."""
        return len(self.says) + (self.caller.max_turns if self.caller is not None else 0)

    @property
    def says(self) -> tuple[Step, ...]:
        """The steps the user speaks in (the call's measured turns; an interruption is one)."""
        return tuple(s for s in self.steps if s.kind in TURN_STEPS)

    @property
    def overlays(self) -> tuple[Step, ...]:
        """The steps that play during a reply."""
        return tuple(s for s in self.steps if s.overlay)

    @property
    def greets(self) -> bool:
        """Whether the agent is expected to speak first."""
        return any(s.kind == "greeting" for s in self.steps)

    def fixture_ids(self) -> list[str]:
        """The fixtures of the scenario's measured turns, in order (repeats kept)."""
        return [s.fixture for s in self.says if s.fixture is not None]

    def played_fixture_ids(self) -> list[str]:
        """Every fixture the scenario plays, in order: its turns' and its overlays'."""
        return [s.fixture for s in self.steps if s.fixture is not None]


def gap_ns(step: Step, rng: random.Random) -> int:
    """The human gap before ``step``: ``gap_ms`` plus a uniform spread in
    ``[-spread_ms, +spread_ms]`` drawn from the call's seeded ``rng``, never negative."""
    spread = rng.uniform(-step.spread_ms, step.spread_ms) if step.spread_ms else 0.0
    return max(0, int((step.gap_ms + spread) * NS_PER_MS))


@dataclass(frozen=True)
class SilenceOutcome:
    """A ``silence`` step: how long the user said nothing and whether (when) the agent spoke
    into it (a re-prompt), in ns from the silence's start."""

    ms: int
    agent_spoke_after_ns: int | None = None


@dataclass(frozen=True)
class CallRecord:
    """What one call leaves besides its turns (``calls.jsonl``, one line a call).

    Times are ns on the run's clock except the ``*_ns`` durations. ``greeting_ns``: connected
    -> the greeting's first audible sample at the sink (None: no greeting expected, or none
    came: ``greeting_missing``). ``dead_air_max_ns``: the longest the user waited on a silent
    line for the agent (the greeting's and each turn's wait). ``failed_step``: the first step
    that failed, with its reason."""

    call_id: str
    scenario: str
    connected_ns: int
    ended_ns: int
    turns_planned: int
    turns_completed: int
    turn_indexes: tuple[int, ...] = ()
    greeting_ns: int | None = None
    greeting_expected: bool = False
    greeting_first_audible_ns: int | None = None
    dead_air_max_ns: int | None = None
    failed_step: str | None = None
    failure_reason: str | None = None
    ended_early: bool = False
    silences: tuple[SilenceOutcome, ...] = ()
    session: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: Each overlay step's outcome (interruptions, backchannels, noise; ``core/calls/bargein.py``).
    overlays: tuple[OverlayOutcome, ...] = ()

    @property
    def duration_ns(self) -> int:
        """Connected -> the end of the call's last step."""
        return self.ended_ns - self.connected_ns

    @property
    def greeting_missing(self) -> bool:
        """A greeting was expected and no audible audio came."""
        return self.greeting_expected and self.greeting_ns is None

    def to_json(self) -> dict[str, Any]:
        """The record as one ``calls.jsonl`` line (times relative to ``connected_ns``)."""
        return {
            "call_id": self.call_id,
            "scenario": self.scenario,
            "session": self.session,
            "connected_ns": self.connected_ns,
            "duration_ns": self.duration_ns,
            "turns_planned": self.turns_planned,
            "turns_completed": self.turns_completed,
            "turn_indexes": list(self.turn_indexes),
            "greeting_expected": self.greeting_expected,
            "greeting_ns": self.greeting_ns,
            "greeting_first_audible_ns": self.greeting_first_audible_ns,
            "dead_air_max_ns": self.dead_air_max_ns,
            "failed_step": self.failed_step,
            "failure_reason": self.failure_reason,
            "ended_early": self.ended_early,
            "silences": [
                {"ms": s.ms, "agent_spoke_after_ns": s.agent_spoke_after_ns} for s in self.silences
            ],
            **({"overlays": [o.to_json() for o in self.overlays]} if self.overlays else {}),
            **({"extra": self.extra} if self.extra else {}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CallRecord:
        """A record read back from ``calls.jsonl``."""
        connected = int(data.get("connected_ns") or 0)
        return cls(
            call_id=str(data.get("call_id", "")),
            scenario=str(data.get("scenario", "")),
            session=data.get("session"),
            connected_ns=connected,
            ended_ns=connected + int(data.get("duration_ns") or 0),
            turns_planned=int(data.get("turns_planned") or 0),
            turns_completed=int(data.get("turns_completed") or 0),
            turn_indexes=tuple(int(i) for i in data.get("turn_indexes") or ()),
            greeting_expected=bool(data.get("greeting_expected")),
            greeting_ns=data.get("greeting_ns"),
            greeting_first_audible_ns=data.get("greeting_first_audible_ns"),
            dead_air_max_ns=data.get("dead_air_max_ns"),
            failed_step=data.get("failed_step"),
            failure_reason=data.get("failure_reason"),
            ended_early=bool(data.get("ended_early")),
            silences=tuple(
                SilenceOutcome(int(s.get("ms", 0)), s.get("agent_spoke_after_ns"))
                for s in data.get("silences") or ()
                if isinstance(s, Mapping)
            ),
            extra=dict(data.get("extra") or {}),
            overlays=tuple(
                OverlayOutcome.from_json(o)
                for o in data.get("overlays") or ()
                if isinstance(o, Mapping)
            ),
        )


def index_label(call_turn: int) -> str:
    """The per-index table's row of a call's ``call_turn`` (1-based; the last row gathers
    ``MAX_INDEX_ROWS`` and later)."""
    return str(call_turn) if call_turn < MAX_INDEX_ROWS else f"{MAX_INDEX_ROWS}+"


def _by_index(turns: Iterable[Turn]) -> dict[str, list[int]]:
    rows: dict[str, list[int]] = {}
    for t in turns:
        index = t.extra.get(CALL_TURN)
        if not isinstance(index, int) or not t.ok or t.e2e_ns is None:
            continue
        rows.setdefault(index_label(index), []).append(t.e2e_ns)
    return dict(sorted(rows.items(), key=lambda kv: int(kv[0].rstrip("+"))))


def calls_section(calls: Sequence[CallRecord], turns: Iterable[Turn]) -> dict[str, Any]:
    """The ``calls`` section of ``summary.json``: counts, the greeting's distribution, e2e by
    the turn's index in its call (``n`` per index), dead air and duration (integer ns).

    Every ok turn of a call counts in its index's row, warm-up and cold ones too: the index is
    the point (turn 1 of a call is the one on a fresh connection)."""
    turns = [t for t in turns if isinstance(t.extra.get(CALL_ID), str)]
    overlays = [o for c in calls for o in c.overlays]
    interrupting = [
        t.e2e_ns for t in turns if t.extra.get(INTERRUPTING) and t.ok and t.e2e_ns is not None
    ]
    greetings = [c.greeting_ns for c in calls if c.greeting_ns is not None]
    dead_air = [c.dead_air_max_ns for c in calls if c.dead_air_max_ns is not None]
    by_index = _by_index(turns)
    first = by_index.get("1", [])
    later = [v for k, vs in by_index.items() if k != "1" for v in vs]
    return {
        "n": len(calls),
        "completed": sum(1 for c in calls if c.failed_step is None and not c.greeting_missing),
        "ended_early": sum(1 for c in calls if c.ended_early),
        "turns_planned": sum(c.turns_planned for c in calls),
        "turns_completed": sum(c.turns_completed for c in calls),
        "greeting": {
            "expected": sum(1 for c in calls if c.greeting_expected),
            "missing": sum(1 for c in calls if c.greeting_missing),
            **Distribution.of(greetings).to_json(),
        },
        "e2e_by_index": {k: Distribution.of(v).to_json() for k, v in by_index.items()},
        "e2e_first_turn": Distribution.of(first).to_json(),
        "e2e_later_turns": Distribution.of(later).to_json(),
        "dead_air_max": Distribution.of(dead_air).to_json(),
        "duration": Distribution.of([c.duration_ns for c in calls]).to_json(),
        "scenarios": sorted({c.scenario for c in calls}),
        "failed_steps": [
            {"call_id": c.call_id, "step": c.failed_step, "reason": c.failure_reason}
            for c in calls
            if c.failed_step is not None
        ][:50],
        **({"barge_in": barge_in_section(overlays, interrupting)} if overlays else {}),
    }
