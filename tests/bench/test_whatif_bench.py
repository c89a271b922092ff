"""bench/whatif_check.py's pieces that need no stack: editing a pipeline file, pooling runs."""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path
from types import ModuleType

from voicelat.core.base.turn import Turn
from voicelat.files.results import TurnsWriter, write_summary

ROOT = Path(__file__).resolve().parents[2]
MS = 1_000_000


def _bench() -> ModuleType:
    sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location(
        "whatif_check", ROOT / "bench" / "whatif_check.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_with_setting_replaces_or_adds_a_key() -> None:
    bench = _bench()
    text = (ROOT / "pipelines" / "local.toml").read_text()
    a = tomllib.loads(bench.with_setting(text, "endpointing.threshold_dbfs", "-30"))
    assert a["endpointing"]["threshold_dbfs"] == -30 and a["endpointing"]["hangover_ms"] == 500
    b = tomllib.loads(bench.with_setting(text, "endpointing.min_speech_ms", "60"))
    assert b["endpointing"]["min_speech_ms"] == 60 and b["stt"] == a["stt"]
    c = tomllib.loads(bench.with_setting("[pipeline]\nname = 'x'\n", "output.latency_ms", "40"))
    assert c["output"]["latency_ms"] == 40


def test_pool_merges_runs_and_splits_at_the_endpoint(tmp_path: Path) -> None:
    bench = _bench()
    dirs = []
    for r, e2e in enumerate((1000, 1200)):
        d = tmp_path / f"r{r}"
        w = TurnsWriter(d)
        w.write(Turn(0, "a", 0, {}, {"endpointing": 500 * MS}, e2e * MS))
        w.close()
        write_summary(d, {"schema_version": 1})
        dirs.append(d)
    out = bench.pool(dirs, tmp_path / "pooled")
    assert out["n"] == 2 and out["e2e_p50_ns"] == 1100 * MS
    assert out["after_endpoint_p50_ns"] == 600 * MS and out["endpointing_p50_ns"] == 500 * MS


def test_reply_what_ifs_edit_the_pipeline_and_build_the_tts_matrix() -> None:
    from voicelat.files.matrix import parse_matrix
    from voicelat.files.pipeline import parse_pipeline

    bench = _bench()
    base = bench._base_text("espeak")
    doc = tomllib.loads(base)
    assert doc["tts"] == {"stage": "espeak-tts", "voice": "en-us"} and doc["chunker"]
    clause = tomllib.loads(bench._measured_text(base, "chunker.mode=clause"))
    assert clause["chunker"]["mode"] == "clause" and clause["tts"] == doc["tts"]
    parse_pipeline(clause)
    piper = tomllib.loads(bench._measured_text(bench._base_text(None), "tts=espeak"))
    assert piper["tts"]["stage"] == "espeak-tts" and piper["llm"]["max_tokens"] == 40
    matrix = parse_matrix(tomllib.loads(bench.tts_matrix("piper", "espeak")))
    assert [c.labels["tts"] for c in matrix.combinations] == ["piper", "espeak"]
    assert matrix.combinations[0].pipeline.llm["stop"] == ["\n"]


def test_pool_measures_the_parts_a_reply_what_if_moves(tmp_path: Path) -> None:
    bench = _bench()
    d = tmp_path / "r"
    w = TurnsWriter(d)
    ms = {"llm_first_token": 100 * MS, "llm_first_speakable": 150 * MS, "tts_first_byte": 230 * MS}
    w.write(Turn(0, "a", 0, {**ms, "output_first_audible": 260 * MS}, {}, 900 * MS))
    w.close()
    write_summary(d, {"schema_version": 1})
    parts = bench.pool([d], tmp_path / "pooled")["parts_p50_ns"]
    assert parts == {
        "llm_first_token -> tts_first_byte": 130 * MS,
        "llm_first_speakable -> output_first_audible": 110 * MS,
    }


def test_named_sets_the_cells_name() -> None:
    bench = _bench()
    text = bench.named(bench._measured_text(bench._base_text(None), "tts=espeak"), "tts-espeak")
    doc = tomllib.loads(text)
    assert doc["pipeline"]["name"] == "tts-espeak" and doc["tts"]["stage"] == "espeak-tts"
