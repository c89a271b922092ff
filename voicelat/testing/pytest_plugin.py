"""pytest plugin: latency tests in your own suite (registered through the ``pytest11`` entry point).

::

    def test_voice_latency(voicelat_run):
        summary = voicelat_run("pipelines/local.toml", turns=8, warmup=1)
        assert summary.e2e.p90 < 1200          # milliseconds
        assert summary.llm_ttft.p50 < 150      # any segment by name
        assert_latency(summary, e2e_p50_ms=900, tts_ttfb_p90_ms=300)

Every latency on a :class:`LatencySummary` is in **milliseconds** (``summary.json`` keeps
integer nanoseconds). A failing ``assert summary.e2e.p90 < 1200`` prints the P50/P90 waterfall
(the mean composition of the turns around each percentile) under pytest's own explanation, and
so does :func:`assert_latency`. The fixture runs turns with ``asyncio.run``: call it from a
synchronous test. A pipeline with ``stack = "local"`` reuses a running embedded stack
(``voicelat stack up``) or starts one for the call and stops it afterwards.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from voicelat.core.base.contract import E2E, SEGMENTS
from voicelat.core.base.turn import Turn
from voicelat.core.judge.budget import (
    METRICS,
    NS_PER_MS,
    PERCENTILE_KEYS,
    Budget,
    evaluate_budget,
    parse_budget,
)
from voicelat.core.judge.gate import headline_text, waterfall_compact, waterfall_lines
from voicelat.core.summaries.run_summary import RunSummary

__all__ = ["LatencySummary", "Millis", "Percentiles", "assert_latency", "voicelat_run"]


class Millis(float):
    """A latency in milliseconds that remembers what it measures, for failure messages."""

    label: str
    summary: LatencySummary

    def __new__(cls, value: float, label: str, summary: LatencySummary) -> Millis:
        self = super().__new__(cls, value)
        self.label = label
        self.summary = summary
        return self


@dataclass(frozen=True)
class Percentiles:
    """One metric's distribution over the warm turns, in milliseconds (None when n is 0)."""

    name: str
    n: int
    p50: Millis | None
    p90: Millis | None
    p99: Millis | None
    min: Millis | None
    max: Millis | None
    mean: Millis | None


@dataclass(frozen=True)
class LatencySummary:
    """A run's summary with attribute access, latencies in milliseconds.

    ``summary.e2e.p90`` is the voice-to-voice P90; ``summary.<segment>.p50`` (e.g.
    ``summary.llm_ttft.p50``) a segment's; ``summary.n`` the number of warm turns the
    percentiles are made of; ``summary.raw`` the ``summary.json`` document (nanoseconds).
    """

    raw: Mapping[str, Any]
    run_dir: Path | None = None
    turns: Sequence[Turn] = field(default_factory=tuple)

    @classmethod
    def from_run_dir(cls, path: Path | str) -> LatencySummary:
        """Read a run directory written by ``voicelat run`` / ``voicelat ci``."""
        from voicelat.core.base.errors import VoicelatError
        from voicelat.files.results import load_run

        run = load_run(Path(path))
        if run.summary is None:
            raise VoicelatError(f"{run.path} has no summary.json")
        return cls(run.summary, run.path, run.turns)

    @property
    def summary(self) -> RunSummary:
        """The run summary, typed (times in ns, as in ``summary.json``)."""
        return RunSummary.coerce(self.raw)

    def _dist(self, metric: str) -> Percentiles:
        d = self.summary.metric(metric)

        def ms(key: str) -> Millis | None:
            v = getattr(d, key)
            label = f"{metric} {key.upper() if key.startswith('p') else key}"
            return None if v is None else Millis(v / NS_PER_MS, label, self)

        return Percentiles(
            metric,
            d.n,
            ms("p50"),
            ms("p90"),
            ms("p99"),
            ms("min"),
            ms("max"),
            ms("mean"),
        )

    @property
    def e2e(self) -> Percentiles:
        """Voice-to-voice latency: speech end to the first audible reply sample."""
        return self._dist(E2E)

    @property
    def segments(self) -> dict[str, Percentiles]:
        """Every segment of the critical path, in order."""
        return {s: self._dist(s) for s in SEGMENTS}

    def __getattr__(self, name: str) -> Percentiles:
        # Only called for names that are not attributes: segment names read like fields.
        if name in SEGMENTS:
            return self._dist(name)
        raise AttributeError(
            f"LatencySummary has no {name!r}; latencies: e2e, {', '.join(SEGMENTS)}"
        )

    @property
    def counts(self) -> dict[str, int]:
        """Turns run, in the headline, warm-up, cold, failed, flagged."""
        return self.summary.counts.to_json()

    @property
    def n(self) -> int:
        """Warm turns in the percentiles."""
        return self.summary.counts.headline

    @property
    def failure_rate(self) -> float:
        """Failed turns over turns run."""
        return self.summary.counts.failure_rate

    def explain(self, *, bars: bool = True) -> list[str]:
        """The headline numbers, where the run is and its P50/P90 waterfall, as lines.

        ``bars=False`` gives one line per band: pytest truncates a long assert explanation.
        """
        where = f" ({self.run_dir})" if self.run_dir else ""
        s = self.summary
        bands = waterfall_lines(s) if bars else waterfall_compact(s)
        return [headline_text(s) + where, *bands]


_LIMIT = re.compile(r"^(?P<metric>[a-z_0-9]+?)_(?P<pkey>p\d+_ms)$")


def assert_latency(
    summary: LatencySummary,
    *,
    min_turns: int = 1,
    max_failure_rate: float = 0.0,
    **limits: float,
) -> None:
    """Assert latency limits given as ``<metric>_p<50|90|99>_ms=LIMIT`` keyword arguments.

    ``e2e_p90_ms=1200`` means "e2e P90 at most 1200 ms"; any segment works in place of
    ``e2e``. It also checks the failure rate (default: no failed turn) and the number of warm
    turns (``min_turns``, default 1). On failure the message lists every broken limit with its
    value and the run's waterfall. The limits follow the same rules as ``voicelat ci``'s budget.
    """
    table: dict[str, Any] = {"min_turns": min_turns, "max_failure_rate": max_failure_rate}
    for key, limit in limits.items():
        m = _LIMIT.match(key)
        if not m or m["metric"] not in METRICS or m["pkey"] not in PERCENTILE_KEYS:
            raise TypeError(
                f"assert_latency() got {key!r}; limits are <metric>_<p50|p90|p99>_ms with "
                f"metric one of {', '.join(METRICS)}"
            )
        table.setdefault(m["metric"], {})[m["pkey"]] = limit
    budget: Budget = parse_budget(table, source="assert_latency")
    failed = [c for c in evaluate_budget(budget, summary.summary) if not c.passed]
    if failed:
        lines = ["latency limits broken:", *(f"  {c.message}" for c in failed)]
        raise AssertionError("\n".join([*lines, *summary.explain()]))


#: wyoming 1.x imports ``audioop`` (deprecated since Python 3.11) when it is imported: not the
#: test author's code and nothing they can act on, so it stays out of every test report.
AUDIOOP_FILTER = r"ignore:'audioop' is deprecated:DeprecationWarning:wyoming\.audio"


def pytest_configure(config: pytest.Config) -> None:
    """Keep wyoming's audioop deprecation warning out of the test summary."""
    config.addinivalue_line("filterwarnings", AUDIOOP_FILTER)


def pytest_assertrepr_compare(
    config: pytest.Config, op: str, left: object, right: object
) -> list[str] | None:
    """Explain a failed comparison involving a latency with the run's waterfall."""
    if isinstance(left, Millis):
        m, text = left, f"{left.label} = {float(left):.1f} ms, not {op} {right!r}"
    elif isinstance(right, Millis):
        m, text = right, f"not {left!r} {op} {right.label} ({float(right):.1f} ms)"
    else:
        return None
    return [text, *m.summary.explain(bars=False)]


class _QuietObserver:
    """Records nothing: the test reads the summary, not a live view."""

    def turn_started(self, planned: Any, total: int) -> None:
        return None

    def milestone(self, index: int, name: str, t_rel_ns: int) -> None:
        return None

    def turn_finished(self, turn: Turn, total: int) -> None:
        return None


RunFactory = Callable[..., LatencySummary]


@pytest.fixture
def voicelat_run(tmp_path_factory: pytest.TempPathFactory) -> RunFactory:
    """A factory that replays fixtures through a pipeline and returns a :class:`LatencySummary`.

    ``voicelat_run(pipeline=None, fixtures=None, *, turns=None, repeat=1, warmup=1,
    concurrency=None, rate=None, workers=1, out=None)``: ``pipeline`` is a pipeline TOML path
    (default: the embedded local stack), ``fixtures`` a fixtures directory (default: the bundled
    ones), ``concurrency`` N sessions back to back (a closed loop) or ``rate`` R turns per
    second (an open loop; not both), ``workers`` the sessions sharded over N worker processes,
    ``out`` the results directory (default: a fresh pytest temporary directory). A run that
    cannot start, or whose every turn fails, fails the test with voicelat's one-line reason.
    """

    def run(
        pipeline: Path | str | None = None,
        fixtures: Path | str | None = None,
        *,
        turns: int | None = None,
        repeat: int = 1,
        warmup: int = 1,
        concurrency: int | None = None,
        rate: float | None = None,
        workers: int = 1,
        out: Path | str | None = None,
    ) -> LatencySummary:
        from voicelat.core.base.errors import VoicelatError
        from voicelat.engine.job import execute_run
        from voicelat.engine.progress import stderr_progress
        from voicelat.engine.request import LoadRequest, PlanRequest, RunRequest

        out_dir = Path(out) if out is not None else tmp_path_factory.mktemp("voicelat-run")
        request = RunRequest(
            pipeline_path=None if pipeline is None else Path(pipeline),
            fixtures_dir=None if fixtures is None else Path(fixtures),
            out_dir=out_dir,
            plan=PlanRequest(repeat=repeat, turns=turns, warmup=warmup),
            load=LoadRequest(concurrency=concurrency, rate=rate),
            workers=workers,
            argv=("pytest",),
        )
        try:
            outcome = execute_run(request, _QuietObserver(), stderr_progress)
        except VoicelatError as exc:
            pytest.fail(f"voicelat: {exc}", pytrace=False)
        every = tuple(outcome.every_turn())  # every turn, not a long run's recent window
        return LatencySummary(outcome.summary, Path(outcome.run_dir), every)

    return run
