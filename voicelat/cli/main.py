"""The ``voicelat`` command.

Exit codes: 0 success; 1 a latency budget broken or a significant regression (``ci``);
2 usage or configuration error; 3 infrastructure failure (a server down, every turn failed);
130 interrupted (finished turns are kept and the summary is written).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from voicelat.cli.args import non_negative_int, positive_int
from voicelat.core.errors import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    ConfigError,
    VoicelatError,
)
from voicelat.core.plan import PlannedTurn, plan_turns
from voicelat.core.turn import Turn
from voicelat.core.version import __version__
from voicelat.files.fixtures import Fixture, default_fixtures_dir, load_fixtures
from voicelat.files.pipeline import Pipeline, default_pipeline_path, load_pipeline
from voicelat.report.text import summary_table, turn_line


def _err(msg: str) -> None:
    print(f"voicelat: error: {msg}", file=sys.stderr, flush=True)


def _info(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line plus a hint, exit code 2."""

    def error(self, message: str) -> Any:
        _err(f"{message} (see {self.prog} --help)")
        raise SystemExit(EXIT_USAGE)


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


#: Modules that register a subcommand with ``add_parser(subparsers)``.
_SUBCOMMANDS = (
    "voicelat.cli.stack",
    "voicelat.cli.live",
    "voicelat.cli.ci",
    "voicelat.cli.compare",
    "voicelat.cli.view",
    "voicelat.cli.serve",
)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="voicelat", description="Latency profiler for realtime voice pipelines.")
    parser.add_argument("--version", action="version", version=f"voicelat {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    run = sub.add_parser(
        "run", help="replay audio fixtures through a pipeline and measure every turn"
    )
    add_run_arguments(run)
    run.set_defaults(func=cmd_run)
    for module in _SUBCOMMANDS:
        # Imported on demand: `voicelat run` should not pay for textual or the emulators.
        importlib.import_module(module).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        if args.command is None:
            args = parser.parse_args(["run", *(argv or [])])
        else:
            parser.print_help()
            return EXIT_USAGE
    try:
        return int(args.func(args))
    except VoicelatError as exc:
        _err(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        _err("interrupted")
        return EXIT_INTERRUPTED


# -- run ------------------------------------------------------------------------------------
class PrintObserver:
    """Prints one line per finished turn (runs on the measuring loop: printing a line is cheap)."""

    def __init__(self) -> None:
        self.t_start = time.monotonic()

    def turn_started(self, planned: PlannedTurn, total: int) -> None:
        return None

    def milestone(self, index: int, name: str, t_rel_ns: int) -> None:
        return None

    def turn_finished(self, turn: Turn, total: int) -> None:
        print(turn_line(turn, total), flush=True)


def resolve_inputs(args: argparse.Namespace) -> tuple[Pipeline, list[Fixture]]:
    pipeline_path = args.pipeline or default_pipeline_path()
    pipeline = load_pipeline(pipeline_path)
    fixtures = load_fixtures(args.fixtures or default_fixtures_dir())
    if getattr(args, "save_audio", False):
        from dataclasses import replace

        pipeline = replace(pipeline, output=replace(pipeline.output, save_audio=True))
    return pipeline, fixtures


def default_out_dir(pipeline: Pipeline, kind: str = "") -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    name = f"{stamp}-{pipeline.name}{'-' + kind if kind else ''}"
    out = Path("runs") / name
    n = 1
    while out.exists():
        n += 1
        out = Path("runs") / f"{name}-{n}"
    return out


def with_stack_urls(pipeline: Pipeline) -> Pipeline:
    """Point stages that name no server at the embedded stack's servers (when it is used)."""
    if pipeline.stack != "local":
        return pipeline
    from dataclasses import replace

    from voicelat.stack import StackConfig
    from voicelat.stages.base import load_stage_class

    cfg = StackConfig()
    urls = {"stt": cfg.stt_url, "tts": cfg.tts_url, "llm": f"{cfg.llm_url}/v1"}
    tables: dict[str, dict[str, Any]] = {}
    for kind in ("stt", "llm", "tts"):
        table = dict(getattr(pipeline, kind))
        cls = load_stage_class(table["stage"], kind)
        # Only stages that talk to an embedded server say which option holds its address
        # (in-process engines such as pocketsphinx have none).
        key = getattr(cls, "stack_url_option", None)
        if key:
            table.setdefault(key, urls[kind])
        tables[kind] = table
    return replace(pipeline, stt=tables["stt"], llm=tables["llm"], tts=tables["tts"])


@contextlib.contextmanager
def stack_for(pipeline: Pipeline) -> Iterator[dict[str, Any]]:
    """Bring the embedded stack up when the pipeline needs it; stop only what was started here."""
    if pipeline.stack != "local":
        yield {}
        return
    from voicelat.stack import LocalStack, StackConfig

    stack = LocalStack(StackConfig())
    t0 = time.monotonic()
    _info("embedded stack: checking / starting servers (first start assembles the models) ...")
    status = stack.up(progress=lambda p: _info(f"  {p}"))
    _info(f"embedded stack ready in {time.monotonic() - t0:.1f} s")
    for line in status.lines():
        _info(f"  {line}")
    try:
        yield {
            s.name: {"url": s.url, "version": s.version, "reused": s.name not in stack.started}
            for s in status
        }
    finally:
        if stack.started:
            _info(f"stopping the servers this run started: {', '.join(stack.started)}")
        stack.release()


def load_from_args(args: argparse.Namespace) -> Any:
    """The :class:`~voicelat.core.schedule.Load` the options ask for (``ConfigError`` when the
    open-loop options come without ``--rate``). Missing attributes mean the defaults, so
    callers that build their own Namespace (the pytest plugin) keep working."""
    from voicelat.core.schedule import Load

    rate = getattr(args, "rate", None)
    arrival = getattr(args, "arrival", None)
    seed = getattr(args, "arrival_seed", None)
    if rate is None and (arrival is not None or seed is not None):
        raise ConfigError("--arrival and --arrival-seed shape an open-loop schedule: add --rate R")
    try:
        return Load(
            concurrency=getattr(args, "concurrency", None) or 1,
            rate_per_s=rate,
            arrival=arrival or "poisson",
            seed=1 if seed is None else seed,
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def execute_run(
    args: argparse.Namespace,
    pipeline: Pipeline,
    fixtures: list[Fixture],
    out_dir: Path,
    observer: Any,
    argv: Sequence[str] = (),
) -> Any:
    """Run the plan on the current thread's new event loop; returns the runner's outcome.

    Stage options and fixture audio are validated before any server starts, so bad input
    fails in a second, not after the stack's start-up.
    """
    from voicelat.engine.runner import Runner

    load = load_from_args(args)
    plan = plan_turns(
        [f.id for f in fixtures], repeat=args.repeat, turns=args.turns, warmup=args.warmup
    )
    runner = Runner(
        with_stack_urls(pipeline), fixtures, out_dir, observer=observer, argv=list(argv)
    )
    runner.validate()
    with stack_for(pipeline) as stack_info:
        runner.stack_info = stack_info
        try:
            asyncio.run(runner.run(plan, load=load))
        except KeyboardInterrupt:
            outcome = getattr(runner, "outcome", None)
            kept = len(outcome.turns) if outcome else 0
            _info(f"interrupted: {kept} finished turn(s) kept, summary written to {out_dir}")
            raise
        return runner.outcome


def cmd_run(args: argparse.Namespace) -> int:
    pipeline, fixtures = resolve_inputs(args)
    out_dir = args.out or default_out_dir(pipeline)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise ConfigError(f"results directory {out_dir} is not empty: choose another --out")
    _info(
        f"pipeline {pipeline.name} ({pipeline.path}); {len(fixtures)} fixtures; results -> {out_dir}"
    )
    if getattr(args, "events", None):
        # The measuring child of `run --tui`: observer calls go out as JSON lines on stdout
        # (per-turn lines and the table are the TUI's job); stderr carries the human lines.
        from voicelat.tui.protocol import event_stream, recorded_argv

        with event_stream(fixtures, out_dir) as observer:
            execute_run(args, pipeline, fixtures, out_dir, observer, argv=recorded_argv(sys.argv))
        return EXIT_OK
    from voicelat.tui.live import want_tui

    if want_tui(args):
        # The run is measured in a child process: the UI cannot delay one of its timestamps.
        from voicelat.tui.live import run_with_tui

        return run_with_tui(args, pipeline, fixtures, out_dir, argv=sys.argv)
    outcome = execute_run(args, pipeline, fixtures, out_dir, PrintObserver(), argv=sys.argv)
    print()
    print(summary_table(outcome.summary, str(out_dir)))
    if outcome.summary["counts"]["headline"] == 0 and outcome.turns:
        _info("note: no warm turn to report (cold and warm-up turns are kept apart); add turns")
    return EXIT_OK
