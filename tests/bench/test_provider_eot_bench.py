"""bench/provider_eot.py: its pipelines (fast), and the whole bench on a small grid (slow)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

from voicelat.files.pipeline import parse_pipeline

ROOT = Path(__file__).resolve().parents[2]
URLS = {
    "deepgram": "http://127.0.0.1:19300",
    "assemblyai": "http://127.0.0.1:19301",
    "openai": "http://127.0.0.1:19302/v1",
}


def _bench() -> ModuleType:
    sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location(
        "provider_eot", ROOT / "bench" / "provider_eot.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pipelines_end_turns_on_the_provider() -> None:
    bench = _bench()
    dg = tomllib.loads(bench.pipeline_text("deepgram", 300, URLS))
    aai = tomllib.loads(bench.pipeline_text("assemblyai", 160, URLS))
    for data in (dg, aai):
        p = parse_pipeline(data)
        assert p.endpointing.mode == "provider"
    assert dg["stt"]["endpointing"] == 300 and dg["stt"]["base_url"] == "ws://127.0.0.1:19300"
    assert (
        aai["stt"]["min_turn_silence"] == 160 and aai["stt"]["base_url"] == "ws://127.0.0.1:19301"
    )
    assert (
        aai["tts"]["base_url"] == "ws://127.0.0.1:19300"
        and aai["llm"]["base_url"] == URLS["openai"]
    )


@pytest.mark.slow
def test_bench_scores_both_providers(tmp_path: Path) -> None:
    """The bench end to end on three fixtures, one setting per provider (~1 min)."""
    src = ROOT / "fixtures" / "pauses"
    manifest = json.loads((src / "manifest.json").read_text())
    keep = ("hesitate_flight", "clause_meeting", "control_taxi")
    manifest["fixtures"] = [f for f in manifest["fixtures"] if f["id"] in keep]
    fx = tmp_path / "fx"
    fx.mkdir()
    for f in manifest["fixtures"]:
        shutil.copy(src / f["file"], fx / f["file"])
    (fx / "manifest.json").write_text(json.dumps(manifest))
    cmd = [sys.executable, str(ROOT / "bench" / "provider_eot.py"), "--deepgram", "400"]
    cmd += ["--assemblyai", "400", "--fixtures", str(fx), "--out", str(tmp_path / "b")]
    cmd += ["--port", "19350", "--warmup", "0"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| deepgram (wire) | — | endpointing=400 utterance_end_ms=1000 |" in done.stdout
    assert "| assemblyai (wire) | — | min_turn_silence=400 |" in done.stdout
    doc = json.loads((tmp_path / "b" / "endpointing" / "endpointing.json").read_text())
    points = {r["stage"]: r for r in doc["runs"]}
    for stage in ("deepgram-stt", "assemblyai-stt"):
        turns = {t["fixture"]: t for t in points[stage]["turns"]}
        # 699 ms pause > 400 ms: ended inside it; 299 ms: bridged; the control is not cut.
        assert turns["hesitate_flight"]["cut_in_pause"], turns
        assert not turns["clause_meeting"]["cut"] and not turns["control_taxi"]["cut"]
        # 400 ms of silence, then the emulator's stt_final (120 ms) and the wire.
        assert 400e6 <= turns["control_taxi"]["latency_ns"] < 700e6
    assert "load average at the start" in done.stderr
