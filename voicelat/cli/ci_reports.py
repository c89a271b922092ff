"""``voicelat ci``'s reports: JUnit XML, Markdown and ``gate.json`` in the run directory (and
where ``--junit`` / ``--markdown`` say), the Markdown appended to ``$GITHUB_STEP_SUMMARY``, the
run's report.html; and the same reports when the gate could not run (an error, a stop)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path

from voicelat.core.base.errors import ConfigError, VoicelatError
from voicelat.core.judge.gate import GateResult
from voicelat.core.summaries.run_summary import RunSummary, SummaryLike
from voicelat.files.results import load_run

__all__ = [
    "GATE_FILE",
    "JUNIT_FILE",
    "MARKDOWN_FILE",
    "STEP_SUMMARY_ENV",
    "add_report_arguments",
    "write_error_reports",
    "write_interrupted_reports",
    "write_page",
    "write_reports",
    "write_text",
]

JUNIT_FILE = "junit.xml"
MARKDOWN_FILE = "report.md"
GATE_FILE = "gate.json"
STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"


def add_report_arguments(ci: argparse.ArgumentParser) -> None:
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


def _info(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def write_page(args: argparse.Namespace, run_dir: Path) -> None:
    """The run's pictures (report.html) beside the gate's reports, a CI artifact; written after
    gate.json so the page opens with the gate's verdict. ``--results`` leaves a finished run's
    files as they are (``voicelat view RUN --html`` redraws the page with the verdict)."""
    if args.results is None:
        from voicelat.cli.run import write_run_report

        write_run_report(run_dir)


def write_text(path: Path, text: str, *, append: bool = False) -> None:
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


def write_reports(args: argparse.Namespace, run_dir: Path, result: GateResult) -> list[Path]:
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
            write_text(path, text)
            written.append(path)
    _step_summary(md)
    return written


def write_error_reports(
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
                write_text(path, text)
    except ConfigError as exc:
        _info(f"warning: {exc}")  # the infrastructure error is the one to report
    _step_summary(md)


def write_interrupted_reports(args: argparse.Namespace, run_dir: Path) -> None:
    """A stopped gate (Ctrl-C, SIGTERM from a cancelled CI job) still leaves its JUnit and
    Markdown reports, saying it was interrupted and how many turns finished."""
    summary: RunSummary | None = None
    with contextlib.suppress(VoicelatError, OSError):
        summary = load_run(run_dir).run_summary
    done = "" if summary is None else f" after {summary.counts.turns} finished turn(s)"
    write_error_reports(args, run_dir, f"interrupted{done}: the gate did not run", summary)
