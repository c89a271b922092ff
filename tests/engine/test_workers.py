"""``--workers N``: sessions sharded over real worker processes (spawn) against the emulated
OpenAI twin on loopback; one turns.jsonl and one summary; a killed worker's turns accounted for."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import emulated_openai_pipeline
from voicelat.core.base.plan import plan_turns
from voicelat.core.base.turn import Turn
from voicelat.core.measure.schedule import Load, arrival_offsets_ns
from voicelat.core.summaries.summary import build_summary
from voicelat.emulate import Emulators
from voicelat.engine.job import execute_run
from voicelat.engine.request import LoadRequest, PlanRequest, RunRequest
from voicelat.engine.workers import (
    WorkerPool,
    effective_workers,
    shard_load,
    shard_plan,
    shard_schedule,
)
from voicelat.files.fixtures import Fixture, default_fixtures_dir, load_fixtures
from voicelat.files.pipeline import Pipeline
from voicelat.files.results import turn_from_json

MS = 1_000_000
PROFILE = {
    "openai": {
        "latency": {"headers": 5, "ttft": 40, "token": 5, "stt_first": 20, "stt_final": 40,
                    "tts_first_audio": 30, "tts_chunk": 5},
        "content": {"leading_silence_ms": 30.0, "reply": "Sure.", "ms_per_char": 10.0},
    }
}  # fmt: skip


def _pipeline(em: Emulators) -> Pipeline:
    pipeline: Pipeline = emulated_openai_pipeline(em)
    return pipeline


def _fixtures() -> list[Fixture]:
    return [f for f in load_fixtures(default_fixtures_dir()) if f.id in ("book_table", "call_mom")]


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# -- sharding --------------------------------------------------------------------------------
def test_the_plan_is_dealt_round_robin_and_every_turn_runs_once() -> None:
    plan = plan_turns(["a", "b", "c"], turns=7, warmup=3)
    shares = shard_plan(plan, 2)
    indices = sorted(p.index for share in shares for p in share)
    assert indices == sorted(p.index for p in plan)
    assert [sum(p.warmup for p in s) for s in shares] == [2, 1]
    assert [len(s) for s in shares] == [6, 4]


def test_the_load_is_split_and_one_schedule_is_dealt() -> None:
    closed = Load(concurrency=5)
    assert [shard_load(closed, 2, k).concurrency for k in (0, 1)] == [3, 2]
    open_ = Load(rate_per_s=10.0, arrival="poisson", seed=3)
    assert shard_load(open_, 2, 1).rate_per_s == 5.0
    plan = plan_turns(["a"], turns=9, warmup=1)
    shares = shard_schedule(plan, open_, 2)
    merged = sorted(x for share in shares for x in share)
    assert merged == sorted(arrival_offsets_ns(9, 10.0, "poisson", 3))  # the same draw
    assert shares[0][:2] == [merged[0], merged[2]]


def test_too_many_workers_warns_with_the_reason() -> None:
    n, warning = effective_workers(Load(concurrency=2), 4)
    assert n == 2 and warning is not None and "2 session(s)" in warning
    cores = os.cpu_count() or 1
    n, warning = effective_workers(Load(concurrency=64), cores + 1)
    assert n == cores + 1 and warning is not None and f"{cores} cores" in warning
    assert effective_workers(Load(concurrency=4), 1) == (1, None)


# -- real worker processes -------------------------------------------------------------------
@pytest.mark.e2e
async def test_two_workers_write_one_turns_file_and_one_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the job, as ``voicelat run --workers 2 --concurrency 4`` runs it."""
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    async with Emulators(["openai"], profile=PROFILE, seed=1, thread=True) as em:
        pipeline = _pipeline(em)
        out = tmp_path / "run"
        request = RunRequest(
            out_dir=out,
            plan=PlanRequest(turns=8, warmup=2),
            load=LoadRequest(concurrency=4),
            workers=2,
            argv=("voicelat", "run"),
            pipeline=pipeline,
            fixtures=tuple(_fixtures()),
        )
        outcome = await asyncio.to_thread(execute_run, request, _Seen())
    turns = _lines(out / "turns.jsonl")
    summary = json.loads((out / "summary.json").read_text())
    assert len(turns) == 10 == len(outcome.turns) == summary["run"]["planned_turns"]
    assert sorted(t["index"] for t in turns) == list(range(10))  # each turn once
    assert all(not t["failed"] for t in turns), [t["failure"] for t in turns]
    assert {t["extra"]["worker"] for t in turns} == {0, 1}
    measured = [t for t in turns if not t["warmup"]]
    assert sorted({t["extra"]["session"] for t in measured}) == [0, 1, 2, 3]  # global ids
    workers = summary["run"]["workers"]
    assert [w["turns_returned"] for w in workers] == [5, 5]
    assert all(w["turns_lost"] == 0 and w["exitcode"] == 0 for w in workers)
    assert len({w["pid"] for w in workers}) == 2 and os.getpid() not in {w["pid"] for w in workers}
    assert summary["run"]["load"]["sessions_opened"] == 4
    # both workers' loop-lag samples feed the trust section
    assert summary["loop_lag"]["n"] > 0 and "trust" in summary
    assert (out / "workers" / "w0" / "turns.jsonl").exists()
    # The parent streamed the workers' turns into one accumulator, keeping none of them for
    # it: its summary is build_summary's of the merged turns file (loop lag and trust aside:
    # the workers' probe samples are not in the file).
    expected = build_summary(
        [turn_from_json(t) for t in turns],
        run=summary["run"],
        pipeline=summary["pipeline"],
        fixtures=summary["fixtures"],
        stages=summary["stages"],
        budget=summary["budget"],
    )
    for key in ("counts", "e2e", "segments", "figures", "spans", "waterfall", "failures"):
        assert summary[key] == expected[key], key
    assert summary["quantiles"] == {"mode": "exact"}


class _Seen:
    """An observer that remembers the turns (called on the parent's thread)."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []

    def turn_started(self, planned: Any, total: int) -> None:
        return None

    def milestone(self, index: int, name: str, t_rel_ns: int) -> None:
        return None

    def turn_finished(self, turn: Turn, total: int) -> None:
        self.turns.append(turn)


class _KillWorkerOne(_Seen):
    def __init__(self) -> None:
        super().__init__()
        self.pool: WorkerPool | None = None

    def turn_finished(self, turn: Turn, total: int) -> None:
        super().turn_finished(turn, total)
        if self.pool is not None and turn.extra.get("worker") == 1 and not turn.failed:
            pid = self.pool.reports[1].pid
            if pid and len([t for t in self.turns if t.extra.get("worker") == 1]) == 1:
                os.kill(pid, signal.SIGKILL)


# A regression hangs rather than fails (the survivor blocked on a queue lock the dead worker
# held, 1 run in 4 under load before each worker had its own queue): fail it in minutes.
@pytest.mark.e2e
@pytest.mark.timeout(180)
async def test_a_killed_worker_has_its_turns_failed_with_the_reason_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    observer = _KillWorkerOne()
    async with Emulators(["openai"], profile=PROFILE, seed=1, thread=True) as em:
        pool = WorkerPool(_pipeline(em), _fixtures(), tmp_path / "run", 2, observer=observer)
        observer.pool = pool
        plan = plan_turns(["book_table", "call_mom"], turns=6, warmup=2)
        outcome = await asyncio.to_thread(pool.run, plan, Load(concurrency=2))
    turns = _lines(tmp_path / "run" / "turns.jsonl")
    assert sorted(t["index"] for t in turns) == list(range(8))  # every turn accounted for
    w0 = [t for t in turns if t["extra"]["worker"] == 0]
    w1 = [t for t in turns if t["extra"]["worker"] == 1]
    assert len(w0) == 4 and all(not t["failed"] for t in w0)  # the other worker went on
    lost = [t for t in w1 if t["failed"]]
    assert len(w1) == 4 and len(lost) == 3
    assert all(t["failure"]["stage"] == "worker" for t in lost)
    assert all("worker 1 (pid" in t["failure"]["reason"] for t in lost)
    assert all("exit code -9" in t["failure"]["reason"] for t in lost)
    report = outcome.summary["run"]["workers"][1]
    assert report["exitcode"] == -9 and report["turns_lost"] == 3 and report["turns_returned"] == 1


@pytest.mark.e2e
async def test_an_open_loop_over_two_workers_follows_one_schedule_from_a_shared_epoch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    async with Emulators(["openai"], profile=PROFILE, seed=1, thread=True) as em:
        pool = WorkerPool(_pipeline(em), _fixtures(), tmp_path / "run", 2)
        plan = plan_turns(["book_table", "call_mom"], turns=6, warmup=2)
        load = Load(rate_per_s=4.0, arrival="constant")
        outcome = await asyncio.to_thread(pool.run, plan, load)
    measured = sorted((t for t in outcome.turns if not t.warmup), key=lambda t: t.index)
    assert len(measured) == 6 and all(t.ok for t in measured)
    intended = sorted(int(t.figures["intended_start_ns"] or 0) for t in measured)
    gaps = [b - a for a, b in itertools.pairwise(intended)]
    # one constant schedule of 250 ms gaps across both workers' processes (one clock)
    assert all(abs(g - 250 * MS) < MS for g in gaps), gaps
    assert {t.extra["worker"] for t in measured} == {0, 1}
