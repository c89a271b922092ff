"""The lean turn's options: ``[turn] busy_wait`` (off by default) and the event loop choice."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from tests.engine.test_runner import FakeLLM, FakeSTT, FakeTTS, _pipeline, fixtures_dir
from voicelat.core.base.errors import ConfigError
from voicelat.core.base.plan import plan_turns
from voicelat.engine.probes import LOOP_ENV, loop_kind, run_measuring_loop
from voicelat.engine.runner import Runner
from voicelat.files.fixtures import load_fixtures
from voicelat.files.pipeline import TurnConfig, load_pipeline

__all__ = ["fixtures_dir"]

BASE = """
[pipeline]
name = "p"
[stt]
stage = "openai-stt"
[llm]
stage = "openai"
[tts]
stage = "openai-tts"
"""


def test_busy_wait_is_off_by_default_and_a_bad_value_is_one_clear_line(tmp_path: Path) -> None:
    f = tmp_path / "p.toml"
    f.write_text(BASE)
    assert load_pipeline(f).turn.busy_wait is False
    f.write_text(BASE + "[turn]\nbusy_wait = true\n")
    assert load_pipeline(f).turn.busy_wait is True
    f.write_text(BASE + '[turn]\nbusy_wait = "yes"\n')
    with pytest.raises(ConfigError, match=r"busy_wait must be true or false"):
        load_pipeline(f)


@pytest.mark.e2e
@pytest.mark.parametrize("busy", [False, True])
def test_the_pacer_busy_waits_only_when_the_pipeline_asks(
    tmp_path: Path, fixtures_dir: Path, busy: bool
) -> None:
    fixtures = load_fixtures(fixtures_dir)
    pipeline = _pipeline(turn=replace(TurnConfig(timeout_s=5), busy_wait=busy))
    runner = Runner(pipeline, fixtures, tmp_path / "out")
    runner.build_stages = lambda: (FakeSTT(), FakeLLM(["Ok."]), FakeTTS())  # type: ignore[method-assign,assignment,return-value]
    outcome = asyncio.run(runner.run(plan_turns([f.id for f in fixtures], turns=2, warmup=0)))
    assert all(t.ok for t in outcome.turns)
    assert outcome.summary["run"]["load"]["spin"] is busy  # one session: off unless asked
    lag_p50 = [t.figures["pacer_lag_p50_ns"] for t in outcome.turns]
    assert all(isinstance(v, int) and v >= 0 for v in lag_p50)
    if busy:  # the spin lands frames within a fraction of a millisecond of their due time
        assert min(int(v or 0) for v in lag_p50) < 500_000, lag_p50


def test_the_event_loop_follows_voicelat_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    async def which() -> str:
        return type(asyncio.get_running_loop()).__module__.split(".")[0]

    monkeypatch.delenv(LOOP_ENV, raising=False)
    assert loop_kind() == "asyncio"  # uvloop is opt-in, installed or not
    monkeypatch.setenv(LOOP_ENV, "asyncio")
    assert loop_kind() == "asyncio" and run_measuring_loop(which()) == "asyncio"
    monkeypatch.setenv(LOOP_ENV, "bogus")
    with pytest.raises(ValueError, match="use auto, uvloop or asyncio"):
        loop_kind()
    pytest.importorskip("uvloop")
    monkeypatch.setenv(LOOP_ENV, "auto")
    assert loop_kind() == "uvloop" and run_measuring_loop(which()) == "uvloop"
