"""Latency budgets: parse a ``[budget]`` table and hold a run against it (pure; no I/O).

The one budget judge: :func:`evaluate_budget` (the gate's checks) and :func:`judge` (the TUI's
verdict on a waterfall band) hold values to limits the same way. Budget files are read by
:func:`voicelat.files.budget.load_budget_file`.

A budget is a ``[budget]`` table, in a budget file or in the pipeline file::

    [budget]
    max_failure_rate = 0.05   # failed turns / turns run (default 0: any failed turn fails)
    min_turns = 8             # warm (headline) turns needed for a verdict (default 5)
    [budget.e2e]
    p50_ms = 900
    p90_ms = 1400
    [budget.llm_ttft]         # any segment of the metric contract
    p90_ms = 250
    [budget.greeting]         # a run of calls: the greeting, turn 1, the later turns
    p90_ms = 1500             # (e2e_first_turn, e2e_later_turns) and dead_air_max
    [budget.barge_in_stop]    # interruptions: onset -> the agent silent at the ear
    p90_ms = 800              # (an interruption it never stopped for fails the line)
    false_barge_in_rate = 0.1 # (under [budget]) backchannels/noise the agent stopped on

Every limit becomes one :class:`Check`; a value equal to its limit passes.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard

from voicelat.core.base.contract import ALL_SEGMENTS, E2E
from voicelat.core.base.display import NS_PER_MS as NS_PER_MS
from voicelat.core.base.display import fmt_ms
from voicelat.core.base.errors import ConfigError
from voicelat.core.summaries.run_summary import CALL_METRICS, DistSummary, RunSummary, SummaryLike

#: Finds the line of ``key`` in ``[table]`` (or of the table's header) in a TOML source.
LineLocator = Callable[[str, str | None], int | None]

#: What a budget may limit: voice-to-voice latency and each segment of a critical path (the
#: cascade's, an S2S model's ``model``, an agent's ``agent_response`` and ``transport``), and
#: for a run of calls the greeting, e2e of turn 1 and of the later turns, and dead air.
METRICS: tuple[str, ...] = (E2E, *ALL_SEGMENTS, *CALL_METRICS)
#: Limit keys inside a metric table, and the percentile each one limits.
PERCENTILE_KEYS: dict[str, int] = {"p50_ms": 50, "p90_ms": 90, "p99_ms": 99}
#: Scalar keys directly under ``[budget]``. ``cost_per_turn``: the mean cost of a completed
#: turn, in the currency of the pipeline's ``[cost]`` prices (core/judge/cost.py).
SCALAR_KEYS: tuple[str, ...] = (
    "max_failure_rate",
    "min_turns",
    "cost_per_turn",
    "false_barge_in_rate",
)

#: Below five warm turns a P90 is the maximum of the sample: too few to call a verdict on.
DEFAULT_MIN_TURNS = 5
#: A failed turn is missing from the percentiles, so by default any failure fails the gate
#: (otherwise the slowest turns could time out and make the budget look better).
DEFAULT_MAX_FAILURE_RATE = 0.0


@dataclass(frozen=True, slots=True)
class Limit:
    """One budget line: ``metric`` at percentile ``percentile`` must stay at or under ``limit_ms``."""

    metric: str
    percentile: int
    limit_ms: float

    @property
    def name(self) -> str:
        """The line's stable name, e.g. ``e2e P90`` (used as the JUnit test case name)."""
        return f"{self.metric} P{self.percentile}"


@dataclass(frozen=True, slots=True)
class Budget:
    """A parsed budget: the limits, the failure-rate ceiling and the minimum sample."""

    limits: tuple[Limit, ...] = ()
    max_failure_rate: float = DEFAULT_MAX_FAILURE_RATE
    min_turns: int = DEFAULT_MIN_TURNS
    source: str = "defaults"
    #: The ceiling on the mean cost of a completed turn (None: cost is not gated).
    cost_per_turn: float | None = None
    #: The ceiling on false barge-ins per backchannel or noise step (None: not gated).
    false_barge_in_rate: float | None = None

    def limit_ns(self, metric: str, p: int) -> float | None:
        """The limit (ns) on ``metric`` at percentile ``p``, or None when the budget sets none."""
        for lim in self.limits:
            if lim.metric == metric and lim.percentile == p:
                return lim.limit_ms * NS_PER_MS
        return None


@dataclass(frozen=True, slots=True)
class Check:
    """One line of the gate's verdict (a budget limit, the sample size or a regression check).

    ``message`` is a single line that names what was measured and the limit it was held to;
    ``measured``/``limit`` carry the numbers (``unit`` says which unit) for reports.
    """

    suite: str  # "budget", "sample" or "regression"
    name: str
    passed: bool
    message: str
    measured: float | None = None
    limit: float | None = None
    unit: str = "ms"


def valid_budget_keys() -> list[str]:
    """Every key ``[budget]`` accepts, sorted (for error messages and docs)."""
    return sorted((*METRICS, *SCALAR_KEYS))


def _is_number(value: object) -> TypeGuard[int | float]:
    # Finite and sane: a NaN limit compares false with everything and so never breaks.
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and value == value
        and abs(value) < 1e12
    )


def parse_budget(
    table: Mapping[str, Any], *, source: str = "budget", locate: LineLocator | None = None
) -> Budget:
    """Validate a raw ``[budget]`` table; errors are one line naming the file, table and key.

    ``locate`` finds a key's line in the TOML source, when there is one, so errors can give a
    line number (the file reader passes the pipeline loader's locator).
    """

    def line_of(tbl: str, key: str | None) -> int | None:
        return None if locate is None else locate(tbl, key)

    def err(tbl: str, key: str | None, msg: str) -> ConfigError:
        # A sub-table written as [budget.name] has no "name =" line: point at its header.
        line = (key and line_of(f"{tbl}.{key}", None)) or line_of(tbl, key)
        loc = f"{source}:{line}" if line else source
        return ConfigError(f"{loc}: [{tbl}]{' ' + key if key else ''} {msg}")

    def unknown(tbl: str, key: str, valid: Sequence[str]) -> ConfigError:
        close = difflib.get_close_matches(key, valid, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        return err(tbl, key, f"is not a known key{hint}; valid keys: {', '.join(valid)}")

    limits: list[Limit] = []
    min_turns = DEFAULT_MIN_TURNS
    max_failure_rate = DEFAULT_MAX_FAILURE_RATE
    cost_per_turn: float | None = None
    false_rate: float | None = None
    valid = valid_budget_keys()
    for key, value in table.items():
        if key == "false_barge_in_rate":
            if not _is_number(value) or not 0 <= value <= 1:
                raise err("budget", key, f"must be a fraction within 0..1, not {value!r}")
            false_rate = float(value)
        elif key == "cost_per_turn":
            if not _is_number(value) or value < 0:
                raise err("budget", key, f"must be a cost of 0 or more (a number), not {value!r}")
            cost_per_turn = float(value)
        elif key == "min_turns":
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise err("budget", key, f"must be an integer of at least 1, not {value!r}")
            min_turns = value
        elif key == "max_failure_rate":
            if not _is_number(value) or not 0 <= value <= 1:
                raise err("budget", key, f"must be a fraction within 0..1, not {value!r}")
            max_failure_rate = float(value)
        elif key in METRICS:
            sub = f"budget.{key}"
            if not isinstance(value, Mapping):
                raise err(sub, None, "must be a table of p50_ms / p90_ms / p99_ms limits")
            if not value:
                raise err(sub, None, "is empty: give at least one of p50_ms, p90_ms, p99_ms")
            for pkey, limit in value.items():
                if pkey not in PERCENTILE_KEYS:
                    raise unknown(sub, pkey, list(PERCENTILE_KEYS))
                if not _is_number(limit) or limit <= 0:
                    raise err(
                        sub, pkey, f"must be a positive number of milliseconds, not {limit!r}"
                    )
                limits.append(Limit(key, PERCENTILE_KEYS[pkey], float(limit)))
        else:
            raise unknown("budget", key, valid)
    # Contract order (e2e first, then the critical path), then percentile: reports read top-down.
    limits.sort(key=lambda lim: (METRICS.index(lim.metric), lim.percentile))
    return Budget(tuple(limits), max_failure_rate, min_turns, source, cost_per_turn, false_rate)


def lenient_budget(table: Mapping[str, Any], *, source: str = "budget") -> Budget:
    """The limits of a ``[budget]`` table that may not have been validated (a saved run's, the
    TUI's): entries that are not a number are skipped instead of refused."""
    limits = [
        Limit(metric, pct, float(value))
        for metric in METRICS
        if isinstance(sub := table.get(metric), Mapping)
        for key, pct in PERCENTILE_KEYS.items()
        if _is_number(value := sub.get(key))
    ]
    return Budget(tuple(limits), source=source)


def as_budget(budget: Budget | Mapping[str, Any]) -> Budget:
    """``budget`` parsed (leniently) when it is still a raw ``[budget]`` table."""
    return budget if isinstance(budget, Budget) else lenient_budget(budget)


def breaks(value_ns: float, limit_ns: float) -> bool:
    """The judging rule: a value breaks its limit only above it (equal passes)."""
    return value_ns > limit_ns


# -- evaluation ------------------------------------------------------------------------------
def _ms(ns: float, limit_ms: float | None = None) -> str:
    """Whole milliseconds, unless that would print a broken limit as equal to the value."""
    text = fmt_ms(ns)
    if limit_ms is not None and text == f"{limit_ms:g}" and ns != limit_ms * NS_PER_MS:
        text = fmt_ms(ns, decimals=2)
    return f"{text} ms"


def metric_distribution(summary: SummaryLike, metric: str) -> DistSummary:
    """The summary's distribution (integer ns) of ``e2e`` or a segment; empty when absent."""
    return RunSummary.coerce(summary).metric(metric)


def sample_check(n: int, min_turns: int, *, what: str = "warm turns") -> Check:
    """The sample-size check: fewer than ``min_turns`` is a failed gate, never a pass."""
    if n >= min_turns:
        return Check(
            "sample",
            "min_turns",
            True,
            f"{n} {what} >= min_turns {min_turns}",
            n,
            min_turns,
            "turns",
        )
    return Check(
        "sample",
        "min_turns",
        False,
        f"sample too small: {n} {what} < min_turns {min_turns}; run more turns "
        "(--repeat/--turns) or lower min_turns",
        n,
        min_turns,
        "turns",
    )


def evaluate_budget(budget: Budget, summary: SummaryLike) -> list[Check]:
    """Hold a run's summary (integer ns, as in ``summary.json``) against ``budget``.

    Returns the sample-size check, the failure-rate check, then one check per limit.
    """
    s = RunSummary.coerce(summary)
    n, ran, failed = s.counts.headline, s.counts.turns, s.counts.failed
    checks = [sample_check(n, budget.min_turns)]
    rate = s.counts.failure_rate
    verdict = "<=" if rate <= budget.max_failure_rate else ">"
    checks.append(
        Check(
            "budget",
            "failure rate",
            rate <= budget.max_failure_rate,
            f"failure rate {failed}/{ran} turns ({rate:.1%}) {verdict} limit "
            f"{budget.max_failure_rate:.1%} (max_failure_rate)",
            rate,
            budget.max_failure_rate,
            "ratio",
        )
    )
    barge = s.calls.barge_in if s.calls is not None else None
    for lim in budget.limits:
        check = _limit_check(lim, s.metric(lim.metric), n)
        if lim.metric == "barge_in_stop":
            check = _stop_check(check, lim, barge)
        checks.append(check)
    if budget.cost_per_turn is not None:
        checks.append(cost_check(budget.cost_per_turn, s.extra.get("cost")))
    if budget.false_barge_in_rate is not None:
        checks.append(false_barge_in_check(budget.false_barge_in_rate, barge))
    return checks


def _stop_check(check: Check, lim: Limit, barge: Any) -> Check:
    """A stop latency limit: an interruption the agent never stopped for has no stop time,
    so it would be missing from the percentile; any such fails the line, named."""
    never = getattr(barge, "never_stopped", 0)
    if never:
        return Check(
            "budget", check.name, False,
            f"{lim.name}: {never} interruption(s) never stopped the reply (talked over to its "
            f"end) against limit {fmt_ms(lim.limit_ms * NS_PER_MS)} ms",
            check.measured, check.limit,
        )  # fmt: skip
    return check


def false_barge_in_check(limit: float, barge: Any) -> Check:
    """False barge-ins per backchannel or noise step against ``limit``; a run with none of
    those steps fails (an unmeasured rate never passes)."""
    rate = getattr(barge, "false_barge_in_rate", None)
    if rate is None:
        return Check(
            "budget", "false barge-in rate", False,
            f"false barge-in rate: no value (the scenarios have no backchannel or noise step) "
            f"against limit {limit:.0%}", None, limit, "ratio",
        )  # fmt: skip
    ok = rate <= limit
    return Check(
        "budget", "false barge-in rate", ok,
        f"false barge-in rate {barge.false_barge_ins}/{barge.backchannels} ({rate:.0%}) "
        f"{'<=' if ok else '>'} limit {limit:.0%}",
        rate, limit, "ratio",
    )  # fmt: skip


def cost_check(limit: float, cost: object) -> Check:
    """The mean cost of a completed turn (the summary's ``cost`` section) against ``limit``;
    a run with no priced turn fails: an unknown cost never passes a cost budget."""
    per_turn = cost.get("per_turn") if isinstance(cost, Mapping) else None
    mean = per_turn.get("mean") if isinstance(per_turn, Mapping) else None
    currency = cost.get("currency", "") if isinstance(cost, Mapping) else ""
    if not _is_number(mean):
        why = (
            "the pipeline has no [cost] prices"
            if not isinstance(cost, Mapping)
            else "; ".join(cost.get("missing") or []) or "no turn could be priced"
        )
        return Check(
            "budget", "cost per turn", False,
            f"cost per turn: no value ({why}) against limit {limit:g}", None, limit, "cost",
        )  # fmt: skip
    ok = mean <= limit
    return Check(
        "budget",
        "cost per turn",
        ok,
        f"cost per turn {mean:.4g} {currency} {'<=' if ok else '>'} limit {limit:g} {currency} "
        f"(mean of n={per_turn.get('n') if isinstance(per_turn, Mapping) else 0} turns)",
        float(mean),
        limit,
        "cost",
    )


def _limit_check(lim: Limit, dist: DistSummary, n: int) -> Check:
    value = dist.at(lim.percentile)
    if value is None:
        return Check(
            "budget",
            lim.name,
            False,
            f"{lim.name}: no measured value (0 warm turns) against limit {lim.limit_ms:g} ms",
            None,
            lim.limit_ms,
        )
    ok = not breaks(value, lim.limit_ms * NS_PER_MS)
    return Check(
        "budget",
        lim.name,
        ok,
        f"{lim.name} {_ms(value, lim.limit_ms)} {'<=' if ok else '>'} limit {lim.limit_ms:g} ms "
        f"(n={dist.n} warm turns)",
        value / NS_PER_MS,
        lim.limit_ms,
    )


# -- a waterfall band against the budget (the TUI) -------------------------------------------
@dataclass(frozen=True)
class BudgetVerdict:
    """How a percentile stands against the budget, and which segment is to blame."""

    p: int
    limit_ns: float | None
    #: The exact e2e percentile is over the e2e limit (what a CI gate checks).
    over: bool
    #: The segment in which the stacked bars cross the budget line.
    crossing: str | None
    #: Segments whose own percentile breaks their own ``[budget.<segment>]`` limit:
    #: name -> (the segment's percentile, its limit), both ns.
    own_limit: dict[str, tuple[float, float]]


def crossing_segment(
    segments: Mapping[str, float], limit_ns: float, order: Sequence[str] = ALL_SEGMENTS
) -> str | None:
    """The segment during which the running sum of ``segments`` passes ``limit_ns``."""
    total = 0.0
    for name in order:
        before = total
        total += max(0.0, float(segments.get(name, 0.0)))
        if before <= limit_ns < total:
            return name
    return None


class _HasAt(Protocol):
    def at(self, p: int) -> float | None: ...


def judge(
    p: int,
    e2e_percentile_ns: float,
    segments: Mapping[str, float],
    budget: Budget | Mapping[str, Any],
    seg_dists: Mapping[str, _HasAt] | None = None,
) -> BudgetVerdict:
    """Judge a composition at percentile ``p`` against the e2e and per-segment limits.

    ``budget`` may be a raw ``[budget]`` table (read leniently, see :func:`lenient_budget`).
    """
    b = as_budget(budget)
    limit = b.limit_ns(E2E, p)
    own: dict[str, tuple[float, float]] = {}
    for name in ALL_SEGMENTS:
        seg_limit = b.limit_ns(name, p)
        if seg_limit is None:
            continue
        # A per-segment limit is about that segment's own percentile (percentiles do not add),
        # not about its share of this band; fall back to the band value without a distribution.
        dist = (seg_dists or {}).get(name)
        value = dist.at(p) if dist is not None else segments.get(name)
        if value is not None and breaks(value, seg_limit):
            own[name] = (float(value), seg_limit)
    return BudgetVerdict(
        p=p,
        limit_ns=limit,
        over=limit is not None and breaks(e2e_percentile_ns, limit),
        crossing=None if limit is None else crossing_segment(segments, limit),
        own_limit=own,
    )
