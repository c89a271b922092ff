"""The pytest plugin: millisecond summaries, ``assert_latency``, the waterfall on a failed assert,
the ``pytest11`` registration, and (on the real stack) the ``voicelat_run`` fixture."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from voicelat.core.base.contract import SEGMENTS
from voicelat.core.base.turn import Turn
from voicelat.core.summaries.summary import build_summary
from voicelat.files.results import TurnsWriter, write_summary
from voicelat.testing.pytest_plugin import LatencySummary, Millis, assert_latency

MS = 1_000_000


def write_run(path: Path, n: int = 6) -> Path:
    turns = []
    for i in range(n):
        seg = {s: (20 + i) * MS for s in SEGMENTS}
        seg["endpointing"] = 500 * MS
        turns.append(Turn(i, f"f{i}", 0, {}, seg, sum(seg.values())))
    writer = TurnsWriter(path)
    for t in turns:
        writer.write(t)
    writer.close()
    summary = build_summary(
        turns, run={}, pipeline={"name": "local", "sha256": "a"}, fixtures=[], stages={}
    )
    write_summary(path, summary)
    return path


@pytest.fixture
def summary(tmp_path: Path) -> LatencySummary:
    return LatencySummary.from_run_dir(write_run(tmp_path / "run"))


def test_attribute_access_is_in_milliseconds(summary: LatencySummary) -> None:
    raw: dict[str, Any] = dict(summary.raw)
    assert summary.e2e.p90 == pytest.approx(raw["e2e"]["p90"] / MS)
    assert 600 < summary.e2e.p50 < 800  # 500 ms endpointing + 7 segments of ~22 ms
    assert summary.endpointing.p50 == pytest.approx(500)
    assert summary.llm_ttft.p90 == summary.segments["llm_ttft"].p90
    assert summary.n == 6 and summary.e2e.n == 6
    assert summary.failure_rate == 0
    p90 = summary.e2e.p90
    assert isinstance(p90, Millis) and p90.label == "e2e P90"
    with pytest.raises(AttributeError, match="latencies: e2e, endpointing"):
        _ = summary.llm_ttfb


def test_assert_latency_passes_and_fails_with_values_and_waterfall(summary: LatencySummary) -> None:
    assert_latency(summary, e2e_p90_ms=2000, endpointing_p50_ms=500)
    with pytest.raises(AssertionError) as exc:
        assert_latency(summary, e2e_p90_ms=100, stt_p50_ms=1000)
    msg = str(exc.value)
    lines = msg.splitlines()
    assert lines[0] == "latency limits broken:"
    assert lines[1].startswith("  e2e P90 ") and lines[1].endswith(
        "> limit 100 ms (n=6 warm turns)"
    )
    assert "stt P50" not in msg  # only what broke
    assert "waterfall at P50" in msg and "waterfall at P90" in msg
    bars = [ln for ln in lines if ln.split()[:3] == ["endpointing", "500", "ms"]]
    assert len(bars) == 2 and bars[0].endswith("#")  # P50 and P90 bands, drawn


def test_assert_latency_checks_sample_and_rejects_unknown_limits(summary: LatencySummary) -> None:
    with pytest.raises(AssertionError, match="sample too small: 6 warm turns < min_turns 10"):
        assert_latency(summary, min_turns=10)
    with pytest.raises(TypeError, match=r"e2e_p95_ms.*<metric>_<p50\|p90\|p99>_ms"):
        assert_latency(summary, e2e_p95_ms=100)
    with pytest.raises(TypeError, match="llm_ttfb_p50_ms"):
        assert_latency(summary, llm_ttfb_p50_ms=100)


def test_failed_plain_assert_prints_the_waterfall(tmp_path: Path) -> None:
    """An inner pytest session: the plugin loads through its entry point and explains asserts."""
    run = write_run(tmp_path / "run")
    (tmp_path / "test_inner.py").write_text(
        textwrap.dedent(
            f"""
            from voicelat.testing.pytest_plugin import LatencySummary

            def test_fast_enough():
                summary = LatencySummary.from_run_dir({str(run)!r})
                assert summary.e2e.p90 < 100

            def test_fixture_is_registered(voicelat_run):
                assert callable(voicelat_run)
            """
        )
    )
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_inner.py"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    out = proc.stdout
    assert proc.returncode == 1, out
    assert "1 failed, 1 passed" in out
    assert "e2e P90 = " in out and " ms, not < 100" in out
    assert "P50 band (1 turn(s), " in out
    assert "P90 band (1 turn(s), " in out
    assert "): endpointing 500 + stt " in out
    assert "truncated" not in out  # the whole waterfall fits pytest's default explanation


@pytest.mark.e2e
@pytest.mark.stack
def test_voicelat_run_fixture_on_the_real_stack(
    local_stack: dict[str, Any], voicelat_run: Any, tmp_path: Path
) -> None:
    summary = voicelat_run(turns=2, warmup=1, out=tmp_path / "run")
    assert summary.run_dir == tmp_path / "run"
    assert (tmp_path / "run" / "turns.jsonl").exists()
    assert summary.counts["turns"] == 3 and summary.counts["warmup"] == 1
    assert summary.n == 2
    # The VAD hangover alone is 500 ms; a real turn on this stack is well under a minute.
    assert 500 < summary.e2e.p50 < 60_000
    assert summary.endpointing.p50 >= 450
    assert_latency(summary, e2e_p90_ms=60_000)
    with pytest.raises(AssertionError, match=r"e2e P50 \d+ ms > limit 1 ms"):
        assert_latency(summary, e2e_p50_ms=1)


# -- load shapes and workers through the fixture, on the OpenAI emulator ------------------------
EMULATOR_PROFILE = {
    "openai": {
        "latency": {"headers": 5, "ttft": 30, "token": 5, "stt_first": 20, "stt_final": 30,
                    "tts_first_audio": 20, "tts_chunk": 5},
        "content": {"leading_silence_ms": 20.0, "reply": "Sure.", "ms_per_char": 10.0},
    }
}  # fmt: skip


def _emulated_pipeline_file(em: Any, path: Path) -> Path:
    """pipelines/emulated-openai.toml pointed at ``em``'s OpenAI emulator, as a file (the
    fixture takes a pipeline path, as a test author's suite gives it)."""
    from tests.helpers import ROOT

    port = em.servers["openai"].port
    text = (ROOT / "pipelines" / "emulated-openai.toml").read_text()
    path.write_text(text.replace("127.0.0.1:8401", f"127.0.0.1:{port}"))
    return path


@pytest.mark.e2e
async def test_the_fixture_runs_a_closed_loop_over_worker_processes(
    voicelat_run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``voicelat_run(..., concurrency=2, workers=2)``: two sessions on two worker processes,
    as ``voicelat run --concurrency 2 --workers 2`` runs them."""
    import asyncio

    from voicelat.emulate import Emulators

    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    async with Emulators(["openai"], profile=EMULATOR_PROFILE, seed=1, thread=True) as em:
        pipe = _emulated_pipeline_file(em, tmp_path / "p.toml")
        s = await asyncio.to_thread(
            voicelat_run, pipe, turns=4, warmup=2, concurrency=2, workers=2, out=tmp_path / "r"
        )
    run = s.raw["run"]
    assert (run["load"]["mode"], run["load"]["concurrency"]) == ("closed", 2)
    assert len(run["workers"]) == 2
    assert s.counts["turns"] == 6 and s.n == 4 and s.failure_rate == 0


async def test_the_fixture_runs_an_open_loop_and_refuses_a_rate_with_concurrency(
    voicelat_run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``rate=R``: an open loop (turns started on a schedule); with ``concurrency`` too, the
    test fails with voicelat's one-line reason (as the command line refuses both)."""
    import asyncio

    from voicelat.emulate import Emulators

    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    async with Emulators(["openai"], profile=EMULATOR_PROFILE, seed=1, thread=True) as em:
        pipe = _emulated_pipeline_file(em, tmp_path / "p.toml")
        s = await asyncio.to_thread(
            voicelat_run, pipe, turns=3, warmup=1, rate=4.0, out=tmp_path / "r"
        )
        assert s.raw["run"]["load"]["mode"] == "open"
        assert s.raw["run"]["load"]["rate_per_s"] == 4.0
        assert s.counts["turns"] == 4 and s.failure_rate == 0
        with pytest.raises(pytest.fail.Exception, match=r"voicelat: .*concurrency.*rate"):
            voicelat_run(pipe, turns=1, rate=4.0, concurrency=2, out=tmp_path / "r2")
