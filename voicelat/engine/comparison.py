"""``comparison.json``: a comparison's ranking and what it was made from, for a live
(interleaved) comparison (:mod:`voicelat.engine.compare`) and for runs that already exist.

Below the command line so that whoever measures a comparison (the command, the pytest plugin, a
bench script) can rank it: :func:`comparison_document` builds the document from each
combination's turns and summary; :func:`with_scores` adds their price, reply quality and
goodput (voicelat/score).
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from voicelat.core.base.errors import ConfigError
from voicelat.core.base.turn import Turn
from voicelat.core.base.version import __version__
from voicelat.core.judge.compare import MIN_COMPARE_TURNS, instrument_error_ns, metric_rows
from voicelat.core.judge.comparison_doc import (
    CombinationDoc,
    ComparisonDoc,
    Statistics,
    TrustDoc,
)
from voicelat.core.judge.ranking import (
    BARGE_IN_KEYS,
    BargeInFigures,
    CombinationSample,
    barge_in_key,
    rank_combinations,
)
from voicelat.core.summaries.run_summary import RunSummary
from voicelat.files.results import SCHEMA_VERSION, SUMMARY_FILE, TURNS_FILE, LoadedRun

__all__ = [
    "Ranking",
    "SavedRuns",
    "barge_in_figures",
    "check_currencies",
    "check_live_rank_key",
    "check_rank_key",
    "combination_sample",
    "comparison_document",
    "comparison_scores",
    "saved_comparison_document",
    "saved_runs",
    "trust_of",
]


@dataclass(frozen=True)
class Ranking:
    """How the combinations are ranked: by the e2e ``rank_by`` percentile, or by a whole-call
    comparison's barge-in stop P50 or false barge-in rate (``barge_in_stop``,
    ``false_barge_in``: then e2e P50 breaks ties), with bootstrap intervals at ``level`` from
    ``resamples`` resamples seeded with ``seed``."""

    rank_by: Literal["p50", "p90", "barge_in_stop", "false_barge_in"] = "p50"
    level: float = 0.95
    resamples: int = 2000
    seed: int = 0


def check_currencies(currency: Mapping[str, str]) -> None:
    """One currency across the priced combinations (their costs share one axis)."""
    if len(set(currency.values())) > 1:
        mix = ", ".join(f"{n} in {c}" for n, c in sorted(currency.items()))
        raise ConfigError(
            f"the combinations are priced in different currencies ({mix}): "
            "price every combination in one currency to compare their cost"
        )


Scores = dict[str, dict[str, Any]]


def comparison_scores(dirs: Mapping[str, Path]) -> Scores:
    """Each combination's price, reply quality and goodput (voicelat/score) beside its
    latency, by name (combinations whose run has no turns are left out); one currency across
    the priced ones (``ConfigError`` otherwise)."""
    from voicelat.score.run import combination_scores

    scores = {
        name: combination_scores(run_dir)
        for name, run_dir in dirs.items()
        if (run_dir / TURNS_FILE).is_file()
    }
    check_currencies(
        {
            name: str(cost.get("currency"))
            for name, s in scores.items()
            if isinstance(cost := s.get("cost"), Mapping)
        }
    )
    return scores


def combination_sample(
    name: str,
    turns: Sequence[Turn],
    setup_error: str | None = None,
    summary: RunSummary | None = None,
) -> CombinationSample:
    """A combination's turns as the plain integers the ranking works on (``summary``: its
    summary.json, for the run's instrument error when it was calibrated)."""
    measured = [t for t in turns if not t.warmup]
    failures = Counter(
        f"{t.failure_stage}: {t.failure_reason}" for t in measured if t.failed and t.failure_reason
    )
    failure = setup_error or (failures.most_common(1)[0][0] if failures else None)
    return CombinationSample(
        name=name,
        rows=metric_rows(turns),
        measured=len(measured),
        failed=sum(t.failed for t in measured),
        warmup=sum(t.warmup for t in turns),
        cold=sum(t.cold and not t.warmup and t.ok for t in turns),
        failure=failure,
        instrument_ns=instrument_error_ns(summary),
    )


def comparison_document(
    ranking: Ranking,
    *,
    name: str,
    description: str,
    source: dict[str, Any],
    samples: Sequence[CombinationSample],
    summaries: Mapping[str, RunSummary],
    run_dirs: Mapping[str, str],
    labels: Mapping[str, Mapping[str, str]],
    excluded: Sequence[str],
    fixtures: dict[str, Any],
    schedule: dict[str, Any],
    interleaved: bool,
    scores: Mapping[str, Mapping[str, Any]] | None = None,
) -> ComparisonDoc:
    """``comparison.json``: the ranking plus what it was made from (``summaries``: each
    combination's typed summary; ``scores``: its price, quality and goodput)."""
    by = 90 if ranking.rank_by == "p90" else 50
    barge_in = barge_in_figures(summaries)
    key = barge_in_key(ranking.rank_by, barge_in) if ranking.rank_by in BARGE_IN_KEYS else None
    ranked = rank_combinations(
        samples,
        by=by,
        level=ranking.level,
        resamples=ranking.resamples,
        seed=ranking.seed,
        key=key,
    )
    scored = scores or {}
    combos = []
    for r in ranked:
        s = summaries.get(r.name)
        combos.append(
            CombinationDoc.of_ranked(
                r,
                run_dir=run_dirs.get(r.name, ""),
                labels=labels.get(r.name, {}),
                stages=s.stages if s is not None else {},
                waterfall=(
                    {f"p{p}": b.to_json() for p, b in s.waterfall.items() if p in (50, 90)}
                    if s is not None
                    else {}
                ),
                trust=trust_of(s),
                scores=scored.get(r.name),
                barge_in=barge_in.get(r.name),
                # Where its run was measured from (--region): the table's region column.
                extra={"region": s.run.extra["region"]}
                if s is not None and s.run.extra.get("region")
                else {},
            )
        )
    calls = {k: s.calls for k, s in summaries.items() if s.calls is not None}
    return ComparisonDoc(
        schema_version=SCHEMA_VERSION,
        name=name,
        combinations=tuple(combos),
        statistics=Statistics(
            rank_by=ranking.rank_by,
            level=ranking.level,
            resamples=ranking.resamples,
            seed=ranking.seed,
            min_turns=MIN_COMPARE_TURNS,
            method="percentile bootstrap over headline turns; vs best = this minus #1",
        ),
        tool=f"voicelat {__version__}",
        description=description,
        created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        argv=tuple(sys.argv),
        source=source,
        interleaved=interleaved,
        fixtures=fixtures,
        schedule=schedule,
        excluded=tuple(excluded),
        # A comparison of whole calls: each combination's call figures.
        calls=calls or None,
    )


def barge_in_figures(summaries: Mapping[str, RunSummary]) -> dict[str, BargeInFigures]:
    """Each combination's interruption figures, from its summary's ``calls.barge_in``;
    combinations whose calls had no overlay are left out."""
    return {
        name: BargeInFigures.of(s.calls.barge_in)
        for name, s in summaries.items()
        if s.calls is not None and s.calls.barge_in is not None
    }


def check_live_rank_key(ranking: Ranking, scenario: Path | None) -> None:
    """Refuse a barge-in ranking of a comparison that runs no calls (before it measures)."""
    if ranking.rank_by in BARGE_IN_KEYS and scenario is None:
        raise ConfigError(
            f"--rank-by {ranking.rank_by} ranks whole calls' interruptions: give --scenario "
            "with interrupt or backchannel steps (docs/BARGE_IN.md)"
        )


def check_rank_key(ranking: Ranking, summaries: Mapping[str, RunSummary]) -> None:
    """Refuse a barge-in ranking of runs none of which has the figure (``ConfigError``)."""
    if ranking.rank_by not in BARGE_IN_KEYS:
        return
    if not barge_in_key(ranking.rank_by, barge_in_figures(summaries)):
        what = (
            "a stopped interruption"
            if ranking.rank_by == "barge_in_stop"
            else "a backchannel or noise during a reply"
        )
        raise ConfigError(
            f"--rank-by {ranking.rank_by}: no run has {what} (run whole calls with "
            "interrupt/backchannel steps: compare --scenario, docs/BARGE_IN.md)"
        )


def trust_of(summary: RunSummary | None) -> TrustDoc | None:
    """A combination's ``trust`` for comparison.json: whether its run trusted its figures and
    why not (the run's own assessment); None when its summary has no trust section."""
    if summary is None or summary.trust is None:
        return None
    trust = summary.trust
    return TrustDoc(
        trust.trustworthy,
        tuple(r.message for r in trust.reasons),
        tuple(r.code for r in trust.reasons),
    )


# -- ranking runs that already exist --------------------------------------------------------------
@dataclass(frozen=True)
class SavedRuns:
    """Runs that already exist, to rank as they are: each one's name (its directory's, with
    its parent's when two share one), its loaded run and its summary (with its scores)."""

    dirs: tuple[Path, ...]
    names: tuple[str, ...]
    runs: tuple[LoadedRun, ...]
    summaries: dict[str, RunSummary]
    samples: tuple[CombinationSample, ...]
    scores: Scores = field(default_factory=dict)


def saved_runs(dirs: Sequence[Path]) -> SavedRuns:
    """Load the runs ``dirs`` name and check they can be ranked together: each given once,
    each with its summary, all on the same fixtures (``ConfigError`` otherwise)."""
    from voicelat.core.judge.ranking import check_same_fixtures
    from voicelat.files.results import load_run

    runs = [load_run(d) for d in dirs]
    resolved = [run.path.resolve() for run in runs]
    twice = next((d for i, d in enumerate(resolved) if d in resolved[:i]), None)
    if twice is not None:
        raise ConfigError(
            f"run {twice} is given twice: ranked against itself it says nothing; "
            "give different runs"
        )
    names: list[str] = []
    summaries: dict[str, RunSummary] = {}
    for run in runs:
        summary = run.run_summary
        if summary is None:
            raise ConfigError(
                f"{run.path} has no {SUMMARY_FILE}: its fixtures are unknown, so it cannot be "
                "compared (give directories voicelat wrote)"
            )
        name = run.path.name
        if name in names:
            name = f"{run.path.parent.name}/{name}"
        names.append(name)
        summaries[name] = summary
    # Latency depends on what was said: runs on different audio are not comparable.
    check_same_fixtures({n: s.fixture_set_sha256 for n, s in summaries.items()})
    pairs = list(zip(names, runs, strict=True))
    samples = tuple(combination_sample(n, list(r.turns), None, summaries[n]) for n, r in pairs)
    scores = comparison_scores({n: r.path for n, r in pairs})
    return SavedRuns(tuple(dirs), tuple(names), tuple(runs), summaries, samples, scores)


def saved_comparison_document(ranking: Ranking, saved: SavedRuns) -> ComparisonDoc:
    """``comparison.json`` of runs measured separately (not interleaved)."""
    summaries = saved.summaries
    first = next(iter(summaries.values()))
    fx = first.fixtures
    return comparison_document(
        ranking,
        name=" vs ".join(saved.names)[:80],
        description=(
            "Existing runs, measured separately (not interleaved): drift between them "
            "is not controlled."
        ),
        source={"runs": [str(d) for d in saved.dirs]},
        samples=saved.samples,
        summaries=summaries,
        scores=saved.scores,
        run_dirs={n: str(r.path) for n, r in zip(saved.names, saved.runs, strict=True)},
        labels={},
        excluded=[],
        fixtures={
            "count": len(fx),
            "ids": [f.get("id") for f in fx],
            "set_sha256": first.fixture_set_sha256,
        },
        schedule={
            "order": "separate runs (not interleaved)",
            "warmup": max(s.counts.warmup for s in summaries.values()),
            "measured_per_combination": "see n",
        },
        interleaved=False,
    )
