"""The options of ``voicelat live``, declared once: the command adds them and ``live --tui``
rebuilds them to forward the set ones to its measuring child (``cli/live_tui.py``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from voicelat.cli.args import device_latency, non_negative_int

__all__ = ["add_live_arguments"]


def _positive(value: str) -> int:
    # Not positive_int: a negative count is "cannot be negative" here, as it always said.
    n = non_negative_int(value)
    if n < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return n


def add_live_arguments(live: argparse.ArgumentParser) -> None:
    """The options of ``voicelat live`` (also rebuilt to forward them to the TUI's child)."""
    live.add_argument(
        "--pipeline", "-p", type=Path, help="pipeline TOML file (default: the embedded local stack)"
    )
    live.add_argument(
        "--input-device",
        metavar="D",
        help="microphone: index or part of the name (see `voicelat devices`; default: the default)",
    )
    live.add_argument(
        "--output-device",
        metavar="D",
        help="speaker: index or part of the name (see `voicelat devices`; default: the default)",
    )
    live.add_argument(
        "--input-rate",
        type=_positive,
        metavar="HZ",
        help="capture rate (default: the input device's default rate; resampled for STT)",
    )
    live.add_argument(
        "--latency",
        type=device_latency,
        default="low",
        metavar="low|high|SEC",
        help="PortAudio latency asked of both devices (default low; what they grant is recorded)",
    )
    live.add_argument(
        "--tui",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show the live terminal UI (default: when stdout is a terminal)",
    )
    live.add_argument(
        "--ptt",
        action="store_true",
        help="push-to-talk instead of the VAD: space (Enter without the TUI) starts talking, "
        "the next press ends the turn",
    )
    live.add_argument(
        "--no-barge-in",
        dest="barge_in",
        action="store_false",
        help="speech during a reply does not interrupt it (for a speaker without echo "
        "cancellation: the microphone would hear the reply)",
    )
    live.add_argument(
        "--record",
        action="store_true",
        help="save every turn's input (RUN_DIR/recorded, with a fixtures manifest for "
        "`voicelat run --fixtures`) and reply audio (RUN_DIR/audio)",
    )
    live.add_argument(
        "--warmup",
        "-w",
        type=non_negative_int,
        default=1,
        help="first turns that warm the servers up, kept apart from the headline (default 1)",
    )
    live.add_argument(
        "--turns", "-n", type=_positive, help="stop after this many finished turns (default: q)"
    )
    live.add_argument(
        "--out", "-o", type=Path, help="results directory (default: runs/<time>-<pipeline>-live)"
    )
    # Internal: `live --tui` measures in a child process with this flag (voicelat.tui.protocol).
    live.add_argument("--events", choices=("jsonl",), default=None, help=argparse.SUPPRESS)
