"""The emulators' ground truth is bounded in a long-lived server (it grew without limit)."""

from __future__ import annotations

from voicelat.cli.serve import SERVE_TRUTH_LIMIT
from voicelat.emulate.running import Emulators
from voicelat.emulate.truth import GroundTruth


def test_a_bounded_truth_keeps_only_the_most_recent_exchanges() -> None:
    truth = GroundTruth(max_kept=50)
    for i in range(1000):
        truth.open("openai", "chat", i, 0, i)
    assert 50 <= len(truth) <= 55
    assert truth.last().index == 999


def test_unbounded_by_default_and_bounded_for_serve() -> None:
    truth = GroundTruth()
    for i in range(200):
        truth.open("openai", "chat", i, 0, i)
    assert len(truth) == 200
    assert Emulators(["openai"], truth_limit=SERVE_TRUTH_LIMIT).truth.max_kept == SERVE_TRUTH_LIMIT
