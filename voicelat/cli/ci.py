"""``voicelat ci`` and ``voicelat baseline save``: the latency gate from the command line.

``voicelat ci`` replays the fixtures through the pipeline (the same run as ``voicelat run``),
holds the result against a budget and, with ``--baseline``, against an earlier run, writes
JUnit XML, Markdown and ``gate.json`` into the run directory (and where ``--junit`` /
``--markdown`` say; the Markdown is appended to ``$GITHUB_STEP_SUMMARY`` when it is set), prints
the verdict and exits with:

* 0 every check passed;
* 1 a budget line broken, a significant regression beyond tolerance, or too few warm turns;
* 2 a usage or configuration error (bad budget key, incompatible baseline, ...);
* 3 an infrastructure failure (stack down, every measured turn failed).

``--results RUN_DIR`` gates a run that already exists instead of running the pipeline.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from voicelat.cli.args import confidence, non_negative_float
from voicelat.cli.baseline import (
    Baseline,
    add_baseline_parser,
    load_baseline,
    save_baseline,
)
from voicelat.cli.ci_inputs import budget_for, budget_table, load_results
from voicelat.cli.ci_reports import (
    add_report_arguments,
    write_error_reports,
    write_interrupted_reports,
    write_page,
    write_reports,
    write_text,
)
from voicelat.core.base.errors import EXIT_INFRA, ConfigError, InfraError, VoicelatError
from voicelat.core.base.turn import Turn
from voicelat.core.judge.budget import Budget
from voicelat.core.judge.compare import (
    DEFAULT_TOLERANCE_MS,
    DEFAULT_TOLERANCE_PCT,
    Tolerance,
)
from voicelat.core.judge.gate import UNTRUSTED_POLICIES, evaluate_gate, gate_text
from voicelat.core.summaries.run_summary import RunSummary, SummaryLike
from voicelat.files.results import SUMMARY_FILE

if TYPE_CHECKING:
    _SubParsers = argparse._SubParsersAction[Any]
else:
    _SubParsers = Any


def _info(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _add_untrusted_argument(ci: argparse.ArgumentParser) -> None:
    """What a latency failure is on a run that blames its own machine."""
    ci.add_argument(
        "--untrusted",
        choices=UNTRUSTED_POLICIES,
        default="fail",
        help="a latency check that fails on a run whose trust section blames the machine "
        "(loop lag, CPU waits, load): fail (exit 1, default) or inconclusive (exit 4: rerun "
        "on a quiet machine); other failures always exit 1",
    )


def add_parser(subparsers: _SubParsers) -> argparse.ArgumentParser:
    """Register ``ci`` and ``baseline save``; each sets ``func`` and returns an exit code."""
    from voicelat.cli.run import add_run_arguments

    ci: argparse.ArgumentParser = subparsers.add_parser(
        "ci",
        help="replay fixtures and fail on a broken latency budget or a regression",
        description=(
            "Replay fixtures through a pipeline, hold the result against a latency budget and "
            "an optional baseline run, write JUnit/Markdown reports. Exit codes: 0 pass, "
            "1 budget broken / significant regression / too few turns, 2 usage or config "
            "error, 3 infrastructure failure, 4 inconclusive (with --untrusted inconclusive)."
        ),
    )
    add_run_arguments(ci)
    _ci_help(ci)
    ci.add_argument(
        "--budget",
        "-b",
        type=Path,
        help="budget TOML file with a [budget] table (default: the pipeline's [budget])",
    )
    ci.add_argument(
        "--baseline",
        type=Path,
        metavar="RUN_DIR",
        help="earlier run directory (or its summary.json) to check for regressions against",
    )
    ci.add_argument(
        "--force",
        action="store_true",
        help="compare with a baseline of another pipeline or fixture set anyway",
    )
    ci.add_argument(
        "--tolerance-ms",
        type=non_negative_float,
        default=DEFAULT_TOLERANCE_MS,
        help=f"a regression must exceed this many ms (default {DEFAULT_TOLERANCE_MS:g})",
    )
    ci.add_argument(
        "--tolerance-pct",
        type=non_negative_float,
        default=DEFAULT_TOLERANCE_PCT,
        help=f"... and this %% of the baseline value (default {DEFAULT_TOLERANCE_PCT:g})",
    )
    ci.add_argument(
        "--confidence",
        type=confidence,
        default=0.95,
        help="confidence level of the bootstrap intervals (default 0.95)",
    )
    _add_untrusted_argument(ci)
    add_report_arguments(ci)
    ci.add_argument(
        "--results",
        type=Path,
        metavar="RUN_DIR",
        help="gate an existing run directory instead of running the pipeline",
    )
    ci.add_argument(
        "--save-baseline",
        type=Path,
        metavar="DIR",
        help="when the gate passes, save this run as the baseline in DIR",
    )
    ci.set_defaults(func=cmd_ci)
    add_baseline_parser(subparsers)
    return ci


def _ci_help(ci: argparse.ArgumentParser) -> None:
    # The run options are shared with `run`; two of their help texts are wrong for `ci`.
    for action in ci._actions:
        if "--tui" in action.option_strings:  # `ci` never opens the TUI
            action.help = argparse.SUPPRESS
        elif "--out" in action.option_strings:
            action.help = "results directory (default: runs/<time>-<pipeline>-ci)"


# -- inputs ----------------------------------------------------------------------------------
def _check_empty_out(out_dir: Path) -> None:
    from voicelat.files.results import check_out_dir

    check_out_dir(out_dir)


# -- the command -----------------------------------------------------------------------------
def cmd_ci(args: argparse.Namespace) -> int:
    """Run (or load) the turns, gate them, write the reports; returns the exit code."""
    tolerance = Tolerance(args.tolerance_ms, args.tolerance_pct)
    if args.results is not None:
        return _gate_existing(args, tolerance)
    from voicelat.cli.request import request_from_args
    from voicelat.cli.run import PrintObserver
    from voicelat.engine.job import default_out_dir, execute_run, resolve_inputs
    from voicelat.files.fixtures import fixture_set_hash
    from voicelat.report.text import summary_table

    request = request_from_args(args, sys.argv)
    pipeline, fixtures = resolve_inputs(request)
    budget = budget_for(args, pipeline.budget, str(pipeline.path))
    if args.budget is not None:
        # The run records the gate's budget, not the pipeline's: summary.json, report.html and
        # `voicelat view` then draw the limits the gate held the run to.
        pipeline = replace(pipeline, budget=budget_table(args.budget))
    current = {
        "pipeline": {"name": pipeline.name, "sha256": pipeline.sha256},
        "fixture_set_sha256": fixture_set_hash(fixtures),
    }
    # Refuse a bad baseline before spending minutes on turns.
    baseline = load_baseline(args, current)
    out_dir = request.out_dir or default_out_dir(pipeline, "ci")
    _check_empty_out(out_dir)
    request = request.with_inputs(pipeline, fixtures, out_dir)
    _info(
        f"voicelat ci: pipeline {pipeline.name} ({pipeline.path}); {len(fixtures)} fixtures; "
        f"budget {budget.source}; results -> {out_dir}"
    )
    try:
        outcome = execute_run(request, PrintObserver(), _info)
    except VoicelatError as exc:
        if exc.exit_code == EXIT_INFRA:
            write_error_reports(args, out_dir, str(exc))
        raise
    except KeyboardInterrupt:
        write_interrupted_reports(args, out_dir)
        raise
    summary = _priced(out_dir, outcome.summary)
    print()
    print(summary_table(summary, str(out_dir)))
    print()
    turns = outcome.every_turn()  # a long run keeps only its recent turns in memory
    return _finish(args, summary, turns, budget, baseline, tolerance, out_dir)


def _priced(out_dir: Path, summary: Any) -> Any:
    """The run's summary with its ``cost`` section (priced after the run, for a
    ``cost_per_turn`` budget); the summary as it was when the pipeline has no prices."""
    from voicelat.score.run import score_run

    scored = score_run(out_dir, "off")
    if scored.cost is None:
        return summary
    doc = RunSummary.coerce(summary).to_json()
    doc["cost"] = scored.cost
    return doc


def _gate_existing(args: argparse.Namespace, tolerance: Tolerance) -> int:
    for flag, value in (
        ("--fixtures", args.fixtures),
        ("--turns", args.turns),
        ("--out", args.out),
    ):
        if value is not None:
            raise ConfigError(f"{flag} does not apply with --results (it gates a finished run)")
    run, summary, skipped = load_results(args.results)
    if args.pipeline is not None and args.budget is None:
        from voicelat.files.pipeline import load_pipeline

        budget = budget_for(args, load_pipeline(args.pipeline).budget, str(args.pipeline))
    else:
        budget = budget_for(args, summary.budget, f"[budget] recorded in {run.path / SUMMARY_FILE}")
    baseline = load_baseline(args, summary)
    return _finish(
        args, summary, list(run.turns), budget, baseline, tolerance, run.path, notes=skipped
    )


def _finish(
    args: argparse.Namespace,
    summary: SummaryLike,
    turns: Sequence[Turn],
    budget: Budget,
    baseline: Baseline | None,
    tolerance: Tolerance,
    run_dir: Path,
    *,
    notes: Sequence[str] = (),
) -> int:
    summary = RunSummary.coerce(summary)
    measured = [t for t in turns if not t.warmup]
    if measured and all(t.failed for t in measured):
        reason = f"{measured[0].failure_stage}: {measured[0].failure_reason}"
        msg = f"every measured turn failed ({len(measured)}); first reason: {reason}"
        write_error_reports(args, run_dir, msg, summary)
        write_page(args, run_dir)
        raise InfraError(msg)
    gate_notes = [*notes, *([] if baseline is None else baseline.notes)]
    status = summary.run.status
    if status not in (None, "complete"):
        gate_notes.insert(0, f"run status: {status} (the gate judges the turns that finished)")
    result = evaluate_gate(
        summary,
        turns,
        budget,
        baseline_turns=None if baseline is None else list(baseline.run.turns),
        baseline=None if baseline is None else baseline.label,
        baseline_summary=None if baseline is None else baseline.summary,
        tolerance=tolerance,
        level=args.confidence,
        notes=gate_notes,
        run_dir=str(run_dir),
        untrusted=args.untrusted,
    )
    written = write_reports(args, run_dir, result)
    write_page(args, run_dir)
    if getattr(args, "benchmark_json", None) is not None:
        from voicelat.export import benchmark_json

        write_text(args.benchmark_json, benchmark_json(summary, args.benchmark_format))
        written.append(args.benchmark_json)
    print(gate_text(result), flush=True)
    _info("reports: " + ", ".join(str(p) for p in written))
    if args.save_baseline is not None:
        if result.passed:
            save_baseline(run_dir, args.save_baseline)
            _info(f"baseline saved to {args.save_baseline}")
        else:
            _info(f"not saving the baseline to {args.save_baseline}: the gate failed")
    return result.exit_code
