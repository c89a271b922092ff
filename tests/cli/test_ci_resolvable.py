"""``voicelat ci``: a difference under the instrument error plus the sampling CI is "not
resolvable on this machine", never a regression; gate.json and the Markdown say which, and
with what resolution. Literal runs (tests/cli/test_ci_offline.py's writer) and a real pair of
saved runs (the two emulator runs of tests/tui/data/compare)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_ci_offline import GENEROUS, budget_file, ci, make_turns, run_a, write_run
from voicelat.core.judge.compare import NOT_RESOLVABLE, REGRESSION

__all__ = ["run_a"]

MS = 1_000_000
PAIR = Path(__file__).resolve().parents[1] / "tui" / "data" / "compare"


def _gate(run: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((run / "gate.json").read_text())
    return doc


def _e2e_p50(run: Path) -> dict[str, Any]:
    return next(
        c for c in _gate(run)["comparisons"] if (c["metric"], c["percentile"]) == ("e2e", 50)
    )


def _instrument(p99_ms: float) -> dict[str, Any]:
    return {"instrument": {"error_p50_ns": int(p99_ms * MS / 2), "error_p99_ns": int(p99_ms * MS)}}


@pytest.mark.parametrize(
    ("error_ms", "verdict", "rc"), [(100.0, NOT_RESOLVABLE, 0), (1.0, REGRESSION, 1)]
)
def test_a_150_ms_regression_against_the_instrument_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], error_ms: float, verdict: str, rc: int
) -> None:
    base = write_run(tmp_path / "base", make_turns(), **_instrument(error_ms))
    slow = write_run(tmp_path / "slow", make_turns(seed=2, stt_shift_ms=150),
                     **_instrument(error_ms))  # fmt: skip
    code, out, _ = ci(capsys, "--results", slow, "--baseline", base, "--budget",
                      budget_file(tmp_path, GENEROUS))  # fmt: skip
    assert code == rc, out
    c = _e2e_p50(slow)
    assert c["verdict"] == verdict
    # Both runs' P99 error, added: the difference of two figures carries both.
    assert c["instrument_ns"] == round(2 * error_ms * MS)
    assert c["resolvable_ns"] == c["sampling_ns"] + c["instrument_ns"]
    assert c["resolvable"] is (verdict != NOT_RESOLVABLE)
    md = next(slow.glob("*.md")).read_text()
    assert "Smallest resolvable difference on this machine, e2e P50" in md
    if verdict == NOT_RESOLVABLE:
        # ~150 ms is inside 200 ms of instrument error: said so, and it passes.
        assert 100 * MS < c["diff_ns"] < 200 * MS
        assert "not resolvable on this machine" in out and "not resolvable on this machine" in md
        assert "instrument ±200.0 ms" in md or "instrument ±200 ms" in md


def test_uncalibrated_runs_fall_back_to_the_sampling_ci(
    tmp_path: Path, run_a: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    slow = write_run(tmp_path / "slow", make_turns(seed=2, stt_shift_ms=150))
    code, _, _ = ci(capsys, "--results", slow, "--baseline", run_a, "--budget",
                    budget_file(tmp_path, GENEROUS))  # fmt: skip
    assert code == 1
    c = _e2e_p50(slow)
    assert c["verdict"] == REGRESSION and c["instrument_ns"] is None
    assert c["resolvable_ns"] == c["sampling_ns"] > 0
    assert "the sampling CI only" in next(slow.glob("*.md")).read_text()


def _comparison(run: Path, metric: str, p: int) -> dict[str, Any]:
    return next(
        c for c in _gate(run)["comparisons"] if (c["metric"], c["percentile"]) == (metric, p)
    )


@pytest.mark.parametrize(("error_ms", "verdict"), [(0.0, "faster"), (5.0, "faster"),
                                                    (15.0, NOT_RESOLVABLE)])  # fmt: skip
def test_a_real_pair_of_saved_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], error_ms: float, verdict: str
) -> None:
    # Two real runs of the emulated cascade: emu-b's LLM TTFT P90 is 205 ms faster, 95 % CI
    # [-334, -22] ms: significant by sampling, but only 22 ms clear of zero.
    a = shutil.copytree(PAIR / "emu-a", tmp_path / "a")
    b = shutil.copytree(PAIR / "emu-b", tmp_path / "b")
    if error_ms:
        for run in (a, b):
            doc = json.loads((run / "summary.json").read_text())
            (run / "summary.json").write_text(json.dumps(doc | _instrument(error_ms)))
    code, out, _ = ci(capsys, "--results", b, "--baseline", a, "--force", "--budget",
                      budget_file(tmp_path, GENEROUS.replace("5000", "9000")))  # fmt: skip
    assert code == 0, out
    c = _comparison(b, "llm_ttft", 90)
    assert round(c["diff_ns"] / MS) == -205 and round(c["ci_high_ns"] / MS) == -22
    assert c["verdict"] == verdict
    assert c["instrument_ns"] == (round(2 * error_ms * MS) if error_ms else None)
    if verdict == NOT_RESOLVABLE:
        assert "llm_ttft P90" in out and "not resolvable on this machine" in out
