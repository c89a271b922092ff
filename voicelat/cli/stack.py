"""``voicelat stack up|down|status``: the embedded stack from the command line.

The main CLI registers these with :func:`add_parser` and calls ``args.func(args)``; each
command returns its exit code. Progress goes to stderr, one line per server to stdout::

    stt  tcp://127.0.0.1:10300  pid 123  ready  wyoming-faster-whisper 3.8.1
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from voicelat.cli.args import positive_seconds
from voicelat.core.base.errors import EXIT_INFRA, EXIT_INTERRUPTED, EXIT_OK, VoicelatError
from voicelat.stack.config import ENV_CACHE, ENV_STATE_DIR, PORT_ENV, StackConfig, StackProgress
from voicelat.stack.manager import LocalStack

if TYPE_CHECKING:
    _SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    _SubParsers = Any

__all__ = [
    "add_parser",
    "add_stack_options",
    "cmd_down",
    "cmd_status",
    "cmd_up",
    "config_from_args",
]


def add_stack_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--cache-dir``, ``--state-dir`` and the three port options to ``parser``.

    Reusable by other commands that start the stack, so that they and ``voicelat stack``
    agree on where it is. Every option defaults to None: the environment, then the
    built-in default, decide (see :class:`StackConfig`).
    """
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help=f"models and state of the embedded stack (env {ENV_CACHE}; default ~/.cache/voicelat)",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help=f"state file, lock and server logs (env {ENV_STATE_DIR}; default CACHE_DIR/state)",
    )
    for name, default in (("stt", 10300), ("tts", 10200), ("llm", 8080)):
        parser.add_argument(
            f"--{name}-port",
            type=int,
            default=None,
            metavar="PORT",
            help=f"{name} server port (env {PORT_ENV[name]}; default {default})",
        )


def config_from_args(args: argparse.Namespace) -> StackConfig:
    """A :class:`StackConfig` from parsed options; options left unset keep their defaults."""
    overrides: dict[str, Any] = {}
    for option in ("cache_dir", "state_dir", "stt_port", "tts_port", "llm_port"):
        value = getattr(args, option, None)
        if value is not None:
            overrides[option] = value
    timeout = getattr(args, "timeout", None)
    if timeout is not None:
        overrides["startup_timeout_s"] = float(timeout)
    return StackConfig(**overrides)


def add_parser(subparsers: _SubParsers) -> argparse.ArgumentParser:
    """Register ``stack`` with ``up``, ``down`` and ``status``; each sets ``func``."""
    stack = subparsers.add_parser(
        "stack",
        help="start, stop or inspect the embedded local STT/LLM/TTS stack",
        description="The embedded local stack: wyoming-faster-whisper (STT), llama_cpp.server "
        "(LLM) and wyoming-piper (TTS) on loopback, offline. Needs voicelat[local].",
    )
    commands = stack.add_subparsers(dest="stack_command", metavar="{up,down,status}")
    commands.required = True

    up = commands.add_parser(
        "up",
        help="start the servers in the background (or reuse running ones) and warm them up",
    )
    add_stack_options(up)
    up.add_argument(
        "--timeout",
        type=positive_seconds,
        default=None,
        metavar="SEC",
        help="seconds each server may take to become ready (default 120)",
    )
    up.set_defaults(func=cmd_up)

    down = commands.add_parser("down", help="stop the servers started by `voicelat stack up`")
    add_stack_options(down)
    down.set_defaults(func=cmd_down)

    status = commands.add_parser(
        "status", help="show each server; exit status 0 only if all three are ready"
    )
    add_stack_options(status)
    status.set_defaults(func=cmd_status)
    return stack


def print_progress(event: StackProgress) -> None:
    """One progress line of a background start on stderr (`stack up`, `agent up`)."""
    print(f"  {event}", file=sys.stderr, flush=True)


def print_error(exc: BaseException) -> None:
    """The one-line error of a `stack` or `agent` command on stderr."""
    print(f"voicelat: error: {exc}", file=sys.stderr, flush=True)


def cmd_up(args: argparse.Namespace) -> int:
    """Start the stack detached (it outlives this command); print one line per server."""
    try:
        config = config_from_args(args)
        stack = LocalStack(config)
        t0 = time.monotonic()
        print("embedded stack: starting or reusing servers ...", file=sys.stderr, flush=True)
        status = stack.up(progress=print_progress, detach=True)
    except VoicelatError as exc:
        print_error(exc)
        return exc.exit_code
    except KeyboardInterrupt:
        # up() already stopped whatever it had started.
        print("voicelat: interrupted; no server was left running", file=sys.stderr)
        return EXIT_INTERRUPTED
    for line in status.lines():
        print(line, flush=True)
    print(
        f"stack ready in {time.monotonic() - t0:.1f} s; logs in {config.log_dir}; "
        "stop it with `voicelat stack down`",
        file=sys.stderr,
        flush=True,
    )
    return EXIT_OK


def cmd_down(args: argparse.Namespace) -> int:
    """Stop every recorded server of the stack; succeeds when nothing was running."""
    try:
        stopped = LocalStack(config_from_args(args)).down(progress=print_progress)
    except VoicelatError as exc:
        print_error(exc)
        return exc.exit_code
    for server in stopped:
        print(f"{server.name}  {server.url}  pid {server.pid}  stopped", flush=True)
    if not stopped:
        print("no stack server was running", file=sys.stderr, flush=True)
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    """Print one line per server; exit 0 if all are ready, 3 (infrastructure) otherwise."""
    try:
        status = LocalStack(config_from_args(args)).status()
    except VoicelatError as exc:
        print_error(exc)
        return exc.exit_code
    for line in status.lines():
        print(line, flush=True)
    return EXIT_OK if status.healthy else EXIT_INFRA
