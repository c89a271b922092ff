"""``voicelat whatif RUN --set KEY=VALUE``: the e2e a setting would give, from a recorded run.

The endpointing keys are replayed offline on the run's fixtures with the pipeline's own VAD
(old and new setting) to find how far each fixture's endpoint moves; the recorded turns are
moved by that (see :mod:`voicelat.core.judge.whatif` for the model and its assumptions). The old
setting's replay must land on the recorded endpoints: how far it does is printed, as a check of
the model on this run. ``chunker.mode`` / ``chunker.min_chars`` replay the recorded LLM deltas
through the chunker, ``tts=LABEL --compare DIR`` takes another TTS's part of each turn from a
compare run (:mod:`voicelat.core.judge.whatif_reply`). The inputs are loaded and the prediction made
below the command line (:mod:`voicelat.score.whatif`); this module is the command and its
lines. Bad input is one line, exit 2.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from voicelat.core.base.display import fmt_ms
from voicelat.core.base.errors import EXIT_OK, ConfigError
from voicelat.core.judge.whatif import Prediction, parse_setting

NS_PER_MS = 1_000_000


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``whatif`` on the ``voicelat`` command's subparsers."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "whatif",
        help="predict the e2e distribution a setting would give, from a recorded run",
        description=(
            "Predict P50/P90 e2e of a recorded run under another setting, from its milestones: "
            "endpointing.hangover_ms, endpointing.threshold_dbfs, endpointing.min_speech_ms "
            "(replayed offline on the fixtures), output.latency_ms, chunker.mode and "
            "chunker.min_chars (the recorded LLM deltas replayed through the chunker), and "
            "tts=LABEL with --compare DIR (another TTS a compare run measured). Says its "
            "assumptions; keys it cannot predict are named with why."
        ),
    )
    p.add_argument("run_dir", type=Path, metavar="RUN", help="a directory `voicelat run` wrote")
    p.add_argument(
        "--set",
        dest="settings",
        action="append",
        required=True,
        metavar="KEY=VALUE",
        help=(
            "a setting to predict, e.g. endpointing.hangover_ms=300, chunker.mode=clause, "
            "tts=espeak (repeatable)"
        ),
    )
    p.add_argument(
        "--compare",
        type=Path,
        metavar="DIR",
        help="for --set tts=LABEL: a `voicelat compare` directory that measured that TTS",
    )
    p.add_argument("--fixtures", type=Path, help="the run's fixtures (default: the bundled set)")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the prediction as JSON")
    p.set_defaults(func=cmd_whatif)
    return p


def prediction_text(pred: Prediction, gap_ns: int | None) -> str:
    """The prediction as a few lines: recorded vs predicted P50/P90, exclusions, assumptions."""
    lines = [
        f"what-if {', '.join(s.text for s in pred.settings)} on {pred.n} warm turn(s)",
        f"  recorded  e2e P50 {fmt_ms(pred.recorded(50))} ms  P90 {fmt_ms(pred.recorded(90))} ms",
        f"  predicted e2e P50 {fmt_ms(pred.predicted(50))} ms  P90 {fmt_ms(pred.predicted(90))} ms",
    ]
    if pred.part == "endpointing":
        lines.append(
            f"  predicted endpointing segment P50 {fmt_ms(pred.predicted_endpointing(50))} ms"
        )
    else:
        lines.append(
            f"  {pred.part}: recorded P50 {fmt_ms(pred.recorded_part(50))} ms, "
            f"predicted P50 {fmt_ms(pred.predicted_endpointing(50))} ms"
        )
    lines += [f"  {note}" for note in pred.notes]
    if gap_ns is not None:
        lines.append(
            f"  check: the offline VAD with the run's setting lands within "
            f"{gap_ns / NS_PER_MS:.1f} ms of every recorded endpoint (pacer lag included)"
        )
    for fixture, why in pred.excluded:
        lines.append(f"  left out {fixture}: {why}")
    lines.append("assumptions:")
    lines += [f"  - {a}" for a in pred.assumptions]
    return "\n".join(lines) + "\n"


def cmd_whatif(args: argparse.Namespace) -> int:
    """Print the prediction (and write it as JSON with ``--json``)."""
    from voicelat.score.whatif import prediction_json, run_prediction

    settings = [parse_setting(s) for s in args.settings]
    pred, gap = run_prediction(args.run_dir, settings, args.fixtures, args.compare)
    if pred.n == 0:
        raise ConfigError("no turn can be predicted with this setting (every one left out)")
    print(prediction_text(pred, gap), end="")
    if args.json is not None:
        doc = prediction_json(pred, gap)
        try:
            args.json.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot write {args.json}: {exc.strerror}") from None
    return EXIT_OK
