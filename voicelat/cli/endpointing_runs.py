"""``voicelat endpointing --runs RUN_DIR ...``: each recorded provider-endpointed run as one more
point of the trade-off (:mod:`voicelat.core.measure.endpointing_runs` scores it), with a note on stderr
for what a point can and cannot show."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from voicelat.core.measure.endpointing_runs import RunPoint, run_point
from voicelat.files.fixtures import Fixture
from voicelat.files.results import load_run

__all__ = ["load_points"]


def load_points(paths: list[Path], fixtures: list[Fixture] | None) -> list[RunPoint]:
    """Each run directory as a point; a directory that is no usable run is one error line.

    Notes on stderr say what a point can and cannot show (controls only, turns left out,
    other audio than the offline replay's).
    """
    points: list[RunPoint] = []
    for path in paths:
        run = load_run(path)
        point = run_point(str(path), run.summary, run.turns)
        points.append(point)
        if point.controls_only:
            _note(
                f"{path}: its fixtures have no annotated pauses (controls only): a cut-off is "
                "still any end-of-turn before the speech end, none can be placed in a pause"
            )
        if point.left_out:
            i, fixture, why = point.left_out[0]
            _note(
                f"{path}: {len(point.left_out)} turn(s) failed before any endpoint and are "
                f"left out (turn {i} {fixture}: {why})"
            )
        if point.stale:
            i, fixture, t = point.stale[0]
            _note(
                f"{path}: {len(point.stale)} turn(s) ended on a stale end-of-turn (before "
                "their speech could end one: the previous turn's audio, carried over on the "
                f"provider's socket) and are left out (turn {i} {fixture} at {t / 1e9:.3f} s)"
            )
        if fixtures is not None:
            _same_audio(path, point, run.summary or {}, fixtures)
    return points


def _same_audio(
    path: Path, point: RunPoint, summary: dict[str, Any], fixtures: list[Fixture]
) -> None:
    """Say so when a run's point is not on the offline replay's audio."""
    offline = {f.id: f.sha256 for f in fixtures}
    recorded = {str(e.get("id")): e.get("sha256") for e in summary.get("fixtures") or []}
    other = [f for f in point.fixtures if recorded.get(f) not in (None, offline.get(f))]
    if other:
        _note(
            f"{path}: fixture(s) {', '.join(other)} are not the offline replay's audio "
            "(another --fixtures, or changed): the points are not on the same audio"
        )
    elif set(point.fixtures) != set(offline):
        _note(
            f"{path}: scored on {len(point.fixtures)} fixture(s), the offline grid on "
            f"{len(offline)}: compare on the same fixtures for a like-for-like front"
        )


def _note(text: str) -> None:
    print(f"note: {text}", file=sys.stderr)
