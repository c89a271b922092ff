"""``voicelat view RUN_DIR``: open saved results in the TUI, no pipeline running."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from voicelat.core.errors import EXIT_OK, VoicelatError
from voicelat.files.results import load_run


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``view`` on the ``voicelat`` command's subparsers."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "view",
        help="open a saved run's results in the terminal UI",
        description=(
            "Open a run directory (turns.jsonl + summary.json) in the terminal UI. "
            "Keys: p cycles P50/P90/P99, s sorts turns, enter opens a turn, q quits. "
            "When stdout is not a terminal, prints the summary table instead."
        ),
    )
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a directory `voicelat run` wrote")
    p.set_defaults(func=cmd_view)
    return p


def cmd_view(args: argparse.Namespace) -> int:
    """Open RUN_DIR; bad input is one ``VoicelatError`` line (exit 2), never a traceback."""
    run = load_run(args.run_dir)
    if not run.turns and run.summary is None:
        raise VoicelatError(
            f"{run.path} has no readable turn and no summary "
            f"({run.skipped_lines} unreadable line(s) in turns.jsonl)"
        )
    if not sys.stdout.isatty():
        # Piped or redirected: a screen full of escape codes helps nobody; print the summary.
        from voicelat.core.summary import summarize
        from voicelat.report.text import summary_table

        # A run killed before its end wrote no summary: make one of the turns it kept.
        summary = run.run_summary or summarize(
            run.turns, run={}, pipeline={}, fixtures=[], stages={}
        )
        print(summary_table(summary, str(run.path)))
        if run.skipped_lines:
            print(
                f"{run.skipped_lines} unreadable line(s) in turns.jsonl were skipped",
                file=sys.stderr,
            )
        return EXIT_OK

    from voicelat.tui.app import VoicelatApp
    from voicelat.tui.model import RunModel

    app = VoicelatApp(RunModel.from_loaded(run))
    app.run()
    if app.return_code:
        # Textual printed what went wrong; the exit status must say so too (it used to be 0).
        raise VoicelatError(f"the terminal UI stopped on an error showing {run.path}", exit_code=3)
    if run.skipped_lines:
        print(
            f"voicelat: {run.skipped_lines} unreadable line(s) in {run.path / 'turns.jsonl'} "
            "were skipped",
            file=sys.stderr,
        )
    return EXIT_OK
