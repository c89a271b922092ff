"""``voicelat endpointing``: the endpointing trade-off on annotated fixtures, offline.

Replays the fixtures (default: the bundled pause set) through the energy VAD, Silero and the
WebRTC VAD over a grid of thresholds and hangovers, at the live 20 ms frame timing but without
servers or real-time pacing, and writes ``endpointing.md``, ``endpointing.json`` and
``endpointing.html`` (the curve as SVG). Prints the table and the setting that meets the budget.

With ``--runs RUN_DIR ...``, each recorded run of a pipeline that ended its turns on the
provider's own end-of-turn (``[endpointing] mode = "provider"``: Deepgram, AssemblyAI) becomes
one more point, scored by the same rules against the annotations the run recorded
(:mod:`voicelat.core.measure.endpointing_runs`) and marked as measured on the wire.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from voicelat.audio.endpointers import INSTALL_HINT, SPECS, installed
from voicelat.audio.endpointers_replay import (
    Grid,
    audio_seconds,
    estimate_seconds,
    replay,
    truth_of,
)
from voicelat.cli.args import non_negative_float, positive_int
from voicelat.cli.endpointing_runs import load_points
from voicelat.core.base.errors import EXIT_OK, ConfigError
from voicelat.core.measure.endpointing import ConfigScore
from voicelat.files.fixtures import Fixture, default_fixtures_dir, load_fixtures
from voicelat.report.endpointing import TradeOff, curve_text, document, html, markdown

#: ``--endpointers none``: no offline replay, only the recorded runs.
NONE = "none"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``endpointing`` on the ``voicelat`` command's subparsers."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "endpointing",
        help="the endpointing trade-off (latency vs cut-offs) on annotated fixtures, offline",
        description=(
            "Replay annotated fixtures through endpointers (energy VAD, Silero, WebRTC VAD) over "
            "a grid of thresholds and hangovers; report P50/P90 latency after the true speech "
            "end, false cut-off rate (an endpoint before the end, e.g. inside a pause), missed "
            "endpoints, the Pareto front and the fastest setting within a cut-off budget. "
            "--runs adds recorded runs of provider-endpointed pipelines (Deepgram, AssemblyAI) "
            "as points measured on the wire."
        ),
    )
    p.add_argument("--fixtures", type=Path, help="annotated fixtures (default: the pause set)")
    p.add_argument(
        "--endpointers",
        default=None,
        metavar="NAME[,NAME...]",
        help=f"comma-separated, from {', '.join(SPECS)} (default: every one installed; silero "
        f"and webrtc come with the endpointing extra; {NONE}: only --runs)",
    )
    p.add_argument(
        "--runs",
        nargs="+",
        type=Path,
        default=[],
        metavar="RUN_DIR",
        help="recorded runs (`voicelat run --out`) of pipelines with [endpointing] mode = "
        '"provider": the provider\'s end-of-turn, one point per run',
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


def default_endpointers() -> str:
    """Every endpointer installed here, comma-separated; a note on stderr names the skipped
    ones and what installs them (the README install has only the energy VAD)."""
    names = [n for n in SPECS if installed(n)]
    skipped = [n for n in SPECS if n not in names]
    if skipped:
        _note(
            f"skipping the {' and '.join(skipped)} endpointer(s): not installed "
            f"({INSTALL_HINT}); running {', '.join(names)}"
        )
    return ",".join(names)


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


def _note(text: str) -> None:
    print(f"note: {text}", file=sys.stderr)


def _offline(args: argparse.Namespace, fixtures: list[Fixture], directory: Path) -> TradeOff:
    """The offline grid over ``fixtures``, scored (the estimate and its limit first)."""
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
    return TradeOff(
        tuple(out.scores),
        args.budget / 100,
        out.fixtures,
        out.with_pauses,
        out.pauses,
        out.audio_s,
        out.wall_s,
    )


def _trade_off(args: argparse.Namespace) -> TradeOff:
    """The offline grid (unless ``--endpointers none``) and the runs' points, on one curve."""
    if args.endpointers is None:
        args.endpointers = default_endpointers()
    offline = str(args.endpointers).strip() != NONE
    if not offline and not args.runs:
        raise ConfigError(f"--endpointers {NONE} leaves nothing to score: give --runs RUN_DIR")
    fixtures: list[Fixture] | None = None
    directory = args.fixtures or default_fixtures_dir() / "pauses"
    if offline:
        fixtures = load_fixtures(directory)
        for f in fixtures:
            truth_of(f)  # every fixture must be annotated: say so before any work
        grid_from(args)  # a bad flag is refused before the runs are read
    points = load_points(list(args.runs), fixtures)  # a bad run: refused before the grid
    wire: tuple[ConfigScore, ...] = tuple(p.score for p in points)
    if fixtures is None:
        return TradeOff(wire, args.budget / 100, 0, 0, 0, 0.0, 0.0, tuple(points))
    t = _offline(args, fixtures, directory)
    return TradeOff(
        t.scores + wire,
        t.budget,
        t.fixtures,
        t.with_pauses,
        t.pauses,
        t.audio_s,
        t.wall_s,
        tuple(points),
    )


def cmd_endpointing(args: argparse.Namespace) -> int:
    """Run the grid (and read the runs), print the table, write the reports."""
    trade = _trade_off(args)
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
    from voicelat.cli.tui_child import want_tui

    if want_tui(args):
        from voicelat.tui.endpointing import show_endpointing

        show_endpointing(trade)
    else:
        print("\n" + curve_text(trade.scores))
    return EXIT_OK
