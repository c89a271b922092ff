"""Closed- and open-loop runs with in-process fake stages (no servers, real time): sessions,
intended vs actual starts, schedule lag, and the coordinated-omission figures of the summary."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from tests.engine.test_runner import FakeLLM, FakeSTT, FakeTTS, _pipeline, fixtures_dir
from voicelat.core.base.plan import plan_turns
from voicelat.core.measure.schedule import Load
from voicelat.engine.runner import Runner
from voicelat.files.fixtures import load_fixtures

__all__ = ["fixtures_dir"]  # the fixture, re-used from test_runner

MS = 1_000_000


def _runner(tmp_path: Path, fixtures_dir: Path) -> tuple[Runner, list[tuple[Any, ...]]]:
    fixtures = load_fixtures(fixtures_dir)
    built: list[tuple[Any, ...]] = []

    def stages(session: int) -> tuple[Any, Any, Any]:
        made = (FakeSTT(), FakeLLM(["Ok."], gap_s=0.02), FakeTTS())
        built.append((session, *made))
        return made

    runner = Runner(_pipeline(), fixtures, tmp_path / "out", session_stages=stages)
    return runner, built


@pytest.mark.e2e
def test_a_closed_loop_runs_sessions_side_by_side_each_with_its_own_stages(
    tmp_path: Path, fixtures_dir: Path
) -> None:
    runner, built = _runner(tmp_path, fixtures_dir)
    ids = [f.id for f in runner.fixtures]
    outcome = asyncio.run(runner.run(plan_turns(ids, turns=6, warmup=1), load=Load(concurrency=3)))
    assert sorted(s for s, *_ in built) == [0, 1, 2]
    measured = [t for t in outcome.turns if not t.warmup]
    assert len(measured) == 6 and all(t.ok for t in outcome.turns)
    # every session ran two measured turns, on its own STT instance
    assert sorted(t.extra["session"] for t in measured) == [0, 0, 1, 1, 2, 2]
    for session, stt, _, _ in built:
        ran = sum(1 for t in outcome.turns if t.extra["session"] == session)
        assert len(stt.frames_seen) == ran
    # side by side: each session's first measured turn starts while session 0's first runs;
    # staggered by a third of a (warm-up) turn each, so they do not run in lockstep
    firsts = sorted(measured, key=lambda t: t.t0_ns)[:3]
    assert sorted(t.extra["session"] for t in firsts) == [0, 1, 2]
    end0 = firsts[0].t0_ns + firsts[0].milestones["output_first_audible"]
    assert firsts[2].t0_ns < end0
    warm_len = next(t for t in outcome.turns if t.warmup).milestones["output_first_audible"]
    for a, b in itertools.pairwise(firsts):
        assert 0.5 * warm_len / 3 < b.t0_ns - a.t0_ns < 2 * warm_len / 3
    # the warm-up ended before any measured turn started
    warm = next(t for t in outcome.turns if t.warmup)
    assert all(t.t0_ns > warm.t0_ns + warm.milestones["output_first_audible"] for t in measured)
    for t in outcome.turns:
        # closed loop: intended = when the session was free; started within milliseconds
        assert 0 <= t.figures["schedule_lag_ns"] < 50 * MS  # type: ignore[operator]
        assert t.t0_ns - t.figures["intended_start_ns"] == t.figures["schedule_lag_ns"]  # type: ignore[operator]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["run"]["load"] == {
        "mode": "closed",
        "concurrency": 3,
        "sessions_opened": 3,
        "spin": False,  # several sessions share the loop: no busy-wait before frames
    }
    assert summary["e2e_from_intended"]["n"] == 6
    assert summary["schedule_lag"]["n"] == 6
    assert len((tmp_path / "out" / "turns.jsonl").read_text().splitlines()) == 7


@pytest.mark.e2e
def test_an_open_loop_starts_turns_on_schedule(tmp_path: Path, fixtures_dir: Path) -> None:
    runner, _ = _runner(tmp_path, fixtures_dir)
    ids = [f.id for f in runner.fixtures]
    load = Load(rate_per_s=4.0, arrival="constant")
    outcome = asyncio.run(runner.run(plan_turns(ids, turns=6, warmup=1), load=load))
    measured = sorted((t for t in outcome.turns if not t.warmup), key=lambda t: t.index)
    intended = [int(t.figures["intended_start_ns"]) for t in measured]  # type: ignore[arg-type]
    # 250 ms apart, to the nanosecond: the schedule, not the clock readings
    assert [b - a for a, b in itertools.pairwise(intended)] == [250 * MS] * 5
    for t in measured:
        assert 0 <= t.figures["schedule_lag_ns"] < 30 * MS  # type: ignore[operator]
    # turns last ~1 s and arrive every 250 ms: several sessions were in use at once
    assert len({t.extra["session"] for t in measured}) >= 3
    assert outcome.summary["run"]["load"]["mode"] == "open"


@pytest.mark.e2e
def test_an_open_loop_that_runs_out_of_sessions_reports_the_wait_as_schedule_lag(
    tmp_path: Path, fixtures_dir: Path
) -> None:
    runner, _ = _runner(tmp_path, fixtures_dir)
    ids = [f.id for f in runner.fixtures]
    # 10 turns/s offered, but one session that serves one ~1 s turn at a time: coordinated
    # omission in a nutshell. Every arrival still runs, late, and the lateness is kept.
    load = Load(rate_per_s=10.0, arrival="constant", max_sessions=1)
    outcome = asyncio.run(runner.run(plan_turns(ids, turns=4, warmup=0), load=load))
    lags = [int(t.figures["schedule_lag_ns"]) for t in sorted(outcome.turns, key=lambda t: t.index)]  # type: ignore[arg-type]
    assert lags == sorted(lags) and lags[-1] > 2_000 * MS
    s = outcome.summary
    assert s["e2e_from_intended"]["max"] > s["e2e"]["max"] + 2_000 * MS
    assert s["trust"]["trustworthy"] is False
    codes = [r["code"] for r in s["trust"]["reasons"]]
    # the schedule lag is the run's own reason; a busy machine may add its own (loop and pacer
    # lag, the machine checks), never a transport one
    assert "schedule_lag" in codes, codes
    busy = {"loop_lag", "pacer_lag", "machine_load", "machine_inflated", "machine_turns"}
    assert set(codes) <= {"schedule_lag", *busy}, codes


def test_the_default_run_is_one_session_and_records_its_start(
    tmp_path: Path, fixtures_dir: Path
) -> None:
    fixtures = load_fixtures(fixtures_dir)
    runner = Runner(_pipeline(), fixtures, tmp_path / "out")
    stages = (FakeSTT(), FakeLLM(["Ok."]), FakeTTS())
    runner.build_stages = lambda: stages  # type: ignore[method-assign]
    outcome = asyncio.run(runner.run(plan_turns([f.id for f in fixtures], turns=2, warmup=0)))
    assert [t.extra["session"] for t in outcome.turns] == [0, 0]
    assert all("schedule_lag_ns" in t.figures for t in outcome.turns)
    assert outcome.summary["run"]["load"]["concurrency"] == 1
    assert "trust" in outcome.summary and "loop_lag_p99_ns" in outcome.summary["trust"]["checks"]
