"""``voicelat watch --out DIR``: an OTLP/HTTP receiver production agents export to.

Traced turns as they finish (:mod:`voicelat.engine.watch`; the same turns as ``voicelat
import``, docs/PRODUCTION.md): a status line every ``--every`` seconds with the rolling
window's percentiles, a results directory per period under ``DIR`` (``view``, ``ci`` and
``compare`` read each), Prometheus ``/metrics`` with a run's histograms (``--metrics-port``).
The first stdout line is ``watching URL``: what the agents' OTLP trace exporter points at.

Signals: SIGHUP reopens (the current period is written now, a new one starts); SIGTERM or
Ctrl-C writes the last period and stops (exit 143 / 130). Exit 2: bad options; 3: the port
cannot be bound or the results cannot be written.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from types import FrameType
from typing import Any

from voicelat.cli.import_ import _hangover
from voicelat.core.base.display import fmt_ms
from voicelat.core.base.errors import EXIT_OK
from voicelat.core.traces.agent_trace import MAPPINGS

__all__ = ["add_parser", "cmd_watch"]


def _positive(value: str) -> float:
    try:
        n = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not n > 0:
        raise argparse.ArgumentTypeError(f"{value} must be more than 0")
    return n


def _count(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a positive whole number")
    return int(value)


def _port(value: str) -> int:
    if not value.isdigit() or int(value) > 65535:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port number (0..65535)")
    return int(value)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``watch`` on the ``voicelat`` command's subparsers."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "watch",
        help="receive production agents' OTLP traces: rolling percentiles, periodic results",
        description=(
            "An OTLP/HTTP trace receiver that production agents export to. Each finished turn "
            "becomes a traced turn (as `voicelat import` makes them); a status line every "
            "--every seconds with the rolling window's percentiles, a results directory per "
            "period under --out, Prometheus /metrics with --metrics-port. SIGHUP starts a new "
            "period, SIGTERM writes the last one and stops. See docs/PRODUCTION.md."
        ),
    )
    p.add_argument("--out", "-o", required=True, type=_path, help="directory of the periods")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default loopback)")
    p.add_argument("--port", type=_port, default=4318, help="OTLP/HTTP port (default 4318)")
    p.add_argument("--mapping", choices=MAPPINGS, default="pipecat", help="default pipecat")
    p.add_argument(
        "--window", type=_positive, default=300.0, help="rolling window, seconds (default 300)"
    )
    p.add_argument(
        "--every", type=_positive, default=60.0, help="seconds per status line and period"
    )
    p.add_argument(
        "--settle",
        type=_positive,
        default=5.0,
        help="take a turn this long after its container arrived even if its ancestors have "
        "not (Pipecat's conversation span ends with the call; default 5)",
    )
    p.add_argument(
        "--hangover-ms",
        type=_hangover,
        default=None,
        metavar="MS",
        help="the agents' VAD hangover (Pipecat: VADParams.stop_secs) where a trace does not "
        "state it (voicelat.vad_stop_secs): it goes into endpointing",
    )
    p.add_argument(
        "--max-spans", type=_count, default=200_000, help="spans kept at most (drops counted)"
    )
    p.add_argument("--metrics-port", type=_port, default=None, help="serve Prometheus /metrics")
    p.set_defaults(func=cmd_watch)
    return p


def _path(value: str) -> Any:
    from pathlib import Path

    return Path(value)


class _Reopen:
    """SIGHUP: a flag the loop reads (the handler does no I/O)."""

    def __init__(self) -> None:
        self.asked = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.asked = True


def cmd_watch(args: argparse.Namespace) -> int:
    """Run ``voicelat watch`` until a stop signal."""
    from voicelat.cli.import_ import otlp_module

    otlp_module()  # opentelemetry-proto missing: one line, before anything binds
    from voicelat.engine.watch import Watcher, WatchReceiver
    from voicelat.export.base import ExportOptions
    from voicelat.export.registry import build_exporters

    if args.out.exists() and not args.out.is_dir():
        from voicelat.core.base.errors import ConfigError

        raise ConfigError(f"--out {args.out} is a file, not a directory: choose another --out")
    pipeline = {"name": f"traced-{args.mapping}", "kind": "traced", "mapping": args.mapping}
    exporters = build_exporters(
        ExportOptions(pipeline=pipeline, metrics_port=args.metrics_port, env={})
    )
    receiver = WatchReceiver(args.host, args.port, mapping=args.mapping, max_spans=args.max_spans)
    watcher = Watcher(
        receiver,
        args.out,
        window_s=args.window,
        settle_s=args.settle,
        exporters=exporters,
        hangover_ns=args.hangover_ms,
    )
    reopen = _Reopen()
    previous = signal.signal(signal.SIGHUP, reopen)
    try:
        receiver.start()
        metrics = next((getattr(e, "port", None) for e in exporters), None)
        print(f"watching {receiver.url}", flush=True)
        if metrics is not None:
            print(f"metrics http://{args.host}:{metrics}/metrics", flush=True)
        _loop(watcher, reopen, args.every)
    finally:
        signal.signal(signal.SIGHUP, previous)
        receiver.stop()
        watcher.tick(time.monotonic() + args.settle)  # what arrived is taken, settled or not
        _report(watcher, watcher.flush("final"))
        summary = watcher.window_summary()
        for exporter in exporters:
            exporter.close(summary)
    return EXIT_OK


def _loop(watcher: Any, reopen: _Reopen, every: float) -> None:
    next_period = time.monotonic() + every
    while True:
        time.sleep(0.1)
        watcher.tick()
        if reopen.asked:
            reopen.asked = False
            _report(watcher, watcher.flush("reopen"))
            next_period = time.monotonic() + every
        elif time.monotonic() >= next_period:
            _report(watcher, watcher.flush("period"))
            next_period += every


def _report(watcher: Any, path: Any) -> None:
    s = watcher.window_summary()
    c = watcher.counters()
    print(
        f"window {watcher.window_s:g} s: {s.e2e.n} turn(s), e2e P50 {fmt_ms(s.e2e.p50)} ms "
        f"P90 {fmt_ms(s.e2e.p90)} ms; {c['turns']} turn(s) in all, dropped "
        f"{c['spans_dropped']} span(s) / {c['turns_dropped'] + c['window_turns_dropped']} "
        f"turn(s); " + (f"wrote {path}" if path is not None else "no new turn"),
        flush=True,
        file=sys.stdout,
    )
