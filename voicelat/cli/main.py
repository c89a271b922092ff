"""The ``voicelat`` command: the parser and the dispatch to one module per subcommand.

Exit codes: 0 success; 1 a latency budget broken or a significant regression (``ci``);
2 usage or configuration error; 3 infrastructure failure (a server down, every turn failed);
128 + N stopped by signal N: 130 SIGINT (Ctrl-C), 143 SIGTERM, 129 SIGHUP (finished turns are
kept and the summary is written; see cli/signals.py).

``voicelat run`` lives in :mod:`voicelat.cli.run`, the steps of a run (stack, runner, event
loop) in :mod:`voicelat.engine.job`.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from collections.abc import Sequence
from typing import Any

from voicelat.cli import run as _run
from voicelat.cli import signals as _signals
from voicelat.cli.helptext import polish
from voicelat.cli.version import VersionAction
from voicelat.core.base.errors import EXIT_INTERRUPTED, EXIT_USAGE, VoicelatError, only_interrupts

__all__ = ["build_parser", "main"]


def _err(msg: str) -> None:
    print(f"voicelat: error: {msg}", file=sys.stderr, flush=True)


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line plus a hint, exit code 2."""

    def error(self, message: str) -> Any:
        _err(f"{message} (see {self.prog} --help)")
        raise SystemExit(EXIT_USAGE)


#: Modules that register a subcommand with ``add_parser(subparsers)``.
_SUBCOMMANDS = (
    "voicelat.cli.stack",
    "voicelat.cli.agent",
    "voicelat.cli.live",
    "voicelat.cli.devices",
    "voicelat.cli.ci",
    "voicelat.cli.compare",
    "voicelat.cli.view",
    "voicelat.cli.import_",
    "voicelat.cli.watch",
    "voicelat.cli.serve",
    "voicelat.cli.endpointing",
    "voicelat.cli.whatif",
    "voicelat.cli.fixtures",
    "voicelat.cli.completion",
    "voicelat.cli.score",
)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="voicelat",
        description="Latency profiler for realtime voice pipelines. Without a command: "
        "`voicelat run`. `voicelat COMMAND --help` shows a command's options and examples.",
    )
    parser.add_argument("--version", action=VersionAction)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    _run.add_parser(sub).set_defaults(func=_run.cmd_run)
    for module in _SUBCOMMANDS:
        # Imported on demand: `voicelat run` should not pay for textual or the emulators.
        importlib.import_module(module).add_parser(sub)
    polish(parser)  # descriptions, examples and metavars, from one table (cli/helptext.py)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The ``voicelat`` command; returns its exit status."""
    _signals.install()
    # A reader that leaves (`voicelat run | head -1`) ends the printing, never the command.
    with _signals.output_readers_may_leave():
        try:
            return _dispatch(argv)
        except BaseException as exc:
            # A Ctrl-C (or a stop signal taking its path) may come wrapped in an exception
            # group when it lands inside a library's task group: the same interruption either
            # way. Caught around the parser too: a stop signal while its modules load (a
            # second or two on a loaded machine) used to escape (exit 130 for a SIGTERM).
            if not only_interrupts(exc):
                raise
            return _interrupted()


def _interrupted() -> int:
    """The one line and the exit status (128 + the signal) of an interrupted command."""
    sig = _signals.received()
    _err("interrupted" if sig is None else f"interrupted by {signal.Signals(sig).name}")
    return _signals.exit_status(EXIT_INTERRUPTED)


def _dispatch(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        if args.command is None:
            args = parser.parse_args(["run", *(argv or [])])
        else:
            parser.print_help()
            return EXIT_USAGE
    try:
        code = int(args.func(args))
    except VoicelatError as exc:
        _err(str(exc))
        code = exc.exit_code
    # One signal policy (cli/signals.py): a command stopped by SIGTERM exits 143, not 130.
    return _signals.exit_status(code) if code == EXIT_INTERRUPTED else code
