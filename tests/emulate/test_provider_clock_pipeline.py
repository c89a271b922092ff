"""Whole fixture turns through the runner split each stage by the provider's own clock.

The shipped emulated pipelines against in-process emulators (as test_emulate_pipeline.py):
every stage whose provider reports a timing gets ``<stage>_provider_ns`` equal to the time the
emulator injected, and ``<stage>_overhead_ns`` = measured - reported, non-negative and small
on loopback; a stage whose provider reports nothing (AssemblyAI) gets no figure; the run
summary has their percentiles.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ROOT
from voicelat.core.base.plan import plan_turns
from voicelat.core.base.turn import Turn
from voicelat.core.measure.provider_clock import PROVIDER_KEYS
from voicelat.core.summaries.summary import figure_distributions
from voicelat.emulate import Emulators
from voicelat.engine.runner import Runner
from voicelat.files.fixtures import default_fixtures_dir, load_fixtures
from voicelat.files.pipeline import parse_pipeline

SHORT = {"leading_silence_ms": 40.0, "ms_per_char": 20.0}
PROFILE: dict[str, Any] = {
    "openai": {
        "latency": {
            "headers": 7,
            "ttft": 90,
            "token": 10,
            "stt_first": 40,
            "stt_final": 60,
            "tts_first_audio": 50,
            "tts_chunk": 5,
        },
        "content": {**SHORT, "reply": "Sure thing."},
    },
    "assemblyai": {"latency": {"stt_partial": 50, "stt_final": 80}},
    "cartesia": {"latency": {"tts_first_audio": 45, "tts_chunk": 5}, "content": SHORT},
}
#: Loopback rest bound (see tests/stages/test_provider_clock_emulated.py); a whole turn shares
#: the loop with the pacer, the sink and the other stages.
REST_MS = 15.0


def _pipeline(name: str, em: Emulators) -> Any:
    path = ROOT / "pipelines" / f"{name}.toml"
    data = tomllib.loads(path.read_text())
    for table in ("stt", "llm", "tts"):
        url = data[table]["base_url"]
        for server in em.servers.values():
            url = url.replace(
                f"127.0.0.1:{server.emulator.default_port}", f"127.0.0.1:{server.port}"
            )
        data[table]["base_url"] = url
    return parse_pipeline(data, path=path)


def _check(turn: Turn, stage: str, truth_ms: float, source: str, rest_ms: float = REST_MS) -> None:
    f = turn.figures
    provider, rest, span = (f[f"{stage}_{k}"] for k in PROVIDER_KEYS)
    assert isinstance(provider, int) and isinstance(rest, int) and isinstance(span, int)
    assert abs(provider / 1e6 - truth_ms) <= 0.6, (stage, provider, truth_ms)
    assert provider + rest == span
    assert 0 <= rest < rest_ms * 1e6, (stage, rest)
    assert turn.extra[f"{stage}_provider_source"] == source


def _head_ms(em: Emulators, endpoint: str, turn: Turn) -> float:
    """What the emulator spent before its response head, on the turn's first such request."""
    ex = next(
        e for e in em.truth.select("openai", endpoint) if e.marks["request_received"] >= turn.t0_ns
    )
    truth = ex.between_ms("request_received", "headers_written")
    assert truth is not None
    return truth


async def _run(name: str, emulators: list[str], tmp_path: Path) -> tuple[Any, Emulators]:
    fixture = next(f for f in load_fixtures(default_fixtures_dir()) if f.id == "book_table")
    profile = {k: PROFILE[k] for k in emulators}
    async with Emulators(emulators, profile=profile, seed=1) as em:
        runner = Runner(_pipeline(name, em), [fixture], tmp_path)
        outcome = await runner.run(plan_turns([fixture.id] * 2, warmup=1))
        assert em.errors == []
    return outcome, em


@pytest.mark.e2e
async def test_every_openai_stage_is_split_by_its_processing_header(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    outcome, em = await _run("emulated-openai", ["openai"], tmp_path)
    turns = [t for t in outcome.turns if not t.warmup]
    assert len(turns) == 2 and all(not t.failed for t in turns), [t.failure_reason for t in turns]
    for turn in turns:
        for stage, endpoint in (("stt", "transcriptions"), ("llm", "chat"), ("tts", "speech")):
            # openai-stt uploads the whole recording on a new connection: more rest.
            limit = 60.0 if stage == "stt" else REST_MS
            _check(turn, stage, _head_ms(em, endpoint, turn), "openai-processing-ms", limit)
        # The upload (and the connect) is the client's and the network's, not the provider's.
        spans = turn.spans_of("stt")
        client = spans.get("connect", 0) + spans["request_sent"]
        rest = turn.figures["stt_overhead_ns"]
        assert isinstance(rest, int) and rest >= client, (rest, spans)
    # Every openai-stt upload opens a new connection (cold: out of the headline summary), so
    # the percentiles are taken over the measured turns here.
    dists = figure_distributions(turns)
    for stage in ("stt", "llm", "tts"):
        assert dists[f"{stage}_provider_ns"].n == 2
        assert (dists[f"{stage}_overhead_ns"].p50 or -1) >= 0


@pytest.mark.e2e
async def test_cartesia_step_time_splits_tts_and_assemblyai_reports_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    emulators = ["assemblyai", "openai", "cartesia"]
    outcome, em = await _run("emulated-assemblyai-groq-cartesia", emulators, tmp_path)
    turns = [t for t in outcome.turns if not t.warmup]
    assert len(turns) == 2 and all(not t.failed for t in turns), [t.failure_reason for t in turns]
    for turn in turns:
        _check(turn, "tts", 45.0, "cartesia.step_time")
        _check(turn, "llm", _head_ms(em, "chat", turn), "openai-processing-ms")
        assert "stt_provider_ns" not in turn.figures  # AssemblyAI sends no processing time
    figures = outcome.summary["figures"]  # warm turns: the headline summary has them
    assert figures["tts_provider_ns"]["n"] == 2 and figures["tts_provider_ns"]["p50"] == 45e6
    assert figures["llm_overhead_ns"]["p50"] >= 0
    assert "stt_provider_ns" not in figures
