"""``voicelat serve NAME... [--profile FILE] [--port P] [--seed S]``: provider emulators.

Once every emulator listens, one line per emulator goes to stdout, ``NAME BASE_URL``, so a
script can read where to point its clients::

    openai http://127.0.0.1:8401/v1
    inworld http://127.0.0.1:8402

It serves until Ctrl-C or SIGTERM, then stops cleanly (exit 0). An emulator whose default port
another process holds serves on a free port instead (said on stderr); while it serves, runs of
a pipeline naming the default address go there (``voicelat/emulate/served.py``). Startup
problems (an unknown emulator, a bad profile, a ``--port`` in use) are one line on stderr and
exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from pathlib import Path
from ssl import SSLContext
from typing import Any, TextIO

from voicelat.core.base.errors import EXIT_OK
from voicelat.emulate.profile import builtin_profiles
from voicelat.emulate.registry import emulator_class, known_emulators
from voicelat.emulate.served import register_served, unregister_served

__all__ = ["add_parser", "cmd_serve"]


def _port(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port number") from None
    if not 0 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port number (0..65535)")
    return n


def _seed(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not an integer seed") from None


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``serve``; it sets ``func`` to :func:`cmd_serve`."""
    profiles = ", ".join(builtin_profiles()) or "none"
    p: argparse.ArgumentParser = subparsers.add_parser(
        "serve",
        help="run provider emulators (OpenAI, Inworld, ...) on loopback with latency/fault profiles",
        description="Protocol-faithful provider emulators on loopback. Prints `NAME BASE_URL` "
        "per emulator once ready, then serves until Ctrl-C. See docs/EMULATORS.md.",
    )
    p.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help=f"emulators to start: {', '.join(sorted(known_emulators()))}",
    )
    p.add_argument(
        "--profile",
        metavar="FILE",
        help=f"latency/fault/content profile (TOML file, or a built-in: {profiles})",
    )
    p.add_argument(
        "--port",
        type=_port,
        default=None,
        help="port of the first emulator, the next ones on the following ports "
        "(default: each emulator's own port; 0: ephemeral ports)",
    )
    p.add_argument("--seed", type=_seed, default=None, help="seed: the same draws every run")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default loopback)")
    p.add_argument(
        "--truth",
        type=Path,
        metavar="FILE",
        help="append the ground truth of every finished request to FILE as JSON lines",
    )
    p.add_argument(
        "--tls",
        action="store_true",
        help="serve https/wss with a throwaway self-signed certificate (its path is printed): "
        "for SDKs that only speak TLS (google-genai's live client)",
    )
    p.add_argument(
        "--network",
        metavar="PROFILE|FILE",
        help="serve inside a network namespace with the kernel's netem applying this profile "
        "(root or CAP_NET_ADMIN, iproute2; docs/NETWORK.md); the emulators listen on the "
        "namespace's address",
    )
    p.add_argument("--list", action="store_true", help="list the emulators and exit")
    p.set_defaults(func=cmd_serve)
    return p


#: Exchanges `voicelat serve` keeps in memory: its ground truth grew without limit.
SERVE_TRUTH_LIMIT = 10_000


def cmd_serve(args: argparse.Namespace) -> int:
    if args.list:
        for name in sorted(known_emulators()):
            cls = emulator_class(name)
            print(f"{name:<12} port {cls.default_port:<6} {cls.title}")
        return EXIT_OK
    if not args.names:
        from voicelat.core.base.errors import ConfigError

        raise ConfigError(
            f"name the emulators to serve, e.g. `voicelat serve openai` "
            f"(known: {', '.join(sorted(known_emulators()))})"
        )
    if getattr(args, "network", None):
        return _serve_under_netem(args)
    with contextlib.ExitStack() as stack:
        ssl_context = _tls(args, stack) if args.tls else None
        try:
            return asyncio.run(_serve(args, ssl_context))
        except KeyboardInterrupt:
            # A second Ctrl-C during shutdown: still no traceback.
            return EXIT_OK


def _tls(args: argparse.Namespace, stack: contextlib.ExitStack) -> SSLContext:
    """Make the throwaway certificate (removed when serve stops) and say where it is."""
    import tempfile

    from voicelat.emulate.tls import self_signed, server_context

    directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="voicelat-tls-")))
    cert, key = self_signed(directory, args.host)
    print(
        f"tls certificate {cert} (self-signed for {args.host}, removed when serve stops; "
        f"trust it with SSL_CERT_FILE={cert} or ssl.create_default_context(cafile=...))",
        file=sys.stderr,
        flush=True,
    )
    return server_context(cert, key)


def _serve_under_netem(args: argparse.Namespace) -> int:
    """The same ``voicelat serve`` in a netem namespace (engine/netem.py)."""
    from voicelat.engine.netem import serve_in_namespace
    from voicelat.files.network import load_network

    profile = load_network(args.network)
    command = [sys.executable, "-m", "voicelat", "serve", *args.names]
    for flag, value in (("--profile", args.profile), ("--port", args.port), ("--seed", args.seed),
                        ("--truth", args.truth)):  # fmt: skip
        if value is not None:
            command += [flag, str(value)]
    return serve_in_namespace(profile, command, "--host")


async def _serve(args: argparse.Namespace, ssl_context: SSLContext | None = None) -> int:
    from voicelat.emulate.running import Emulators
    from voicelat.emulate.truth import JsonlTruthWriter

    emulators = Emulators(
        args.names,
        profile=args.profile,
        seed=args.seed,
        host=args.host,
        port=args.port,
        truth_limit=SERVE_TRUTH_LIMIT,
        ssl=ssl_context,
        # A default port another process holds is no reason to stop: take a free one and say
        # so; the runs find it (emulate/served.py). An asked-for --port still fails when busy.
        free_if_busy=args.port is None,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    truth_file: TextIO | None = None
    try:
        if args.truth is not None:
            try:
                truth_file = args.truth.open("a", encoding="utf-8")
            except OSError as exc:
                from voicelat.core.base.errors import ConfigError

                raise ConfigError(
                    f"cannot write the truth file {args.truth}: {exc.strerror}"
                ) from None
            emulators.truth.on_close(JsonlTruthWriter(truth_file))
        async with emulators:
            # Recorded before the lines are printed: a script that read them can start a run.
            at = [f"{args.host}:{s.port}" for s in emulators.servers.values()]
            record = register_served(at, _moves(emulators, args.host))
            for name, url in emulators.urls.items():
                print(f"{name} {url}", flush=True)
            seed = emulators.profile.seed
            print(
                f"serving {len(emulators.servers)} emulator(s) "
                f"(profile: {emulators.profile.source}; seed: {seed if seed is not None else 'random'})"
                "; Ctrl-C to stop",
                file=sys.stderr,
                flush=True,
            )
            try:
                await stop.wait()
            finally:
                unregister_served(record)
        print("stopped", file=sys.stderr, flush=True)
        return EXIT_OK
    finally:
        if truth_file is not None:
            truth_file.close()


def _moves(emulators: Any, host: str) -> dict[str, str]:
    """Each emulator's default address -> the one it serves on instead, when another process
    held its default port (the emulated pipelines name the defaults)."""
    moves: dict[str, str] = {}
    for name, server in emulators.servers.items():
        if server.busy_port is None:
            continue
        print(
            f"{name}: port {server.busy_port} is in use by another process: serving on "
            f"{host}:{server.port} instead (voicelat run points stages naming "
            f"{host}:{server.busy_port} there while this serve runs)",
            file=sys.stderr,
            flush=True,
        )
        moves[f"{host}:{server.busy_port}"] = f"{host}:{server.port}"
    return moves
