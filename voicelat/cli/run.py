"""``voicelat run``: replay the fixtures through a pipeline and measure every turn.

The steps of a run (inputs, the embedded stack, the runner on its event loop) are a job of the
engine (:mod:`voicelat.engine.job`); this module is the command around them: its options,
the per-turn lines and the summary table, and the choice between the plain output, the TUI
(the run measured in a child process) and that child itself (``--events jsonl``).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal, TextIO

from voicelat.cli.request import request_from_args
from voicelat.cli.run_args import add_run_arguments
from voicelat.core.base.errors import EXIT_OK
from voicelat.core.base.plan import PlannedTurn
from voicelat.core.base.turn import Turn
from voicelat.core.summaries.run_summary import RunSummary
from voicelat.engine.job import default_out_dir, execute_run, resolve_inputs
from voicelat.engine.progress import Progress, progress_for, stderr_progress
from voicelat.engine.request import RunRequest
from voicelat.files.results import check_out_dir, load_run
from voicelat.report.text import summary_table, turn_line

__all__ = ["PrintObserver", "add_parser", "add_run_arguments", "cmd_run"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``run`` on the ``voicelat`` command's subparsers."""
    run: argparse.ArgumentParser = subparsers.add_parser(
        "run", help="replay audio fixtures through a pipeline and measure every turn"
    )
    add_run_arguments(run)
    out = run.add_mutually_exclusive_group()
    out.add_argument(
        "--json",
        action="store_true",
        help="print the summary as JSON on stdout and nothing else (progress on stderr)",
    )
    out.add_argument(
        "--quiet", "-q", action="store_true", help="print errors only (results still written)"
    )
    run.add_argument(
        "--score",
        choices=("off", "wer", "all"),
        default="off",
        help="after the run (never during it): off prices the turns only (when the pipeline "
        "has [cost]); wer adds the reply WER, all adds DNSMOS (needs --save-audio)",
    )
    run.set_defaults(func=cmd_run)
    return run


class PrintObserver:
    """Prints one line per finished turn (runs on the measuring loop: printing a line is cheap)
    to ``stream`` (stdout; stderr under ``--json``), or nothing when ``stream`` is None."""

    def __init__(self, stream: TextIO | Literal["stdout"] | None = "stdout") -> None:
        self.t_start = time.monotonic()
        # sys.stdout when the observer is made, not when this module was imported: the
        # command's stdout is guarded against a reader that leaves (cli/signals.py) by then.
        self.stream: TextIO | None = sys.stdout if isinstance(stream, str) else stream

    def turn_started(self, planned: PlannedTurn, total: int) -> None:
        return None

    def milestone(self, index: int, name: str, t_rel_ns: int) -> None:
        return None

    def turn_finished(self, turn: Turn, total: int) -> None:
        if self.stream is not None:
            print(turn_line(turn, total), file=self.stream, flush=True)


#: ``execute_run``'s signature, for the callers that hand :func:`cmd_run` another one (tests).
ExecuteRun = Callable[[RunRequest, Any, Progress], Any]


def write_run_report(out_dir: Path, progress: Progress = stderr_progress) -> None:
    """``OUT/report.html``, the run's pictures, once the measuring is over; a page that cannot
    be written is a warning, never a failed run (``voicelat view OUT --html`` retries)."""
    from voicelat.cli.view import run_page, write_report
    from voicelat.core.base.errors import VoicelatError
    from voicelat.files.results import TURNS_FILE, load_run

    if not (out_dir / TURNS_FILE).is_file():
        return  # the run stopped before its first turn: nothing to draw
    try:
        write_report(out_dir, run_page(load_run(out_dir)))
    except (OSError, VoicelatError) as exc:
        progress(f"warning: no report.html ({exc}); retry with: voicelat view {out_dir} --html")


def _score_after_run(out_dir: Path, mode: str, progress: Progress) -> str | None:
    """Price the run's turns (and score its replies when ``--score`` asks) once measuring is
    over; a scoring failure is a warning, never a failed run (``voicelat score OUT`` retries)."""
    from voicelat.cli.score import score_after_run
    from voicelat.core.base.errors import VoicelatError

    try:
        return score_after_run(out_dir, mode)
    except (OSError, VoicelatError) as exc:
        progress(f"warning: not scored ({exc}); retry with: voicelat score {out_dir}")
        return None


def cmd_run(
    args: argparse.Namespace,
    execute: ExecuteRun | None = None,
    table: Callable[[Any, str], str] | None = None,
) -> int:
    """``voicelat run``; ``execute`` and ``table`` are the job and the summary table (by
    default this module's ``execute_run`` and ``summary_table``, looked up when called so a
    test that replaces them here replaces them in the command)."""
    execute = execute or execute_run
    table = table or summary_table
    as_json, quiet = getattr(args, "json", False), getattr(args, "quiet", False)
    progress = progress_for(quiet)
    if as_json or quiet:
        args.tui = False  # the TUI would own the terminal; these outputs are for scripts
    request = request_from_args(args, sys.argv)
    pipeline, fixtures = resolve_inputs(request)
    out_dir = request.out_dir or default_out_dir(pipeline)
    check_out_dir(out_dir)
    request = request.with_inputs(pipeline, fixtures, out_dir)
    progress(
        f"pipeline {pipeline.name} ({pipeline.path}); {len(fixtures)} fixtures; results -> {out_dir}"
    )
    if getattr(args, "events", None):
        # The measuring child of `run --tui`: observer calls go out as JSON lines on stdout
        # (per-turn lines and the table are the TUI's job); stderr carries the human lines.
        from voicelat.tui.protocol import event_stream, recorded_argv

        with event_stream(fixtures, out_dir) as observer:
            execute(replace(request, argv=tuple(recorded_argv(sys.argv))), observer, progress)
        return EXIT_OK
    from voicelat.cli.tui_child import child_command, want_tui

    if want_tui(args):
        from voicelat.tui import live

        # The run is measured in a child process: the UI cannot delay one of its timestamps.
        command = child_command(args, out_dir, add_run_arguments)
        code = live.run_with_tui(
            pipeline, out_dir, planned=_planned(request), command=command, argv=sys.argv
        )
        write_run_report(out_dir, progress)
        _score_after_run(out_dir, getattr(args, "score", "off"), progress)
        return code
    stream = None if quiet else sys.stderr if as_json else sys.stdout
    outcome = execute(request, PrintObserver(stream), progress)
    write_run_report(out_dir, progress)
    scored = _score_after_run(out_dir, getattr(args, "score", "off"), progress)
    if as_json:
        from voicelat.export import summary_json

        # Priced or scored after the run: the summary on disk has the cost/quality sections.
        doc = load_run(out_dir).summary if scored else None
        sys.stdout.write(summary_json(doc or outcome.summary))
        sys.stdout.flush()
        return EXIT_OK
    if quiet:
        return EXIT_OK
    print()
    print(table(outcome.summary, str(out_dir)))
    if scored:
        print(scored)
    if RunSummary.coerce(outcome.summary).counts.headline == 0 and outcome.turns:
        progress("note: no warm turn to report (cold and warm-up turns are kept apart); add turns")
    return EXIT_OK


def _planned(request: RunRequest) -> int:
    """How many turns the measuring child runs (the TUI's progress bar): the fixture plan."""
    from voicelat.core.base.plan import plan_turns

    fixtures = request.fixtures or ()
    p = request.plan
    return len(
        plan_turns([f.id for f in fixtures], repeat=p.repeat, turns=p.turns, warmup=p.warmup)
    )
