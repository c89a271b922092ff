"""End to end: real turns through the real embedded stack, checked against the metric contract."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers import ROOT, read_turns, voicelat, wer
from voicelat.audio import read_wav
from voicelat.core.base.contract import CRITICAL_PATH, SEGMENTS
from voicelat.core.summaries.run_summary import SCHEMA_VERSION

pytestmark = [pytest.mark.stack, pytest.mark.e2e]

#: Milestones the local stack can produce (Wyoming faster-whisper sends no partials).
LOCAL_MILESTONES = [
    "speech_start",
    "speech_end",
    "endpoint",
    "stt_final",
    "llm_request",
    "llm_first_delta",
    "llm_first_token",
    "llm_first_speakable",
    "llm_done",
    "tts_request",
    "tts_first_byte",
    "tts_first_audible",
    "tts_done",
    "output_first_audible",
]


@pytest.fixture(scope="module")
def local_run(
    local_stack: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("run") / "r"
    proc = voicelat(
        "run", "--turns", "5", "--warmup", "1", "--out", str(out), env=local_stack["env"]
    )
    return {"proc": proc, "out": out}


def test_run_exits_zero_and_prints_the_waterfall(local_run: dict[str, Any]) -> None:
    proc = local_run["proc"]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    out = proc.stdout
    assert "Per-segment percentiles" in out and "Waterfall at P50" in out
    assert "e2e P50" in out and "n=5 warm turns" in out
    assert f"results: {local_run['out']}" in out
    # one line per turn as it ended
    assert sum(1 for line in out.splitlines() if line.startswith("[")) == 6


def test_every_turn_has_every_milestone_in_order(local_run: dict[str, Any]) -> None:
    turns = read_turns(local_run["out"])
    assert len(turns) == 6
    assert [t["warmup"] for t in turns] == [True, False, False, False, False, False]
    for t in turns:
        assert not t["failed"], t["failure"]
        m = t["milestones_ns"]
        missing = [k for k in LOCAL_MILESTONES if k not in m]
        assert not missing, f"turn {t['index']} lacks {missing}"
        path = [m[k] for k in CRITICAL_PATH]
        assert path == sorted(path), f"turn {t['index']} critical path out of order: {m}"
        assert m["llm_request"] <= m["llm_first_delta"] <= m["llm_first_token"] <= m["llm_done"]
        assert m["tts_first_byte"] <= m["tts_done"]
        assert not any(f.startswith(("clamped", "order")) for f in t["flags"]), t["flags"]


def test_segments_sum_exactly_to_e2e(local_run: dict[str, Any]) -> None:
    for t in read_turns(local_run["out"]):
        seg = t["segments_ns"]
        assert list(seg) == list(SEGMENTS)
        assert sum(seg.values()) == t["e2e_ns"]
        m = t["milestones_ns"]
        assert t["e2e_ns"] == m["output_first_audible"] - m["speech_end"]
        assert all(v >= 0 for v in seg.values())
        # the endpointing wait is the configured hangover (500 ms) within a few frames
        assert 380e6 <= seg["endpointing"] <= 620e6, seg["endpointing"]


def test_transcripts_close_to_the_fixtures(local_run: dict[str, Any]) -> None:
    for t in read_turns(local_run["out"]):
        assert t["expected"], t
        assert wer(t["expected"], t["transcript"]) <= 0.25, (t["expected"], t["transcript"])
        assert t["reply"], "the LLM said nothing"


def test_stage_figures_and_subspans_recorded(local_run: dict[str, Any]) -> None:
    for t in read_turns(local_run["out"])[1:]:
        f = t["figures"]
        assert (
            f["llm_ttft_ns"] > 0
            and f["llm_ttft_ns"]
            == t["milestones_ns"]["llm_first_token"] - t["milestones_ns"]["llm_request"]
        )
        assert f["stt_finalization_ns"] > 0
        # RTF counts from the first text sent, so it includes waiting for the LLM's later text
        assert f["tts_audio_ns"] > 200e6 and f["tts_rtf"] > 0
        assert f["pacer_lag_max_ns"] is not None
        spans = {(s["stage"], s["name"]) for s in t["spans"]}
        assert ("llm", "response_headers") in spans and ("stt", "connect") in spans
        hdr = next(s for s in t["spans"] if s["name"] == "response_headers")
        # headers come before the first token: TTFB is not TTFT
        assert hdr["end_ns"] <= t["milestones_ns"]["llm_first_token"]


def test_summary_is_versioned_and_complete(local_run: dict[str, Any]) -> None:
    s = json.loads((local_run["out"] / "summary.json").read_text())
    assert s["schema_version"] == SCHEMA_VERSION
    assert s["run"]["status"] == "complete"
    assert s["counts"] == {
        "turns": 6,
        "headline": 5,
        "warmup": 1,
        "cold": 0,
        "failed": 0,
        "flagged": s["counts"]["flagged"],
    }
    assert s["e2e"]["n"] == 5 and s["e2e"]["p50"] <= s["e2e"]["p90"]
    assert set(s["stages"]) == {"stt", "llm", "tts"}
    assert s["stages"]["tts"]["streaming"] is True
    assert {f["id"] for f in s["fixtures"]} >= {"weather_paris", "timer_ten_minutes"}
    assert all(len(f["sha256"]) == 64 for f in s["fixtures"])
    assert s["run"]["stack"]["llm"]["version"] == "0.3.36"
    band = s["waterfall"]["p50"]
    assert sum(band["segments_ns"].values()) == band["mean_e2e_ns"]
    # measured from the endpoint, a warm turn on this stack takes well under 3 s
    assert 100e6 < band["mean_e2e_ns"] - band["segments_ns"]["endpointing"] < 3e9


def test_stereo_44k_fixture_is_resampled_not_rejected(
    local_stack: dict[str, Any], tmp_path: Path
) -> None:
    src = read_wav(ROOT / "fixtures" / "weather_paris.wav")
    mono = src.to_array().astype(np.float64)
    n_out = round(len(mono) * 44100 / 16000)
    x = np.interp(np.linspace(0, len(mono) - 1, n_out), np.arange(len(mono)), mono)
    stereo = np.stack([x, x], axis=1).astype("<i2")
    fx = tmp_path / "fx"
    fx.mkdir()
    import wave

    with wave.open(str(fx / "paris.wav"), "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(44100)
        w.writeframes(stereo.tobytes())
    manifest = {
        "version": 1,
        "fixtures": [
            {
                "id": "paris",
                "file": "paris.wav",
                "text": "What's the weather like in Paris today?",
                "speech_start_ms": 420,
                "speech_end_ms": 2150,
            }
        ],
    }
    (fx / "manifest.json").write_text(json.dumps(manifest))
    out = tmp_path / "out"
    proc = voicelat(
        "run",
        "--fixtures",
        str(fx),
        "--turns",
        "1",
        "--warmup",
        "0",
        "--out",
        str(out),
        env=local_stack["env"],
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (turn,) = read_turns(out)
    assert not turn["failed"]
    assert wer("What's the weather like in Paris today?", turn["transcript"]) <= 0.25


def test_a_failing_stage_fails_its_turns_and_the_run_goes_on(
    local_stack: dict[str, Any], tmp_path: Path
) -> None:
    pipeline = (
        (ROOT / "pipelines" / "local.toml")
        .read_text()
        .replace('voice = "en_US-joe-medium"', 'voice = "en_US-nonexistent-medium"')
    )
    p = tmp_path / "bad-voice.toml"
    p.write_text(pipeline)
    out = tmp_path / "out"
    proc = voicelat(
        "run",
        "--pipeline",
        str(p),
        "--turns",
        "2",
        "--warmup",
        "0",
        "--out",
        str(out),
        env=local_stack["env"],
    )
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "every turn failed" in proc.stderr
    turns = read_turns(out)
    assert len(turns) == 2  # the run went on after the first failure
    for t in turns:
        assert t["failed"] and t["failure"]["stage"] == "tts"
        assert t["failure"]["reason"], t
        assert "stt_final" in t["milestones_ns"]  # what happened before the failure is kept
    assert json.loads((out / "summary.json").read_text())["counts"]["failed"] == 2


def test_ctrl_c_keeps_finished_turns_and_writes_the_summary(
    local_stack: dict[str, Any], tmp_path: Path
) -> None:
    import os

    out = tmp_path / "out"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "voicelat",
            "run",
            "--turns",
            "8",
            "--warmup",
            "0",
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, **local_stack["env"]},
    )
    turns_file = out / "turns.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if turns_file.exists() and len(turns_file.read_text().splitlines()) >= 2:
            break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("no two turns within 120 s")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    kept = read_turns(out)
    assert 2 <= len(kept) < 8
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["status"] == "interrupted"
    assert summary["counts"]["turns"] == len(kept)
    # the stack the session started is still up (the run did not start it, so it did not stop it)
    assert local_stack["status"].healthy
