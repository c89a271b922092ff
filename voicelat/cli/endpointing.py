"""``voicelat endpointing``: the endpointing trade-off on annotated fixtures, offline.

Replays the fixtures (default: the bundled pause set) through the energy VAD, Silero and the
WebRTC VAD over a grid of thresholds and hangovers, at the live 20 ms frame timing but without
servers or real-time pacing, and writes ``endpointing.md``, ``endpointing.json`` and
``endpointing.html`` (the curve as SVG). Prints the table and the setting that meets the budget.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from voicelat.audio.endpointers import SPECS
from voicelat.audio.endpointers_replay import (
    Grid,
    audio_seconds,
    estimate_seconds,
    replay,
    truth_of,
)
from voicelat.cli.args import non_negative_float, positive_int
from voicelat.core.errors import EXIT_OK, ConfigError
from voicelat.files.fixtures import default_fixtures_dir, load_fixtures
from voicelat.report.endpointing import TradeOff, curve_text, document, html, markdown


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``endpointing`` on the ``voicelat`` command's subparsers."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "endpointing",
        help="the endpointing trade-off (latency vs cut-offs) on annotated fixtures, offline",
        description=(
            "Replay annotated fixtures through endpointers (energy VAD, Silero, WebRTC VAD) over "
            "a grid of thresholds and hangovers; report P50/P90 latency after the true speech "
            "end, false cut-off rate (an endpoint before the end, e.g. inside a pause), missed "
            "endpoints, the Pareto front and the fastest setting within a cut-off budget."
        ),
    )
    p.add_argument("--fixtures", type=Path, help="annotated fixtures (default: the pause set)")
    p.add_argument(
        "--endpointers",
        default=",".join(SPECS),
        help=f"comma-separated, from {', '.join(SPECS)} (default: all)",
    )
    p.add_argument(
        "--hangovers",
        default=",".join(str(h) for h in Grid().hangovers_ms),
        help="comma-separated hangovers in ms",
    )
    p.add_argument(
        "--threshold",
        action="append",
        default=[],
        metavar="NAME=V1,V2",
        help="thresholds for one endpointer (energy dBFS, silero probability, webrtc mode 0-3)",
    )
    p.add_argument("--min-speech-ms", type=positive_int, default=100)
    p.add_argument(
        "--budget",
        type=non_negative_float,
        default=10.0,
        help="largest acceptable false cut-off rate, in %% of fixtures (default 10)",
    )
    p.add_argument("--out", type=Path, help="output directory (default runs/<time>-endpointing)")
    p.add_argument(
        "--max-seconds",
        type=non_negative_float,
        default=300.0,
        help="refuse a grid estimated to take longer than this (default 300)",
    )
    p.add_argument(
        "--tui",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show the trade-off in the terminal UI at the end (default: when stdout is a terminal)",
    )
    p.set_defaults(func=cmd_endpointing)
    return p


def _ints(text: str, what: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise ConfigError(f"{what} must be comma-separated integers (ms), not {text!r}") from None
    if not values or any(v < 0 or v > 5000 for v in values):
        raise ConfigError(f"{what} must be 0..5000 ms each, e.g. 200,300,500")
    return values


def grid_from(args: argparse.Namespace) -> Grid:
    """The grid the flags describe; a bad name or number is one ``ConfigError`` line."""
    names = tuple(n.strip() for n in str(args.endpointers).split(",") if n.strip())
    unknown = [n for n in names if n not in SPECS]
    if unknown or not names:
        raise ConfigError(f"unknown endpointer {unknown or names}: choose from {', '.join(SPECS)}")
    thresholds: dict[str, tuple[float, ...]] = {}
    for item in args.threshold:
        name, _, values = str(item).partition("=")
        if name not in SPECS:
            raise ConfigError(f"--threshold {item!r}: give NAME=V1,V2 with NAME in {list(SPECS)}")
        try:
            thresholds[name] = tuple(float(v) for v in values.split(",") if v.strip())
        except ValueError:
            raise ConfigError(f"--threshold {item!r}: the values must be numbers") from None
    return Grid(
        endpointers=names,
        hangovers_ms=_ints(str(args.hangovers), "--hangovers"),
        thresholds=thresholds,
        min_speech_ms=int(args.min_speech_ms),
    )


class _Bar:
    """A progress bar on stderr when it is a terminal (the grid can take a while)."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()

    def __call__(self, done: int, total: int, what: str) -> None:
        if self.tty:
            filled = int(30 * done / max(total, 1))
            sys.stderr.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {done}/{total} {what:<30}")
            if done == total:
                sys.stderr.write("\n")
            sys.stderr.flush()


def cmd_endpointing(args: argparse.Namespace) -> int:
    """Run the grid, print the table, write the reports."""
    directory = args.fixtures or default_fixtures_dir() / "pauses"
    fixtures = load_fixtures(directory)
    for f in fixtures:
        truth_of(f)  # every fixture must be annotated: say so before any work
    grid = grid_from(args)
    audio_s = audio_seconds(fixtures)
    estimate = estimate_seconds(grid, audio_s)
    n_configs = len(grid.configs())
    print(
        f"{len(fixtures)} fixtures ({audio_s:.1f} s of audio) x {n_configs} configurations: "
        f"about {estimate:.0f} s",
        file=sys.stderr,
    )
    if estimate > args.max_seconds:
        raise ConfigError(
            f"this grid would take about {estimate:.0f} s (> --max-seconds {args.max_seconds:g}): "
            "use fewer endpointers, thresholds or fixtures, or raise --max-seconds"
        )
    if not any(f.pauses for f in fixtures):
        print(
            f"note: no fixture in {directory} has annotated pauses (controls only): a cut-off "
            "is still any endpoint before the speech end, none can be placed in a pause",
            file=sys.stderr,
        )
    out = replay(fixtures, grid, progress=_Bar())
    trade = TradeOff(
        tuple(out.scores),
        args.budget / 100,
        out.fixtures,
        out.with_pauses,
        out.pauses,
        out.audio_s,
        out.wall_s,
    )
    text = markdown(trade)
    print(text, end="")
    out_dir = args.out or Path("runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-endpointing"
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "endpointing.md").write_text(text, encoding="utf-8")
        (out_dir / "endpointing.json").write_text(
            json.dumps(document(trade), indent=1) + "\n", encoding="utf-8"
        )
        (out_dir / "endpointing.html").write_text(html(trade), encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot write the reports to {out_dir}: {exc.strerror}") from None
    print(f"reports: {out_dir}/endpointing.html (curve), .md, .json", file=sys.stderr)
    from voicelat.tui.live import want_tui

    if want_tui(args):
        from voicelat.tui.endpointing import show_endpointing

        show_endpointing(trade)
    else:
        print("\n" + curve_text(trade.scores))
    return EXIT_OK
