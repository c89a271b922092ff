"""The OpenAI Realtime twin runs real fixture turns through the runner against its emulator.

The pipeline file as shipped (only the port is swapped), an in-process emulator on an
ephemeral port, fixture audio paced in real time: the emulator's server VAD must hear the end
of the speech, the turn must carry every S2S milestone, its segments must sum to e2e, and the
measured stamps must sit within 2 ms of the emulator's ground truth.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ROOT
from voicelat.core.base.contract import S2S_SEGMENTS
from voicelat.core.base.plan import plan_turns
from voicelat.emulate import Emulators
from voicelat.engine.runner import Runner
from voicelat.files.fixtures import default_fixtures_dir, load_fixtures
from voicelat.files.pipeline import parse_pipeline

MS = 1_000_000
PROFILE: dict[str, Any] = {
    "openai-realtime": {
        "latency": {"response_created": 20, "first_audio": 180, "audio_chunk": 20},
        "content": {"reply": "Sure thing.", "leading_silence_ms": 40.0, "ms_per_char": 20.0},
        "wire": {"timer": "spin"},
    }
}


def realtime_pipeline(em: Emulators, name: str = "emulated-openai-realtime", **s2s: Any) -> Any:
    """The shipped pipeline file, pointed at ``em``'s port (``s2s`` overrides its table)."""
    path = ROOT / "pipelines" / f"{name}.toml"
    data = tomllib.loads(path.read_text())
    server = next(iter(em.servers.values()))
    data["s2s"]["base_url"] = data["s2s"]["base_url"].replace(
        f"127.0.0.1:{server.emulator.default_port}", f"127.0.0.1:{server.port}"
    )
    data["s2s"].update(s2s)
    if data["s2s"].get("turn_detection") == "none":
        data["s2s"].pop("vad", None)  # no server VAD: its settings are refused (issue #30)
    return parse_pipeline(data, path=path)


def _fixture() -> Any:
    return next(f for f in load_fixtures(default_fixtures_dir()) if f.id == "book_table")


@pytest.mark.e2e
@pytest.mark.parametrize("turn_detection", ["server_vad", "none"])
async def test_realtime_twin_runs_turns_with_every_s2s_milestone(
    turn_detection: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    fixture = _fixture()
    async with Emulators(["openai-realtime"], profile=PROFILE, seed=1) as em:
        runner = Runner(realtime_pipeline(em, turn_detection=turn_detection), [fixture], tmp_path)
        outcome = await runner.run(plan_turns([fixture.id, fixture.id], warmup=0))
        truths = em.truth.select("openai-realtime", "realtime")
        assert em.errors == []
    assert len(outcome.turns) == 2
    assert len(truths) == 2  # one session per turn, each opened before its turn
    for turn, truth in zip(outcome.turns, truths, strict=True):
        assert turn.ok, turn.failure_reason
        assert turn.extra["kind"] == "s2s"
        assert not turn.cold
        assert turn.reply == "Sure thing."
        want = {"speech_end", "endpoint", "response_start", "first_text", "first_audio"}
        want |= {"first_audible", "response_done", "output_first_audible"}
        if turn_detection == "server_vad":
            want.add("server_speech_start")
        assert want <= set(turn.milestones), turn.milestones
        assert tuple(turn.segments) == S2S_SEGMENTS
        assert sum(turn.segments.values()) == turn.e2e_ns
        assert abs(turn.segments["leading_silence"] / MS - 40) <= 2, turn.segments
        # Measured vs ground truth (same CLOCK_MONOTONIC): the first audio arrives within
        # 2 ms of its write, the model segment is the injected 180 ms within 2 ms.
        first_audio = turn.t0_ns + turn.milestones["first_audio"]
        delivery = first_audio - truth.marks["first_audio_written"]
        assert 0 <= delivery <= 2 * MS, delivery
        if turn_detection == "server_vad":
            endpoint = turn.t0_ns + turn.milestones["endpoint"]
            assert 0 <= endpoint - truth.marks["speech_stopped_written"] <= 2 * MS
            assert abs(turn.segments["model"] / MS - 180) <= 2, turn.segments
        else:
            # voicelat endpointed: the commit went out at the endpoint, the emulator read it.
            assert "trigger_received" in truth.marks
            assert turn.segments["model"] / MS >= 180
        assert turn.figures["s2s_usage_output_tokens"] > 0
    summary = outcome.summary
    assert summary["segments"]["model"]["n"] == 2
    assert summary["stages"]["s2s"]["stage"] == "openai-realtime"


async def test_refused_voice_fails_the_turn_with_the_servers_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "k")
    fixture = _fixture()
    async with Emulators(["openai-realtime"], profile=PROFILE, seed=1) as em:
        runner = Runner(realtime_pipeline(em, voice="nobody"), [fixture], tmp_path)
        with pytest.raises(Exception, match="every turn failed"):
            await runner.run(plan_turns([fixture.id], warmup=0))
    (turn,) = runner.turns
    assert turn.failed and turn.failure_stage == "s2s"
    assert "Invalid value: 'nobody'" in (turn.failure_reason or ""), turn.failure_reason
    assert "\n" not in (turn.failure_reason or "")


@pytest.mark.e2e
async def test_error_event_mid_reply_is_a_failed_turn_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "k")
    fixture = _fixture()
    profile = {
        "openai-realtime": {
            **PROFILE["openai-realtime"],
            "content": {
                **PROFILE["openai-realtime"]["content"],
                "error_code": "rate_limit_exceeded",
            },
            "faults": {"error_event": {"p": 1.0, "after": 2}},
        }
    }
    async with Emulators(["openai-realtime"], profile=profile, seed=1) as em:
        runner = Runner(realtime_pipeline(em), [fixture], tmp_path)
        with pytest.raises(Exception, match="every turn failed"):
            await runner.run(plan_turns([fixture.id, fixture.id], warmup=0))
    assert len(runner.turns) == 2  # the first failure did not stop the run
    for turn in runner.turns:
        assert turn.failed
        assert "Rate limit reached" in (turn.failure_reason or ""), turn.failure_reason
        assert "rate_limit_exceeded" in (turn.failure_reason or "")


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ({"close_1011": {"p": 1.0, "after": 2}}, "closed the websocket before response.done: 1011"),
        (
            {"stall": {"p": 1.0, "after": 1, "seconds": 4.0}},
            "after the input ended (read timeout; last event: response.output_audio_transcript.delta)",
        ),
    ],
)
async def test_a_close_or_a_stall_mid_reply_is_one_line_on_the_failed_turn(
    fault: dict[str, Any], expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "k")
    fixture = _fixture()
    profile = {"openai-realtime": {**PROFILE["openai-realtime"], "faults": fault}}
    async with Emulators(["openai-realtime"], profile=profile, seed=1) as em:
        runner = Runner(realtime_pipeline(em, timeout_s=2.0), [fixture], tmp_path)
        with pytest.raises(Exception, match="every turn failed"):
            await runner.run(plan_turns([fixture.id], warmup=0))
    (turn,) = runner.turns
    assert turn.failed and turn.failure_stage == "s2s"
    assert expected in (turn.failure_reason or ""), turn.failure_reason
    assert "first_audio" in turn.milestones  # it failed mid-reply, after audio started
