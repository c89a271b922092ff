"""The ``voicelat`` command: the parser and the dispatch to one module per subcommand.

Exit codes: 0 success; 1 a latency budget broken or a significant regression (``ci``);
2 usage or configuration error; 3 infrastructure failure (a server down, every turn failed);
130 interrupted (finished turns are kept and the summary is written).

``voicelat run`` lives in :mod:`voicelat.cli.run`, the steps of a run in
:mod:`voicelat.engine.job`. The names other modules used to import from here are re-exported
for now (``add_run_arguments``, ``PrintObserver``, ``default_out_dir``, ``execute_run``,
``resolve_inputs``, ``stack_for``, ``with_stack_urls``, ``load_from_args``, ``_info``); new
code imports them from where they live.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any

from voicelat.cli import run as _run
from voicelat.cli.run import PrintObserver, add_run_arguments
from voicelat.core.errors import EXIT_INTERRUPTED, EXIT_USAGE, VoicelatError
from voicelat.core.version import __version__
from voicelat.engine.job import (
    default_out_dir,
    execute_run,
    info,
    load_from_args,
    resolve_inputs,
    stack_for,
    with_stack_urls,
)
from voicelat.report.text import summary_table

__all__ = [
    "PrintObserver",
    "add_run_arguments",
    "build_parser",
    "default_out_dir",
    "execute_run",
    "load_from_args",
    "main",
    "resolve_inputs",
    "stack_for",
    "with_stack_urls",
]

#: The old private name of :func:`voicelat.engine.job.info` (still imported by a few modules).
_info = info


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
    _run.add_parser(sub).set_defaults(func=cmd_run)
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


def cmd_run(args: argparse.Namespace) -> int:
    """``voicelat run`` with this module's ``execute_run`` and ``summary_table``: looked up
    when called, so a test that replaces them here replaces them in the command."""
    return _run.cmd_run(args, execute=execute_run, table=summary_table)
