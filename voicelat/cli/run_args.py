"""The options of a measuring run, declared once: ``voicelat run`` and ``voicelat ci`` add them
(``add_run_arguments``), ``cli/request.py`` turns them into a ``RunRequest`` and
``cli/tui_child.py`` forwards them to ``run --tui``'s measuring child."""

from __future__ import annotations

import argparse
from pathlib import Path

from voicelat.cli.args import (
    add_region_argument,
    bounded_seconds,
    non_negative_int,
    positive_int,
    ray_address,
    worker_count,
)

__all__ = ["MAX_LINGER_S", "add_run_arguments"]


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
    add_region_argument(p)
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
