"""``voicelat agent up|down|status``: the example Pipecat bot (or, ``--bot livekit``, the
example LiveKit agent) from the command line.

``up`` starts the embedded stack (for its LLM) if it is not running, then the bot, in the
background; progress goes to stderr, the bot and its three transport URLs to stdout::

    agent  http://127.0.0.1:7860  pid 123  ready
    twilio      ws://127.0.0.1:7860/ws
    pipecat-ws  ws://127.0.0.1:7860/ws-client
    webrtc      http://127.0.0.1:7860/api/offer
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from voicelat.cli.args import positive_seconds
from voicelat.cli.stack import add_stack_options, config_from_args, print_error, print_progress
from voicelat.core.base.errors import EXIT_INFRA, EXIT_INTERRUPTED, EXIT_OK, VoicelatError
from voicelat.stack.agent import (
    BOTS,
    DEFAULT_OPENAI_URL,
    DEFAULT_OTLP_ENDPOINT,
    ENV_AGENT_OTLP,
    ENV_AGENT_PORT,
    LIVEKIT_PORT,
    TRANSPORTS,
    AgentConfig,
    PipecatBot,
)

if TYPE_CHECKING:
    _SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    _SubParsers = Any

__all__ = ["add_parser", "agent_config_from_args", "cmd_down", "cmd_status", "cmd_up"]

_T = TypeVar("_T")


def _add_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``up``; ``down`` and ``status`` take them too (and ignore the rest), so
    the same flags can be repeated for all three."""
    add_stack_options(parser)
    parser.add_argument(
        "--bot",
        choices=BOTS,
        default="pipecat",
        help="which example: the Pipecat bot (default; the stack's models) or the LiveKit agent "
        "(an AgentSession with no LiveKit server, on an OpenAI-compatible server: --openai-url)",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=None,
        help=f"the bot's port, shared by its three transports (env {ENV_AGENT_PORT}; default "
        f"7860, the LiveKit agent {LIVEKIT_PORT})",
    )
    parser.add_argument(
        "--openai-url",
        default=DEFAULT_OPENAI_URL,
        metavar="URL",
        help=f"--bot livekit: its STT, LLM and TTS server (default {DEFAULT_OPENAI_URL}: "
        "`voicelat serve openai`)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="the bot's address (default 127.0.0.1)")
    parser.add_argument(
        "--transport",
        default=",".join(TRANSPORTS),
        help=f"comma-separated subset of {','.join(TRANSPORTS)} (default: all three)",
    )
    parser.add_argument(
        "--otlp-endpoint",
        default=None,
        metavar="URL",
        help=f"where the bot exports its OpenTelemetry spans (env {ENV_AGENT_OTLP}; "
        f"default {DEFAULT_OTLP_ENDPOINT}, voicelat's trace receiver)",
    )
    parser.add_argument("--no-traces", action="store_true", help="the bot exports no spans")
    parser.add_argument(
        "--greeting",
        default=None,
        metavar="TEXT",
        help="the bot says TEXT first on every call (a scenario's expect_greeting step times it)",
    )
    parser.add_argument(
        "--no-stack",
        action="store_true",
        help="do not start the embedded stack: its LLM must already be running",
    )
    parser.add_argument(
        "--timeout",
        type=positive_seconds,
        default=None,
        metavar="SEC",
        help="seconds the bot (and each stack server) may take to become ready (default 120)",
    )


def agent_config_from_args(args: argparse.Namespace) -> AgentConfig:
    """An :class:`AgentConfig` from parsed options; unset options keep their defaults."""
    overrides: dict[str, Any] = {"stack": config_from_args(args), "host": args.host}
    bot = getattr(args, "bot", "pipecat")
    if bot == "livekit":
        overrides["bot"] = bot
        overrides["openai_url"] = args.openai_url
        if args.port is None and not os.environ.get(ENV_AGENT_PORT, "").strip():
            overrides["port"] = LIVEKIT_PORT
    if args.port is not None:
        overrides["port"] = args.port
    transport = getattr(args, "transport", None)
    if transport is not None:
        overrides["transports"] = tuple(t.strip() for t in transport.split(",") if t.strip())
    if getattr(args, "no_traces", False):
        overrides["otlp_endpoint"] = None
    elif getattr(args, "otlp_endpoint", None):
        overrides["otlp_endpoint"] = args.otlp_endpoint
    if getattr(args, "no_stack", False):
        overrides["start_stack"] = False
    if getattr(args, "timeout", None) is not None:
        overrides["startup_timeout_s"] = float(args.timeout)
    if getattr(args, "greeting", None):
        overrides["bot_args"] = ("--greeting", args.greeting)
    return AgentConfig(**overrides)


def add_parser(subparsers: _SubParsers) -> argparse.ArgumentParser:
    """Register ``agent`` with ``up``, ``down`` and ``status``; each sets ``func``."""
    agent = subparsers.add_parser(
        "agent",
        help="start, stop or inspect the example Pipecat bot or LiveKit agent (real agents to "
        "profile)",
        description="The example Pipecat bot (Whisper tiny.en, gemma on the stack's llama.cpp "
        "server, piper joe, Silero VAD) on twilio, pipecat-ws and webrtc transports, tracing "
        "to voicelat's OTLP receiver; needs voicelat[agents] and voicelat[local]. With --bot "
        "livekit, the example LiveKit agent (an AgentSession with no LiveKit server, Silero VAD, "
        "LiveKit's OpenAI plugins on --openai-url) behind the livekit bridge; needs "
        "voicelat[livekit].",
    )
    commands = agent.add_subparsers(dest="agent_command", metavar="{up,down,status}")
    commands.required = True
    up = commands.add_parser("up", help="start the stack's LLM and the bot in the background")
    _add_options(up)
    up.set_defaults(func=cmd_up)
    down = commands.add_parser("down", help="stop the bot started by `voicelat agent up`")
    _add_options(down)
    down.set_defaults(func=cmd_down)
    status = commands.add_parser("status", help="show the bot; exit status 0 only if it is ready")
    _add_options(status)
    status.set_defaults(func=cmd_status)
    return agent


def cmd_up(args: argparse.Namespace) -> int:
    """Start the bot detached (it outlives this command); print it and its transport URLs."""
    try:
        config = agent_config_from_args(args)
        t0 = time.monotonic()
        what = (
            "example LiveKit agent: starting the agent ..."
            if config.bot == "livekit"
            else "example Pipecat bot: starting the stack and the bot ..."
        )
        print(what, file=sys.stderr, flush=True)
        status = PipecatBot(config).up(progress=print_progress, detach=True)
    except VoicelatError as exc:
        print_error(exc)
        return exc.exit_code
    except KeyboardInterrupt:
        print("voicelat: interrupted; nothing was left running", file=sys.stderr)
        return EXIT_INTERRUPTED
    for line in status.lines():
        print(line, flush=True)
    traces = status.otlp_endpoint or "off"
    print(
        f"bot ready in {time.monotonic() - t0:.1f} s; traces to {traces}; log {status.log_path}; "
        "stop it with `voicelat agent down`",
        file=sys.stderr,
        flush=True,
    )
    return EXIT_OK


def _with_bot(args: argparse.Namespace, action: Callable[[PipecatBot], _T]) -> _T | int:
    """``action`` on the configured bot, or the exit code of its one-line error."""
    try:
        return action(PipecatBot(agent_config_from_args(args)))
    except VoicelatError as exc:
        print_error(exc)
        return exc.exit_code


def cmd_down(args: argparse.Namespace) -> int:
    """Stop the recorded bot; succeeds when nothing was running."""
    stopped = _with_bot(args, lambda bot: bot.down(progress=print_progress))
    if isinstance(stopped, int):
        return stopped
    if stopped is None:
        print("the example bot was not running", file=sys.stderr, flush=True)
    else:
        print(f"agent  {stopped.base_url}  pid {stopped.pid}  stopped", flush=True)
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    """Print the bot and its URLs; exit 0 if it is ready, 3 (infrastructure) otherwise."""
    status = _with_bot(args, PipecatBot.status)
    if isinstance(status, int):
        return status
    for line in status.lines():
        print(line, flush=True)
    if not status.running:
        # The lines above say "stopped"; this says so to a person (and to a script that only
        # keeps stderr): nothing is running, and how to start it.
        why = f" ({status.detail})" if status.detail else ""
        print(
            f"voicelat: the example bot is not running{why}: start it with `voicelat agent up`",
            file=sys.stderr,
            flush=True,
        )
    return EXIT_OK if status.healthy else EXIT_INFRA
