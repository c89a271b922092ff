"""Latency budgets: parse a ``[budget]`` table and hold a run's summary against it (pure; no I/O
beyond :func:`load_budget_file`).

A budget is a ``[budget]`` table, in a budget file or in the pipeline file::

    [budget]
    max_failure_rate = 0.05   # failed turns / turns run (default 0: any failed turn fails)
    min_turns = 8             # warm (headline) turns needed for a verdict (default 5)
    [budget.e2e]
    p50_ms = 900
    p90_ms = 1400
    [budget.llm_ttft]         # any segment of the metric contract
    p90_ms = 250

Every limit becomes one :class:`Check`; a value equal to its limit passes.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voicelat.core.contract import E2E, SEGMENTS
from voicelat.core.errors import ConfigError

# The pipeline loader's line locator: errors in both files point at lines the same way.
from voicelat.files.pipeline import _line_of

#: What a budget may limit: voice-to-voice latency and each segment of the critical path.
METRICS: tuple[str, ...] = (E2E, *SEGMENTS)
#: Limit keys inside a metric table, and the percentile each one limits.
PERCENTILE_KEYS: dict[str, int] = {"p50_ms": 50, "p90_ms": 90, "p99_ms": 99}
#: Scalar keys directly under ``[budget]``.
SCALAR_KEYS: tuple[str, ...] = ("max_failure_rate", "min_turns")

#: Below five warm turns a P90 is the maximum of the sample: too few to call a verdict on.
DEFAULT_MIN_TURNS = 5
#: A failed turn is missing from the percentiles, so by default any failure fails the gate
#: (otherwise the slowest turns could time out and make the budget look better).
DEFAULT_MAX_FAILURE_RATE = 0.0

NS_PER_MS = 1_000_000


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


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def parse_budget(table: Mapping[str, Any], *, source: str = "budget", text: str = "") -> Budget:
    """Validate a raw ``[budget]`` table; errors are one line naming the file, table and key.

    ``text`` is the TOML source, when there is one, so errors can give a line number.
    """

    def err(tbl: str, key: str | None, msg: str) -> ConfigError:
        # A sub-table written as [budget.name] has no "name =" line: point at its header.
        line = (key and _line_of(text, f"{tbl}.{key}", None)) or _line_of(text, tbl, key)
        loc = f"{source}:{line}" if line else source
        return ConfigError(f"{loc}: [{tbl}]{' ' + key if key else ''} {msg}")

    def unknown(tbl: str, key: str, valid: Sequence[str]) -> ConfigError:
        close = difflib.get_close_matches(key, valid, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        return err(tbl, key, f"is not a known key{hint}; valid keys: {', '.join(valid)}")

    limits: list[Limit] = []
    min_turns = DEFAULT_MIN_TURNS
    max_failure_rate = DEFAULT_MAX_FAILURE_RATE
    valid = valid_budget_keys()
    for key, value in table.items():
        if key == "min_turns":
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
    return Budget(tuple(limits), max_failure_rate, min_turns, source)


def load_budget_file(path: Path) -> Budget:
    """Read a budget file: a TOML file holding one ``[budget]`` table."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"budget file {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"cannot read budget file {path}: {exc.strerror}") from None
    text = raw.decode("utf-8", errors="replace")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    extra = sorted(k for k in data if k != "budget")
    if extra:
        raise ConfigError(
            f"{path}: a budget file holds one [budget] table; unknown top-level "
            f"key(s) {', '.join(extra)} (limits go in [budget.e2e], [budget.<segment>])"
        )
    table = data.get("budget")
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: no [budget] table (see docs/CI.md for the format)")
    return parse_budget(table, source=str(path), text=text)


# -- evaluation ------------------------------------------------------------------------------
def _ms(ns: float, limit_ms: float | None = None) -> str:
    """Whole milliseconds, unless that would print a broken limit as equal to the value."""
    text = f"{ns / NS_PER_MS:.0f}"
    if limit_ms is not None and text == f"{limit_ms:g}" and ns != limit_ms * NS_PER_MS:
        text = f"{ns / NS_PER_MS:.2f}"
    return f"{text} ms"


def metric_distribution(summary: Mapping[str, Any], metric: str) -> Mapping[str, Any]:
    """The summary's distribution (integer ns) of ``e2e`` or a segment; empty when absent."""
    found = summary.get("e2e") if metric == E2E else (summary.get("segments") or {}).get(metric)
    return found if isinstance(found, Mapping) else {}


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


def evaluate_budget(budget: Budget, summary: Mapping[str, Any]) -> list[Check]:
    """Hold a run's summary (integer ns, as in ``summary.json``) against ``budget``.

    Returns the sample-size check, the failure-rate check, then one check per limit.
    """
    counts = summary.get("counts") or {}
    n = int(counts.get("headline", 0))
    ran = int(counts.get("turns", 0))
    failed = int(counts.get("failed", 0))
    checks = [sample_check(n, budget.min_turns)]
    rate = failed / ran if ran else 0.0
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
    for lim in budget.limits:
        dist = metric_distribution(summary, lim.metric)
        value = dist.get(f"p{lim.percentile}")
        if value is None:
            checks.append(
                Check(
                    "budget",
                    lim.name,
                    False,
                    f"{lim.name}: no measured value (0 warm turns) against limit {lim.limit_ms:g} ms",
                    None,
                    lim.limit_ms,
                )
            )
            continue
        ok = value <= lim.limit_ms * NS_PER_MS
        checks.append(
            Check(
                "budget",
                lim.name,
                ok,
                f"{lim.name} {_ms(value, lim.limit_ms)} {'<=' if ok else '>'} limit {lim.limit_ms:g} ms "
                f"(n={dist.get('n', n)} warm turns)",
                value / NS_PER_MS,
                lim.limit_ms,
            )
        )
    return checks
