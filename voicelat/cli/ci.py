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
import contextlib
import json
import os
import sys
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from voicelat.cli.args import confidence, non_negative_float
from voicelat.core.budget import Budget, parse_budget
from voicelat.core.compare import (
    DEFAULT_TOLERANCE_MS,
    DEFAULT_TOLERANCE_PCT,
    Tolerance,
    check_baseline,
)
from voicelat.core.display import fmt_ms
from voicelat.core.errors import EXIT_INFRA, EXIT_OK, ConfigError, InfraError, VoicelatError
from voicelat.core.gate import UNTRUSTED_POLICIES, GateResult, evaluate_gate, gate_text
from voicelat.core.run_summary import RunSummary, SummaryLike
from voicelat.core.turn import Turn
from voicelat.files.budget import load_budget_file
from voicelat.files.results import SUMMARY_FILE, TURNS_FILE, LoadedRun, load_run

if TYPE_CHECKING:
    _SubParsers = argparse._SubParsersAction[Any]
else:
    _SubParsers = Any

JUNIT_FILE = "junit.xml"
MARKDOWN_FILE = "report.md"
GATE_FILE = "gate.json"
STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"


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


def _add_report_arguments(ci: argparse.ArgumentParser) -> None:
    """Where ``ci`` writes its reports besides the run directory."""
    ci.add_argument("--junit", type=Path, metavar="FILE", help="also write JUnit XML here")
    ci.add_argument("--markdown", type=Path, metavar="FILE", help="also write Markdown here")
    ci.add_argument(
        "--benchmark-json",
        type=Path,
        metavar="FILE",
        help="also write the percentiles for a benchmark dashboard here (see --benchmark-format)",
    )
    ci.add_argument(
        "--benchmark-format",
        choices=("github", "bencher"),
        default="github",
        help="github: github-action-benchmark's customSmallerIsBetter list (default); "
        "bencher: Bencher's metric format",
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
    _add_report_arguments(ci)
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

    baseline = subparsers.add_parser("baseline", help="keep a run as the baseline for `ci`")
    bsub = baseline.add_subparsers(dest="baseline_command", metavar="COMMAND")
    save = bsub.add_parser(
        "save",
        help="copy a run's summary.json and turns.jsonl into a baseline directory",
        description="Copy a run's summary.json and turns.jsonl (all `ci --baseline` reads) "
        "into DEST, replacing the baseline there.",
    )
    save.add_argument("run", type=Path, metavar="RUN_DIR", help="the run to keep")
    save.add_argument("dest", type=Path, metavar="DEST", help="baseline directory to write")
    save.set_defaults(func=cmd_baseline_save)
    return ci


def _ci_help(ci: argparse.ArgumentParser) -> None:
    # The run options are shared with `run`; two of their help texts are wrong for `ci`.
    for action in ci._actions:
        if "--tui" in action.option_strings:  # `ci` never opens the TUI
            action.help = argparse.SUPPRESS
        elif "--out" in action.option_strings:
            action.help = "results directory (default: runs/<time>-<pipeline>-ci)"


# -- inputs ----------------------------------------------------------------------------------
def _budget(args: argparse.Namespace, table: Mapping[str, Any] | None, source: str) -> Budget:
    """The budget in force: a --budget file replaces the pipeline's [budget] table as a whole."""
    if args.budget is not None:
        return load_budget_file(args.budget)
    if table:
        return parse_budget(table, source=source)
    return Budget(source="defaults (no [budget] given)")


def _budget_table(path: Path) -> dict[str, Any]:
    """The raw ``[budget]`` table of a budget file :func:`load_budget_file` has validated."""
    table = tomllib.loads(path.read_text(encoding="utf-8")).get("budget")
    return dict(table) if isinstance(table, dict) else {}


@dataclass
class _Baseline:
    label: str
    run: LoadedRun
    summary: RunSummary | None
    notes: list[str]


def _load_baseline(args: argparse.Namespace, current: SummaryLike) -> _Baseline | None:
    if args.baseline is None:
        return None
    label = str(args.baseline)
    try:
        run = load_run(args.baseline)
    except VoicelatError as exc:
        raise ConfigError(f"baseline: {exc}") from None
    if not (run.path / TURNS_FILE).exists():
        raise ConfigError(
            f"baseline {label} has no {TURNS_FILE}: the comparison resamples its turns; keep the "
            "whole run directory (voicelat baseline save RUN_DIR DEST)"
        )
    summary = run.run_summary
    notes = check_baseline(summary, current, source=label, force=args.force)
    if run.skipped_lines:
        notes.append(f"baseline: {run.skipped_lines} unreadable line(s) of {TURNS_FILE} skipped")
    return _Baseline(label, run, summary, notes)


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
    budget = _budget(args, pipeline.budget, str(pipeline.path))
    if args.budget is not None:
        # The run records the gate's budget, not the pipeline's: summary.json, report.html and
        # `voicelat view` then draw the limits the gate held the run to.
        pipeline = replace(pipeline, budget=_budget_table(args.budget))
    current = {
        "pipeline": {"name": pipeline.name, "sha256": pipeline.sha256},
        "fixture_set_sha256": fixture_set_hash(fixtures),
    }
    # Refuse a bad baseline before spending minutes on turns.
    baseline = _load_baseline(args, current)
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
            _write_error_reports(args, out_dir, str(exc))
        raise
    except KeyboardInterrupt:
        _write_interrupted_reports(args, out_dir)
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
    run = load_run(args.results)
    _warn_damaged_lines(run)
    if not run.turns:
        neither = f" and no {SUMMARY_FILE}" if run.summary is None else ""
        raise ConfigError(f"{run.path} holds no readable turns{neither}")
    summary = _gated_summary(run)
    if args.pipeline is not None and args.budget is None:
        from voicelat.files.pipeline import load_pipeline

        budget = _budget(args, load_pipeline(args.pipeline).budget, str(args.pipeline))
    else:
        budget = _budget(args, summary.budget, f"[budget] recorded in {run.path / SUMMARY_FILE}")
    baseline = _load_baseline(args, summary)
    skipped = (
        [f"{len(run.problems)} damaged line(s) of {TURNS_FILE} skipped"] if run.problems else []
    )
    return _finish(
        args, summary, list(run.turns), budget, baseline, tolerance, run.path, notes=skipped
    )


def _warn_damaged_lines(run: LoadedRun) -> None:
    """One warning per turns.jsonl line skipped (what is wrong with it), then their count."""
    for problem in run.problems:
        _info(f"warning: {run.path / TURNS_FILE} {problem}; skipped")
    if run.problems:
        _info(f"warning: {len(run.problems)} damaged line(s) skipped; the gate judges the rest")


def _gated_summary(run: LoadedRun) -> RunSummary:
    """The summary ``ci --results`` gates: ``summary.json`` when it matches the turns read,
    else one rebuilt from them (with one warning saying why). A run killed before its end
    (SIGKILL) wrote no summary; a damaged or hand-edited one (negative counts, a count the
    turns do not bear out) would gate numbers no turn measured."""
    from voicelat.core.summary import counts, summarize

    recorded = run.run_summary
    if recorded is None:
        why = f"no {SUMMARY_FILE} (the run was killed before its end?)"
        doc: Mapping[str, Any] = {"run": {"status": "interrupted"}}
    else:
        have = recorded.counts.to_json()
        want = counts(run.turns)
        wrong = next((k for k, v in have.items() if v < 0 or want.get(k, 0) != v), None)
        if wrong is None:
            return recorded
        why = (
            f"{SUMMARY_FILE} counts.{wrong} is {have[wrong]} but {TURNS_FILE} holds "
            f"{want.get(wrong, 0)}"
        )
        doc = run.summary or {}
    _info(f"warning: {why}: gating a summary rebuilt from the {len(run.turns)} turn(s) read")
    return summarize(
        run.turns,
        run=_mapping(doc.get("run")),
        pipeline=_mapping(doc.get("pipeline")),
        fixtures=[f for f in doc.get("fixtures") or () if isinstance(f, Mapping)],
        stages=_mapping(doc.get("stages")),
        budget=_mapping(doc.get("budget")),
    )


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _finish(
    args: argparse.Namespace,
    summary: SummaryLike,
    turns: Sequence[Turn],
    budget: Budget,
    baseline: _Baseline | None,
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
        _write_error_reports(args, run_dir, msg, summary)
        _write_page(args, run_dir)
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
    written = _write_reports(args, run_dir, result)
    _write_page(args, run_dir)
    if getattr(args, "benchmark_json", None) is not None:
        from voicelat.export import benchmark_json

        _write(args.benchmark_json, benchmark_json(summary, args.benchmark_format))
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


# -- output ----------------------------------------------------------------------------------
def _write_page(args: argparse.Namespace, run_dir: Path) -> None:
    """The run's pictures (report.html) beside the gate's reports, a CI artifact; written after
    gate.json so the page opens with the gate's verdict. ``--results`` leaves a finished run's
    files as they are (``voicelat view RUN --html`` redraws the page with the verdict)."""
    if args.results is None:
        from voicelat.cli.run import write_run_report

        write_run_report(run_dir)


def _write(path: Path, text: str, *, append: bool = False) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a" if append else "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror}") from None


def _step_summary(markdown: str) -> None:
    target = os.environ.get(STEP_SUMMARY_ENV)
    if not target:
        return
    try:
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(markdown + "\n")
    except OSError as exc:
        # The gate's verdict stands without the summary page; say so and go on.
        _info(f"warning: cannot append to ${STEP_SUMMARY_ENV} ({target}): {exc.strerror}")


def _write_reports(args: argparse.Namespace, run_dir: Path, result: GateResult) -> list[Path]:
    from voicelat.report.junit import junit_xml
    from voicelat.report.markdown import markdown_report

    xml, md = junit_xml(result), markdown_report(result)
    written = []
    for path, text in (
        (run_dir / JUNIT_FILE, xml),
        (run_dir / MARKDOWN_FILE, md),
        (run_dir / GATE_FILE, json.dumps(result.to_json(), indent=2) + "\n"),
        (args.junit, xml),
        (args.markdown, md),
    ):
        if path is not None:
            _write(path, text)
            written.append(path)
    _step_summary(md)
    return written


def _write_error_reports(
    args: argparse.Namespace,
    run_dir: Path,
    message: str,
    summary: SummaryLike | None = None,
) -> None:
    """Even a gate that could not run leaves a JUnit error and a Markdown line for the CI page."""
    from voicelat.report.junit import junit_error_xml
    from voicelat.report.markdown import markdown_error

    xml, md = junit_error_xml(message, summary=summary), markdown_error(message)
    try:
        for path, text in (
            (run_dir / JUNIT_FILE, xml),
            (run_dir / MARKDOWN_FILE, md),
            (args.junit, xml),
            (args.markdown, md),
        ):
            if path is not None:
                _write(path, text)
    except ConfigError as exc:
        _info(f"warning: {exc}")  # the infrastructure error is the one to report
    _step_summary(md)


def _write_interrupted_reports(args: argparse.Namespace, run_dir: Path) -> None:
    """A stopped gate (Ctrl-C, SIGTERM from a cancelled CI job) still leaves its JUnit and
    Markdown reports, saying it was interrupted and how many turns finished."""
    summary: RunSummary | None = None
    with contextlib.suppress(VoicelatError, OSError):
        summary = load_run(run_dir).run_summary
    done = "" if summary is None else f" after {summary.counts.turns} finished turn(s)"
    _write_error_reports(args, run_dir, f"interrupted{done}: the gate did not run", summary)


# -- baselines -------------------------------------------------------------------------------
def save_baseline(run_dir: Path, dest: Path) -> None:
    """Copy a run's ``summary.json`` and ``turns.jsonl`` into ``dest`` (each replaced atomically)."""
    if dest.exists() and not dest.is_dir():
        raise ConfigError(f"baseline destination {dest} is a file, not a directory")
    if dest.resolve() == run_dir.resolve():
        return  # the run already is the baseline
    others = sorted(
        p.name
        for p in (dest.iterdir() if dest.exists() else ())
        if p.name not in (SUMMARY_FILE, TURNS_FILE, JUNIT_FILE, MARKDOWN_FILE, GATE_FILE)
    )
    if others:
        raise ConfigError(
            f"{dest} holds {', '.join(others[:3])}: not a baseline directory; choose another"
        )
    try:
        dest.mkdir(parents=True, exist_ok=True)
        for name in (SUMMARY_FILE, TURNS_FILE):
            data = (run_dir / name).read_bytes()
            tmp = dest / f".{name}.tmp"
            tmp.write_bytes(data)
            os.replace(tmp, dest / name)
    except OSError as exc:
        raise ConfigError(f"cannot save the baseline to {dest}: {exc.strerror}") from None


def cmd_baseline_save(args: argparse.Namespace) -> int:
    """``voicelat baseline save RUN_DIR DEST``."""
    run = load_run(args.run)
    summary = run.run_summary
    if summary is None or not (run.path / TURNS_FILE).exists():
        raise ConfigError(
            f"{run.path} needs both {SUMMARY_FILE} and {TURNS_FILE} to serve as a baseline"
        )
    n = sum(t.headline for t in run.turns)
    if n == 0:
        raise ConfigError(f"{run.path} has no warm measured turn: nothing to compare against")
    save_baseline(run.path, args.dest)
    p50, p90 = summary.e2e.p50, summary.e2e.p90
    figures = (
        f"; e2e P50 {fmt_ms(p50)} ms, P90 {fmt_ms(p90)} ms"
        if p50 is not None and p90 is not None
        else ""
    )
    print(f"baseline saved: {args.dest} ({n} warm turns{figures})")
    return EXIT_OK
