"""``voicelat whatif RUN --set KEY=VALUE``: the e2e a setting would give, from a recorded run.

The endpointing keys are replayed offline on the run's fixtures with the pipeline's own VAD
(old and new setting) to find how far each fixture's endpoint moves; the recorded turns are
moved by that (see :mod:`voicelat.core.whatif` for the model and its assumptions). The old
setting's replay must land on the recorded endpoints: how far it does is printed, as a check of
the model on this run.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from voicelat.audio.endpointers_replay import first_endpoints_ns
from voicelat.core.display import fmt_ms
from voicelat.core.errors import EXIT_OK, ConfigError
from voicelat.core.turn import Turn
from voicelat.core.whatif import ENDPOINTING_KEYS, Prediction, Setting, parse_setting, predict
from voicelat.files.fixtures import Fixture, default_fixtures_dir, load_fixtures
from voicelat.files.results import load_run

NS_PER_MS = 1_000_000


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``whatif`` on the ``voicelat`` command's subparsers."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "whatif",
        help="predict the e2e distribution a setting would give, from a recorded run",
        description=(
            "Predict P50/P90 e2e of a recorded run under another setting, from its milestones: "
            "endpointing.hangover_ms, endpointing.threshold_dbfs, endpointing.min_speech_ms "
            "(replayed offline on the fixtures) and output.latency_ms. Says its assumptions; "
            "keys it cannot predict are named with why."
        ),
    )
    p.add_argument("run_dir", type=Path, metavar="RUN", help="a directory `voicelat run` wrote")
    p.add_argument(
        "--set",
        dest="settings",
        action="append",
        required=True,
        metavar="KEY=VALUE",
        help="a setting to predict, e.g. endpointing.hangover_ms=300 (repeatable)",
    )
    p.add_argument("--fixtures", type=Path, help="the run's fixtures (default: the bundled set)")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the prediction as JSON")
    p.set_defaults(func=cmd_whatif)
    return p


def _fixtures(directory: Path, summary: dict[str, Any], turns: Sequence[Turn]) -> list[Fixture]:
    """The run's fixtures, checked against the hashes its summary recorded."""
    by_id = {f.id: f for f in load_fixtures(directory)}
    recorded = {str(f.get("id")): f.get("sha256") for f in summary.get("fixtures") or []}
    needed = sorted({t.fixture for t in turns})
    missing = [i for i in needed if i not in by_id]
    if missing:
        raise ConfigError(
            f"{directory} lacks the run's fixture(s) {', '.join(missing)}: give --fixtures DIR"
        )
    changed = [i for i in needed if recorded.get(i) not in (None, by_id[i].sha256)]
    if changed:
        raise ConfigError(
            f"fixture(s) {', '.join(changed)} in {directory} differ from the run's audio "
            "(sha256): give the run's --fixtures DIR"
        )
    return [by_id[i] for i in needed]


def _endpointing(summary: dict[str, Any]) -> dict[str, Any]:
    ep = dict((summary.get("pipeline") or {}).get("endpointing") or {})
    if ep.get("mode", "vad") != "vad":
        raise ConfigError(
            "this run ended turns on the provider's end-of-turn (endpointing.mode = provider): "
            "its endpoint does not follow the VAD settings, so they cannot be predicted"
        )
    for key in ("hangover_ms", "threshold_dbfs", "min_speech_ms"):
        if key not in ep:
            raise ConfigError(f"the run's summary.json has no endpointing.{key}: rerun it")
    return ep


def run_prediction(
    run_dir: Path, settings: Sequence[Setting], fixtures_dir: Path | None
) -> tuple[Prediction, int | None]:
    """The prediction, and the largest gap (ns) between replayed and recorded old endpoints."""
    run = load_run(run_dir)
    summary = run.summary or {}
    turns = [t for t in run.turns if t.headline]
    if not turns:
        raise ConfigError(f"{run_dir} has no warm, successful turn to predict from")
    old_output = float(((summary.get("pipeline") or {}).get("output") or {}).get("latency_ms", 0))
    delta_out = 0
    shift: dict[str, int | None] = {t.fixture: 0 for t in turns}
    new_ep: dict[str, int | None] = {}
    gap: int | None = None
    ep_keys = [s for s in settings if s.key in ENDPOINTING_KEYS]
    for s in settings:
        if s.key == "output.latency_ms":
            delta_out = round((s.value - old_output) * NS_PER_MS)
    if ep_keys:
        old = _endpointing(summary)
        new = dict(old)
        for s in ep_keys:
            new[s.key.split(".", 1)[1]] = s.value
        fixtures = _fixtures(fixtures_dir or default_fixtures_dir(), summary, turns)
        before = first_endpoints_ns(fixtures, **_vad_args(old))
        new_ep = first_endpoints_ns(fixtures, **_vad_args(new))
        for fid in shift:
            a, b = before.get(fid), new_ep.get(fid)
            shift[fid] = None if a is None or b is None else b - a
        gaps = [
            abs(recorded - offline)
            for t in turns
            if (recorded := t.milestones.get("endpoint")) is not None
            and (offline := before.get(t.fixture)) is not None
        ]
        gap = max(gaps) if gaps else None
    pred = predict(
        turns,
        settings,
        endpoint_shift_ns=shift,
        new_endpoint_ns=new_ep,
        output_latency_delta_ns=delta_out,
    )
    return pred, gap


def _vad_args(ep: dict[str, Any]) -> dict[str, Any]:
    return {
        "hangover_ms": int(ep["hangover_ms"]),
        "threshold_dbfs": float(ep["threshold_dbfs"]),
        "min_speech_ms": int(ep["min_speech_ms"]),
    }


def prediction_text(pred: Prediction, gap_ns: int | None) -> str:
    """The prediction as a few lines: recorded vs predicted P50/P90, exclusions, assumptions."""
    lines = [
        f"what-if {', '.join(s.text for s in pred.settings)} on {pred.n} warm turn(s)",
        f"  recorded  e2e P50 {fmt_ms(pred.recorded(50))} ms  P90 {fmt_ms(pred.recorded(90))} ms",
        f"  predicted e2e P50 {fmt_ms(pred.predicted(50))} ms  P90 {fmt_ms(pred.predicted(90))} ms",
        f"  predicted endpointing segment P50 {fmt_ms(pred.predicted_endpointing(50))} ms",
    ]
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
    settings = [parse_setting(s) for s in args.settings]
    pred, gap = run_prediction(args.run_dir, settings, args.fixtures)
    if pred.n == 0:
        raise ConfigError("no turn can be predicted with this setting (every one left out)")
    print(prediction_text(pred, gap), end="")
    if args.json is not None:
        doc = {
            "settings": [s.text for s in pred.settings],
            "n": pred.n,
            "recorded_p50_ns": pred.recorded(50),
            "recorded_p90_ns": pred.recorded(90),
            "predicted_p50_ns": pred.predicted(50),
            "predicted_p90_ns": pred.predicted(90),
            "predicted_endpointing_p50_ns": pred.predicted_endpointing(50),
            "endpoint_replay_gap_ns": gap,
            "excluded": [list(e) for e in pred.excluded],
            "assumptions": list(pred.assumptions),
        }
        try:
            args.json.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot write {args.json}: {exc.strerror}") from None
    return EXIT_OK
