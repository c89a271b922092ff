"""``voicelat score RUN``: price a measured run's turns and score its replies, after the run.

Cost per turn, per call and per minute from the prices the run's pipeline saved (``[cost]``,
or ``--prices FILE``); with ``--score wer`` the reply WER (the reply audio transcribed by the
embedded Whisper against the text sent to the TTS, "truncated" when the audio stopped early);
with ``--score all`` also DNSMOS, and PLCMOS when the run's network lost packets (``--plcmos``
asks for it, ``--no-plcmos`` turns it off). Writes RUN/scores.jsonl and the summary's ``cost`` and
``quality`` sections; never runs during a measurement (docs/COMPARE.md).

Exit codes: 0 scored; 2 usage or configuration error (bad prices, unknown mode, a scorer that is
not installed: the line names the extra); 3 the run directory cannot be written.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from voicelat.core.base.errors import EXIT_OK
from voicelat.score.run import MODES, ScoreOutcome, score_run


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``score`` on the ``voicelat`` command's subparsers."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "score",
        help="price a run's turns and score its replies (WER, DNSMOS) after the run",
        description=(
            "Price the turns of a run directory with its pipeline's [cost] prices (or --prices), "
            "and score the saved reply audio: --score wer transcribes each reply with the "
            "embedded Whisper and computes its WER against the text sent to the TTS; --score all "
            "adds DNSMOS. Writes RUN/scores.jsonl and the summary's cost and quality sections."
        ),
    )
    p.add_argument("run_dir", type=Path, metavar="RUN", help="a directory `voicelat run` wrote")
    p.add_argument(
        "--score",
        choices=MODES,
        default="all",
        help="off: price only; wer: + reply WER; all: + DNSMOS (default all)",
    )
    p.add_argument(
        "--plcmos",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="score PLCMOS (packet-loss concealment) with the audio scores; default: with "
        "--score all when the run's network lost packets",
    )
    p.add_argument(
        "--prices",
        type=Path,
        metavar="FILE.toml",
        help="a prices file (the keys of a [cost] table) instead of the run's own prices",
    )
    p.set_defaults(func=cmd_score)
    return p


def cmd_score(args: argparse.Namespace) -> int:
    """``voicelat score``."""
    prices = None
    if args.prices is not None:
        from voicelat.files.pipeline import load_prices

        prices = load_prices(args.prices)
    outcome = score_run(args.run_dir, args.score, prices=prices, plcmos=args.plcmos)
    print(score_lines(outcome))
    return EXIT_OK


def score_after_run(out_dir: Path, mode: str) -> str | None:
    """What ``voicelat run`` does when it ends: price the turns (cheap), and score the replies
    when ``--score`` asks; the lines to print (None when there is nothing to say)."""
    from voicelat.files.results import TURNS_FILE

    if not (out_dir / TURNS_FILE).is_file():
        return None
    outcome = score_run(out_dir, mode)
    if outcome.cost is None and outcome.quality is None:
        return None
    return score_lines(outcome)


def score_lines(outcome: ScoreOutcome) -> str:
    """Cost and quality in a few lines for people (the text report's own lines)."""
    from voicelat.report.text import cost_lines, quality_lines

    lines = [*cost_lines(outcome.cost), *quality_lines(outcome.quality), *outcome.notes]
    lines.append(f"scores -> {outcome.run_dir / 'scores.jsonl'}")
    return "\n".join(lines)


__all__ = ["add_parser", "cmd_score", "score_after_run", "score_lines"]
