"""``voicelat view DIR``: open saved results in the TUI, no pipeline running.

``DIR`` is a run directory (``voicelat run``: turns.jsonl + summary.json) or a comparison
directory (``voicelat compare``: comparison.json and one run directory per combination).
``--html`` (re)writes the directory's ``report.html`` instead of opening the terminal UI.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from voicelat.cli.signals import STOP_SIGNALS
from voicelat.core.base import jsontext
from voicelat.core.base.errors import EXIT_INFRA, EXIT_OK, VoicelatError
from voicelat.files.comparison import (
    COMPARISON_JSON,
    LoadedComparison,
    is_comparison,
    load_comparison,
)
from voicelat.files.results import LoadedRun, load_run

if TYPE_CHECKING:
    from voicelat.report.run_html import GateHeadline

REPORT_HTML = "report.html"
#: Read here for the command, kept importable from here (older callers and tests).
__all__ = [
    "COMPARISON_JSON",
    "LoadedComparison",
    "add_parser",
    "cmd_view",
    "comparison_page",
    "is_comparison",
    "load_comparison",
    "run_page",
    "write_report",
]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``view`` on the ``voicelat`` command's subparsers."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "view",
        help="open a saved run's or comparison's results in the terminal UI",
        description=(
            "Open a run directory (turns.jsonl + summary.json) or a comparison directory "
            "(comparison.json, from `voicelat compare`) in the terminal UI. Run keys: p cycles "
            "P50/P90/P99, s sorts turns, g shows the pictures (distribution, e2e over the run, "
            "per fixture), enter opens a turn, q quits. Comparison keys: enter opens a "
            "combination (its waterfalls and pictures), esc goes back, q quits. When stdout is "
            "not a terminal, prints the summary or the ranking instead."
        ),
    )
    p.add_argument(
        "run_dir",
        type=Path,
        metavar="DIR",
        help="a directory `voicelat run` or `voicelat compare` wrote",
    )
    p.add_argument(
        "--html",
        action="store_true",
        help="write DIR/report.html (the pictures, one offline page) and print its path",
    )
    p.add_argument(
        "--definitions",
        action="store_true",
        help="print the run's latency in every public definition (Artificial Analysis, "
        "eot-bench, Coval, OpenBenchmarks, Twilio, Pipecat, LiveKit, ...; docs/DEFINITIONS.md)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the run's summary as JSON with a `definitions` section, nothing else",
    )
    p.set_defaults(func=cmd_view)
    return p


def print_definitions(run: LoadedRun, *, as_json: bool) -> int:
    """``--definitions`` / ``--json``: the run in every public definition, as text or JSON."""
    from voicelat.core.judge.definitions import compute_definitions, definitions_json
    from voicelat.core.summaries.summary import summarize

    summary = run.run_summary or summarize(run.turns, run={}, pipeline={}, fixtures=[], stages={})
    results = compute_definitions(run.turns)
    if as_json:
        doc = summary.to_json() | {"definitions": definitions_json(results)}
        print(json.dumps(doc, indent=2))
    else:
        from voicelat.report.definitions import definitions_text

        print(definitions_text(results, instrument=summary.extra.get("instrument")))
    return EXIT_OK


def comparison_page(loaded: LoadedComparison) -> str:
    """The comparison's ``report.html`` with every picture its run directories allow."""
    from voicelat.report.comparison_html import comparison_html

    return comparison_html(loaded.doc, loaded.runs)


def run_page(run: LoadedRun) -> str:
    """A run's ``report.html``."""
    from voicelat.core.summaries.summary import summarize
    from voicelat.files.results import read_calls
    from voicelat.report.run_html import run_html

    summary = run.run_summary or summarize(run.turns, run={}, pipeline={}, fixtures=[], stages={})
    return run_html(
        summary, run.turns, str(run.path), calls=read_calls(run.path), gate=_gate_headline(run.path)
    )


def _gate_headline(run_dir: Path) -> GateHeadline | None:
    """The verdict of ``voicelat ci`` on this run (its gate.json), None when it was not gated
    or the file cannot be read (the page is drawn without it)."""
    from voicelat.report.run_html import GateHeadline

    try:
        doc = jsontext.loads((run_dir / "gate.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return GateHeadline.from_json(doc) if isinstance(doc, dict) else None


def write_report(path: Path, page: str) -> Path:
    """Write ``path/report.html`` whole (a reader never sees half a page)."""
    out = path / REPORT_HTML
    if out.is_dir():
        raise VoicelatError(f"{out} is a directory: remove it to write the report there")
    tmp = out.with_name(out.name + ".tmp")
    try:
        tmp.write_text(page, encoding="utf-8")
        tmp.replace(out)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise VoicelatError(
            f"cannot write {out}: {exc.strerror or exc}", exit_code=EXIT_INFRA
        ) from None
    return out


def cmd_view(args: argparse.Namespace) -> int:
    """Open DIR; bad input is one ``VoicelatError`` line (exit 2), never a traceback."""
    if is_comparison(args.run_dir):
        if getattr(args, "definitions", False) or getattr(args, "json", False):
            raise VoicelatError(
                f"{args.run_dir} is a comparison: --definitions and --json read one run; "
                "give one of its run directories (voicelat view DIR/<combination> --definitions)"
            )
        return _view_comparison(args, load_comparison(args.run_dir))
    _refuse_unfinished_comparison(args.run_dir)
    run = load_run(args.run_dir)
    if not run.turns and run.summary is None:
        raise VoicelatError(
            f"{run.path} has no readable turn and no summary "
            f"({run.skipped_lines} unreadable line(s) in turns.jsonl)"
        )
    if getattr(args, "html", False):
        print(write_report(run.path, run_page(run)))
        return EXIT_OK
    if getattr(args, "definitions", False) or getattr(args, "json", False):
        return print_definitions(run, as_json=getattr(args, "json", False))
    if not sys.stdout.isatty():
        # Piped or redirected: a screen full of escape codes helps nobody; print the summary.
        from voicelat.core.summaries.summary import summarize
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
    with _quit_on_signals(app) as stopped_by:
        app.run()
    if stopped_by:
        # One signal policy (docs/FAILURES.md): 128 + N, the terminal given back first.
        return 128 + stopped_by[0]
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


def _refuse_unfinished_comparison(path: Path) -> None:
    """A comparison stopped before its ranking holds run directories but no comparison.json:
    say what it is and what to do, instead of "not a run directory"."""
    if not path.is_dir() or (path / "turns.jsonl").exists() or (path / "summary.json").exists():
        return
    runs = sorted(d.name for d in path.iterdir() if (d / "summary.json").is_file())
    if runs:
        shown = " ".join(str(path / r) for r in runs[:4])
        raise VoicelatError(
            f"{path} has run directories ({', '.join(runs[:4])}) but no {COMPARISON_JSON}: a "
            f"comparison that did not finish; view one of them, or rank them with: "
            f"voicelat compare {shown}"
        )


def _view_comparison(args: argparse.Namespace, loaded: LoadedComparison) -> int:
    for name, why in loaded.missing.items():
        print(f"voicelat: {name}: {why} (its pictures are left out)", file=sys.stderr)
    if getattr(args, "html", False):
        print(write_report(loaded.path, comparison_page(loaded)))
        return EXIT_OK
    if not sys.stdout.isatty():
        from voicelat.report.chartdata import accuracy, accuracy_text
        from voicelat.report.comparison import comparison_text

        print(comparison_text(loaded.doc))
        for name, turns in loaded.runs.items():
            print(f"{name}: {accuracy_text(accuracy(turns))}")
        return EXIT_OK
    from voicelat.tui.compare import show_comparison

    if show_comparison(loaded.doc, loaded.runs):
        raise VoicelatError(
            f"the terminal UI stopped on an error showing {loaded.path}", exit_code=3
        )
    return EXIT_OK


@contextlib.contextmanager
def _quit_on_signals(app: Any) -> Iterator[list[int]]:
    """While the viewer runs, SIGINT, SIGTERM and SIGHUP quit it the way ``q`` does (the app
    restores the terminal) and are recorded: textual swallows the main task's cancellation that
    asyncio's own SIGINT handling relies on, so ``kill`` used to end the viewer with exit 0.
    Ctrl-C typed in the viewer is a key (quit, exit 0), not a signal. A signal someone chose to
    ignore stays ignored."""
    stopped: list[int] = []
    previous: dict[int, Any] = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}

    def handler(signum: int, frame: FrameType | None) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            # Before the app's loop runs or after it ended: the command-wide policy.
            old = previous[signum]
            if callable(old):
                old(signum, frame)
            raise KeyboardInterrupt from None
        stopped.append(signum)
        # Thread-safe scheduling is also the signal-handler-safe way into a running loop.
        loop.call_soon_threadsafe(app.exit)

    for sig, old in previous.items():
        if old is not signal.SIG_IGN:
            signal.signal(sig, handler)
    try:
        yield stopped
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
