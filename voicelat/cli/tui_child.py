"""The measuring child of ``voicelat run --tui`` as a command line, and whether the TUI opens.

``run --tui`` measures in a child process (``voicelat.tui.live`` explains why); the child gets
the same run options as words. They are rebuilt here, in the command line, from the parser's
own declarations: the TUI below it never sees an ``argparse.Namespace``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from voicelat.tui.protocol import EVENTS_FORMAT

__all__ = ["NOT_FORWARDED", "child_command", "forwarded_options", "want_tui"]

#: Run options that are the TUI's business, not the child's (``--out`` is always passed).
NOT_FORWARDED = frozenset({"tui", "events", "out", "help"})


def want_tui(args: argparse.Namespace, stdout_isatty: bool | None = None) -> bool:
    """``--tui`` / ``--no-tui`` win; otherwise the TUI opens when stdout is a terminal."""
    forced = getattr(args, "tui", None)
    if forced is not None:
        return bool(forced)
    return sys.stdout.isatty() if stdout_isatty is None else stdout_isatty


def forwarded_options(
    args: argparse.Namespace, add_arguments: Callable[[argparse.ArgumentParser], None]
) -> list[str]:
    """The ``run`` options in ``args`` that differ from their defaults, as command-line words.

    Rebuilt from the same ``add_arguments`` the parser used (``voicelat.cli.run.
    add_run_arguments``: handed in, since the command line sits above the TUI), so an option
    added there is forwarded to the child without touching this function (a test round-trips
    every option).
    """
    probe = argparse.ArgumentParser(add_help=False)
    add_arguments(probe)
    words: list[str] = []
    for action in probe._actions:
        if not action.option_strings or action.dest in NOT_FORWARDED:
            continue
        value = getattr(args, action.dest, action.default)
        if value is None or value == action.default:
            continue
        opt = next(
            (o for o in action.option_strings if o.startswith("--")), action.option_strings[0]
        )
        if isinstance(action, argparse.BooleanOptionalAction):
            words.append(opt if value else f"--no-{opt[2:]}")
        elif action.nargs == 0:  # store_true / store_false / store_const
            words.append(opt)
        elif isinstance(value, list | tuple):
            words.extend(f"{opt}={v}" for v in value)
        else:
            # `--opt=value`, so a value that starts with "-" is not taken for an option.
            words.append(f"{opt}={value}")
    return words


def child_command(
    args: argparse.Namespace,
    out_dir: Path,
    add_arguments: Callable[[argparse.ArgumentParser], None],
) -> list[str]:
    """The measuring child: the same interpreter and options, events on stdout, no TUI
    (``add_arguments`` declares the run options: see :func:`forwarded_options`)."""
    return [
        sys.executable,
        "-m",
        "voicelat",
        "run",
        "--no-tui",
        "--events",
        EVENTS_FORMAT,
        *forwarded_options(args, add_arguments),
        f"--out={out_dir}",
    ]
