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
from pathlib import Path
from typing import Any, Literal, TextIO

from voicelat.cli.args import (
    bounded_seconds,
    non_negative_int,
    positive_int,
    ray_address,
    worker_count,
)
from voicelat.core.errors import EXIT_OK
from voicelat.core.plan import PlannedTurn
from voicelat.core.run_summary import RunSummary
from voicelat.core.turn import Turn
from voicelat.engine.job import default_out_dir, execute_run, info, resolve_inputs, set_quiet
from voicelat.files.results import check_out_dir, load_run
from voicelat.report.text import summary_table, turn_line

__all__ = ["PrintObserver", "add_parser", "add_run_arguments", "cmd_run"]


def _rate(value: str) -> float:
    try:
        r = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    if not (r > 0 and r != float("inf")):
        raise argparse.ArgumentTypeError(f"{value} must be a positive number of turns per second")
    return r


def _seed(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not an integer") from None


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """Options shared by ``run`` and the commands built on it (``ci``)."""
    p.add_argument(
        "--pipeline", "-p", type=Path, help="pipeline TOML file (default: the embedded local stack)"
    )
    p.add_argument(
        "--fixtures",
        "-f",
        type=Path,
        help="fixtures directory with manifest.json (default: bundled)",
    )
    p.add_argument(
        "--turns",
        "-n",
        type=positive_int,
        help="number of measured turns (default: every fixture once per repeat)",
    )
    p.add_argument(
        "--repeat",
        "-r",
        type=positive_int,
        default=1,
        help="rounds over the fixtures, interleaved (default 1)",
    )
    p.add_argument(
        "--warmup",
        "-w",
        type=non_negative_int,
        default=1,
        help="warm-up turns, run first and excluded (default 1)",
    )
    p.add_argument(
        "--out", "-o", type=Path, help="results directory (default: runs/<time>-<pipeline>)"
    )
    p.add_argument(
        "--scenario",
        type=Path,
        metavar="FILE|DIR",
        help="run whole calls: each scenario (a TOML file, or every *.toml in DIR) is one call "
        "on one connection, turn after turn (--repeat rounds of them, --concurrency N calls at "
        "once; docs/CALLS.md)",
    )
    _add_caller_arguments(p)
    _add_load_arguments(p)
    _add_export_arguments(p)
    p.add_argument(
        "--calibrate",
        choices=("off", "quick", "full"),
        default=None,
        help="the instrument error bar: time a known-delay reference on this host before the "
        "turns (quick, the default: ~3 s), also after them (full), or not (off); "
        "docs/BENCHMARKS.md",
    )
    p.add_argument(
        "--network",
        default=None,
        metavar="PROFILE|FILE",
        help="run under a network impairment: a built-in (lan, broadband, 4g, 3g-bad, "
        "transatlantic, phone) or a TOML file with a [network] table; overrides the "
        "pipeline's [network] (docs/NETWORK.md)",
    )
    p.add_argument(
        "--save-audio",
        action="store_true",
        help="write each reply's audio into the results directory",
    )
    p.add_argument(
        "--tui",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show the live terminal UI (default: when stdout is a terminal; `run` only)",
    )
    # Internal: `run --tui` starts the measuring run as a child process with this flag and
    # reads its observer calls as JSON lines on the child's stdout (voicelat.tui.protocol).
    p.add_argument("--events", choices=("jsonl",), default=None, help=argparse.SUPPRESS)


def _add_caller_arguments(p: argparse.ArgumentParser) -> None:
    # A simulated caller's options (a scenario's [caller]: docs/CALLER.md).
    p.add_argument(
        "--frozen",
        type=Path,
        metavar="RUN_DIR",
        help="a simulated caller ([caller]) replays the lines it said in RUN_DIR (its "
        "conversation.jsonl) exactly, whatever the agent answers: a regression run "
        "(docs/CALLER.md)",
    )
    p.add_argument(
        "--caller-cache",
        type=Path,
        metavar="DIR",
        help="where a simulated caller keeps its rendered lines, by (voice, text) hash "
        "(default: $VOICELAT_CACHE/caller, else ~/.cache/voicelat/caller)",
    )


def _add_load_arguments(p: argparse.ArgumentParser) -> None:
    # Load: a closed loop of N sessions or an open loop at R turns/s, never both (schedule.py).
    load = p.add_mutually_exclusive_group()
    load.add_argument(
        "--concurrency",
        "-c",
        type=positive_int,
        default=None,
        metavar="N",
        help="closed loop: N sessions (each with its own connections) run turns back to back "
        "(default 1)",
    )
    load.add_argument(
        "--rate",
        type=_rate,
        default=None,
        metavar="R",
        help="open loop: start R turns per second on a schedule, whether or not earlier turns "
        "are done; latency is reported from the actual and from the intended start",
    )
    p.add_argument(
        "--workers",
        type=worker_count,
        default=1,
        metavar="N",
        help="shard the sessions over N worker processes, one event loop each (default 1); "
        "one turns.jsonl and one summary",
    )
    p.add_argument(
        "--ray",
        type=ray_address,
        default=None,
        metavar="ADDRESS",
        help="run the workers as Ray actors across the nodes of the Ray cluster at ADDRESS "
        "(HOST:PORT of the head, or auto; the ray extra): one per node unless --workers N",
    )
    p.add_argument(
        "--arrival",
        choices=("poisson", "constant"),
        default=None,
        help="open-loop arrivals: poisson (seeded, the default) or constant gaps; needs --rate",
    )
    p.add_argument(
        "--arrival-seed",
        type=_seed,
        default=None,
        metavar="S",
        help="seed of the Poisson arrivals (default 1: the same schedule every run); needs --rate",
    )


#: ``--metrics-linger`` at most: a day is longer than any scrape interval.
MAX_LINGER_S = 86_400.0


def _add_export_arguments(p: argparse.ArgumentParser) -> None:
    # Exports besides turns.jsonl/summary.json/turns.csv (docs/EXPORT.md); both off the loop.
    p.add_argument(
        "--otlp-endpoint",
        metavar="URL",
        default=None,
        help="send each turn's spans and the run's metrics over OTLP/HTTP to URL (the otel "
        "extra; default: the OTEL_EXPORTER_OTLP_* variables, else off)",
    )
    p.add_argument(
        "--metrics-port",
        type=_port,
        default=None,
        metavar="P",
        help="serve Prometheus /metrics on 127.0.0.1:P while the run goes (the prometheus extra)",
    )
    p.add_argument(
        "--metrics-linger",
        type=bounded_seconds(MAX_LINGER_S),
        default=None,
        metavar="S",
        help="after the run, keep /metrics up until it is scraped once more, at most S seconds "
        "(a run shorter than the scrape interval loses its last turns otherwise)",
    )


def _port(value: str) -> int:
    try:
        port = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port number") from None
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"{value} is not a port number (1-65535)")
    return port


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
ExecuteRun = Callable[..., Any]


def write_run_report(out_dir: Path) -> None:
    """``OUT/report.html``, the run's pictures, once the measuring is over; a page that cannot
    be written is a warning, never a failed run (``voicelat view OUT --html`` retries)."""
    from voicelat.cli.view import run_page, write_report
    from voicelat.core.errors import VoicelatError
    from voicelat.files.results import TURNS_FILE, load_run

    if not (out_dir / TURNS_FILE).is_file():
        return  # the run stopped before its first turn: nothing to draw
    try:
        write_report(out_dir, run_page(load_run(out_dir)))
    except (OSError, VoicelatError) as exc:
        info(f"warning: no report.html ({exc}); retry with: voicelat view {out_dir} --html")


def _score_after_run(out_dir: Path, mode: str) -> str | None:
    """Price the run's turns (and score its replies when ``--score`` asks) once measuring is
    over; a scoring failure is a warning, never a failed run (``voicelat score OUT`` retries)."""
    from voicelat.cli.score import score_after_run
    from voicelat.core.errors import VoicelatError

    try:
        return score_after_run(out_dir, mode)
    except (OSError, VoicelatError) as exc:
        info(f"warning: not scored ({exc}); retry with: voicelat score {out_dir}")
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
    set_quiet(quiet)
    if as_json or quiet:
        args.tui = False  # the TUI would own the terminal; these outputs are for scripts
    pipeline, fixtures = resolve_inputs(args)
    out_dir = args.out or default_out_dir(pipeline)
    check_out_dir(out_dir)
    info(
        f"pipeline {pipeline.name} ({pipeline.path}); {len(fixtures)} fixtures; results -> {out_dir}"
    )
    if getattr(args, "events", None):
        # The measuring child of `run --tui`: observer calls go out as JSON lines on stdout
        # (per-turn lines and the table are the TUI's job); stderr carries the human lines.
        from voicelat.tui.protocol import event_stream, recorded_argv

        with event_stream(fixtures, out_dir) as observer:
            execute(args, pipeline, fixtures, out_dir, observer, argv=recorded_argv(sys.argv))
        return EXIT_OK
    from voicelat.tui import live

    if live.want_tui(args):
        # The run is measured in a child process: the UI cannot delay one of its timestamps.
        command = live.child_command(args, out_dir, add_run_arguments)
        code = live.run_with_tui(args, pipeline, fixtures, out_dir, command=command, argv=sys.argv)
        write_run_report(out_dir)
        _score_after_run(out_dir, getattr(args, "score", "off"))
        return code
    stream = None if quiet else sys.stderr if as_json else sys.stdout
    outcome = execute(args, pipeline, fixtures, out_dir, PrintObserver(stream), argv=sys.argv)
    write_run_report(out_dir)
    scored = _score_after_run(out_dir, getattr(args, "score", "off"))
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
        info("note: no warm turn to report (cold and warm-up turns are kept apart); add turns")
    return EXIT_OK
