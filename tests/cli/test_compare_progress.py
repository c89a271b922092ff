"""``voicelat compare`` says how far it has got: after every turn a progress line on stderr
(turns, combinations finished, elapsed, ETA from the mean turn), and the finished comparison
opens again with ``voicelat view``. A fast real run: two pipelines against
``voicelat serve openai`` on loopback, one turn each."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.emulated_run import KEY_ENV, pipeline, serving
from tests.helpers import ROOT
from voicelat.cli.compare_progress import CompareLines as _Progress
from voicelat.core.base.plan import PlannedTurn
from voicelat.core.base.turn import Turn
from voicelat.files.matrix import Slot


def _slots(combos: int, turns: int) -> list[Slot]:
    return [
        Slot(i * combos + c, c, PlannedTurn(index=i, fixture=f"f{i}", repeat=0, warmup=False))
        for i in range(turns)
        for c in range(combos)
    ]


def _turn(i: int, failed: bool = False) -> Turn:
    return Turn(
        index=i,
        fixture=f"f{i}",
        t0_ns=0,
        milestones={},
        segments={},
        e2e_ns=None if failed else 900_000_000,
        failed=failed,
        failure_stage="tts" if failed else None,
        failure_reason="x" if failed else None,
    )


def test_progress_counts_turns_and_finished_combinations_with_an_eta(
    capsys: pytest.CaptureFixture[str],
) -> None:
    now = [100.0]
    slots = _slots(2, 2)
    progress = _Progress(slots, 2, clock=lambda: now[0])
    now[0] = 130.0  # set-up took 30 s: not part of the ETA
    progress.start()
    lines = []
    for slot, secs in zip(slots, (10.0, 6.0, 8.0, 8.0), strict=True):
        now[0] += secs
        progress(slot, f"c{slot.combination}", _turn(slot.planned.index, failed=slot.position == 1))
        lines.append(capsys.readouterr())
    assert lines[0].out.startswith("[1/4] c0")
    assert lines[0].err.strip() == (
        "compare: 1/4 turns (25%), 0/2 combinations done; elapsed 10 s, ETA 30 s (10.0 s/turn)"
    )
    assert (
        "2/4 turns (50%), 0/2 combinations done, 1 failed; elapsed 16 s, ETA 16 s" in lines[1].err
    )
    assert "3/4 turns (75%), 1/2 combinations done, 1 failed" in lines[2].err
    assert lines[3].err.strip().endswith("2/2 combinations done, 1 failed; elapsed 32 s, done")


def test_a_combination_that_cannot_start_still_counts_towards_the_end(
    capsys: pytest.CaptureFixture[str],
) -> None:
    slots = _slots(2, 1)
    progress = _Progress(slots, 2, clock=lambda: 0.0)
    progress.skip(slots[0])
    progress(slots[1], "c1", _turn(0))
    assert "2/2 turns (100%), 2/2 combinations done" in capsys.readouterr().err


@pytest.mark.e2e
def test_a_real_comparison_shows_progress_and_opens_again_in_view(tmp_path: Path) -> None:
    env = {**os.environ, KEY_ENV: "emulator-key", "PYTHONPATH": str(ROOT)}
    out = tmp_path / "cmp"
    with serving() as (url, _proc):
        a, b = pipeline(tmp_path, url, "alpha"), pipeline(tmp_path, url, "beta")
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "voicelat",
                "compare",
                str(a),
                str(b),
                "-n",
                "1",
                "-w",
                "0",
                "-o",
                str(out),
                "--no-tui",
                "--resamples",
                "100",
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=120,
        )
    assert r.returncode == 0, r.stderr
    progress = [line for line in r.stderr.splitlines() if line.startswith("compare: ")]
    assert len(progress) == 2
    assert re.fullmatch(
        r"compare: 1/2 turns \(50%\), 1/2 combinations done; elapsed \d+ s, "
        r"ETA \d+ s \(\d+\.\d s/turn\)",
        progress[0],
    ), progress[0]
    assert progress[1].startswith("compare: 2/2 turns (100%), 2/2 combinations done;")
    assert progress[1].endswith(", done")
    assert f"open it again: voicelat view {out}" in r.stdout
    page = (out / "report.html").read_text()
    assert page.count('class="histogram"') == 2  # each combination's turns, read back
    view = subprocess.run(
        [sys.executable, "-m", "voicelat", "view", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=60,
    )
    assert view.returncode == 0, view.stderr
    assert "Comparison alpha+beta: 2 combinations" in view.stdout
    assert "alpha: WER" in view.stdout and "beta: WER" in view.stdout
