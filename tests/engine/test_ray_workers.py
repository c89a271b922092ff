"""``--ray``, the fast part: the errors users meet first (no answer at the address, no cluster
for ``auto``, Ray not installed) through the real command, placement and clock-offset
arithmetic, and the actor's protocol (ready, epoch, take) run for real against the emulator
on a plain event loop. The two-node cluster run is tests/engine/test_ray_cluster.py."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.engine.test_workers import PROFILE, _fixtures, _pipeline
from tests.helpers import ROOT, voicelat
from voicelat.core.base.errors import ConfigError, InfraError
from voicelat.core.base.plan import plan_turns
from voicelat.core.base.turn import Turn
from voicelat.core.measure.schedule import Load
from voicelat.emulate import Emulators
from voicelat.engine.ray_workers import (
    RayPool,
    RayWorker,
    check_answers,
    clock_offset,
    place_workers,
    resolve_address,
    worker_env,
)
from voicelat.engine.workers import ShardedRun, WorkerJob, WorkerReport
from voicelat.files.pipeline import load_pipeline

PIPELINE = ROOT / "pipelines" / "emulated-openai.toml"
MS = 1_000_000


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again once the socket is: nothing answers


def _error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("voicelat: error:")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def test_a_ray_address_that_does_not_answer_is_one_line_and_exit_3(tmp_path: Path) -> None:
    port = _closed_port()
    proc = voicelat(
        "run", "-p", str(PIPELINE), "--ray", f"127.0.0.1:{port}", "-o", str(tmp_path / "r"),
        "--no-tui", env={"VOICELAT_EMULATOR_KEY": "k"}, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    line = _error_line(proc.stderr)
    assert f"Ray cluster at 127.0.0.1:{port} does not answer (connection refused)" in line


def test_ray_auto_without_a_cluster_says_how_to_start_one(tmp_path: Path) -> None:
    env = {"VOICELAT_EMULATOR_KEY": "k", "RAY_ADDRESS": "", "TMPDIR": str(tmp_path)}
    proc = voicelat(
        "run", "-p", str(PIPELINE), "--ray", "auto", "-o", str(tmp_path / "r"), "--no-tui",
        env=env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    assert "no Ray cluster found" in _error_line(proc.stderr)
    assert "ray start --head" in proc.stderr


def test_without_ray_installed_the_error_says_to_install_the_extra(tmp_path: Path) -> None:
    # Ray hidden: a None entry in sys.modules makes `import ray` raise ImportError.
    code = (
        "import sys; sys.modules['ray'] = None; from voicelat.cli.main import main; "
        f"sys.exit(main(['run', '-p', {str(PIPELINE)!r}, '--ray', 'auto', "
        f"'-o', {str(tmp_path / 'r')!r}, '--no-tui']))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "VOICELAT_EMULATOR_KEY": "k"},
        cwd=ROOT,
    )
    assert proc.returncode == 2, proc.stderr
    assert "install voicelat[ray]" in _error_line(proc.stderr)


def test_bad_addresses_are_refused_before_ray_is_asked() -> None:
    with pytest.raises(ConfigError, match="HOST:PORT"):
        check_answers("127.0.0.1")
    with pytest.raises(ConfigError, match="Ray Client"):
        check_answers("ray://127.0.0.1:10001")
    with pytest.raises(InfraError, match="does not answer"):
        check_answers(f"127.0.0.1:{_closed_port()}", timeout_s=1.0)
    assert resolve_address("10.0.0.5:6379") == "10.0.0.5:6379"


def test_workers_are_placed_round_robin_and_share_a_small_node() -> None:
    nodes = [("a", 1.0), ("b", 4.0)]
    assert place_workers(nodes, 2) == [("a", 1.0), ("b", 1.0)]
    # three workers on a 1-CPU node: each reserves a third, so none waits for a CPU forever
    assert place_workers(nodes, 6) == [("a", 0.3333), ("b", 1.0)] * 3


def test_the_clock_offset_comes_from_the_shortest_round_trip() -> None:
    # worker clock = parent + 1000 ns; the 40 ns round trip wins over the slow 900 ns one
    samples = [(0, 1500, 900), (2000, 3020, 2040)]
    assert clock_offset(samples) == (1000, 20)


def test_the_workers_get_the_key_variables_the_pipeline_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "sekret")
    monkeypatch.setenv("UNRELATED_SECRET", "no")
    env = worker_env(load_pipeline(PIPELINE))
    assert env["VOICELAT_EMULATOR_KEY"] == "sekret" and "UNRELATED_SECRET" not in env


def test_progress_shows_each_worker_by_node() -> None:
    pool = RayPool(load_pipeline(PIPELINE), [], Path("/nonexistent"), 2)
    assert isinstance(pool, ShardedRun)
    pool.reports = [WorkerReport(0, 5, node="1a2b3c4d5e"), WorkerReport(1, 5, node="ffee0011")]
    pool.reports[0].turns, pool.reports[1].turns, pool.reports[1].error = 5, 2, "lost"
    assert pool.progress_line(10) == "ray: 7/10 turns; w0@1a2b3c4d 5/5, w1@ffee0011 2/5 lost"


# The actor's protocol without Ray; CI's Ray step runs the same actors on a real cluster.
@pytest.mark.e2e
@pytest.mark.slow
async def test_the_actor_runs_its_share_after_the_epoch_and_hands_back_every_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RayWorker's own protocol, without Ray: ready after the warm-up, the measured turns
    from the epoch it is sent, the finished turns taken in batches, the probe's samples."""
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "k")
    async with Emulators(["openai"], profile=PROFILE, seed=1, thread=True) as em:
        plan = plan_turns(["book_table", "call_mom"], turns=2, warmup=1)
        job = WorkerJob(0, 1, _pipeline(em), _fixtures(), plan, Load(), tmp_path / "w0")
        worker = RayWorker()
        run = asyncio.create_task(worker.run(job, {"VOICELAT_EMULATOR_KEY": "k"}))
        taken: list[Turn] = []
        ready = finished = False
        while not ready:
            turns, ready, finished = await worker.take(0.2)
            taken += turns
        assert [t.warmup for t in taken] == [True]  # the warm-up ran before the epoch
        epoch = time.perf_counter_ns() + 300 * MS
        await worker.go(epoch)
        while not finished:
            turns, ready, finished = await worker.take(0.2)
            taken += turns
        lags, sessions, error, loop, cpu, calls = await run
    assert error is None and sessions == 1 and loop in ("asyncio", "uvloop") and cpu > 0
    assert calls == []  # single turns: no calls
    assert sorted(t.index for t in taken) == [0, 1, 2] and all(t.ok for t in taken)
    first_measured = min(int(t.figures["intended_start_ns"] or 0) for t in taken if not t.warmup)
    # The measured turns start from the epoch: never before it (go() came 300 ms early), and
    # at it but for the wake-up of the sleep to it. That lateness is the machine's (7.5 ms
    # under load in CI), so it is bounded far below a turn's length, not at a few ms.
    assert epoch <= first_measured < epoch + 200 * MS, first_measured - epoch
    assert len(lags) > 0


def test_a_run_over_ray_goes_through_the_same_job_as_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--ray`` reaches the pool through execute_run (the preflight refuses a dead address
    before any stage or server is started)."""
    from voicelat.engine import job

    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "k")
    from voicelat.engine.request import RunRequest

    request = RunRequest(
        pipeline_path=PIPELINE, out_dir=tmp_path / "r", ray=f"127.0.0.1:{_closed_port()}"
    )
    with pytest.raises(InfraError, match="does not answer"):
        job.execute_run(request)


def two_calls(tmp_path: Path) -> tuple[list[Any], list[Any], list[Any]]:
    """Two calls of a two-turn scenario: their fixtures, the planned calls and their turns."""
    from voicelat.core.base.plan import PlannedTurn
    from voicelat.engine.call import plan_calls
    from voicelat.files.scenario import load_scenario

    path = tmp_path / "two.toml"
    path.write_text(
        f'name = "two"\nfixtures = "{ROOT / "fixtures" / "calls"}"\n'
        '[[step]]\nsay = "short_01_weather"\ngap_ms = 300\n'
        '[[step]]\nsay = "short_02_tomorrow"\ngap_ms = 300\n',
        encoding="utf-8",
    )
    loaded = load_scenario(path)
    calls = plan_calls([loaded.scenario], repeat=2)
    plan = [PlannedTurn(c.first_index + i, f, 0, False)
            for c in calls for i, f in enumerate(c.scenario.fixture_ids())]  # fmt: skip
    return list(loaded.fixtures.values()), calls, plan


@pytest.mark.e2e
@pytest.mark.slow
async def test_an_actor_runs_whole_calls_and_hands_back_their_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--ray --scenario``: an actor's share is whole calls, as a worker process's is; its
    result carries their records, which the parent makes global (one calls.jsonl)."""
    from voicelat.core.calls.call import CALL_ID, CALL_TURN

    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "k")
    fixtures, calls, plan = two_calls(tmp_path)
    async with Emulators(["openai"], profile=PROFILE, seed=1, thread=True) as em:
        pool = RayPool(_pipeline(em), fixtures, tmp_path / "out", 1, calls=calls)
        (job,) = pool.jobs(plan, Load())
        worker = RayWorker()
        run = asyncio.create_task(worker.run(job, {"VOICELAT_EMULATOR_KEY": "k"}))
        taken: list[Turn] = []
        went = finished = False
        while not finished:
            turns, ready, finished = await worker.take(0.2)
            taken += turns
            if ready and not went:
                await worker.go(time.perf_counter_ns())
                went = True
        *_, error, _loop, _cpu, records = await run
    assert error is None
    assert sorted(t.index for t in taken) == [p.index for p in plan] and all(t.ok for t in taken)
    assert sorted((t.extra[CALL_ID], t.extra[CALL_TURN]) for t in taken) == [
        (c.call_id, n) for c in calls for n in (1, 2)
    ]
    assert [r["call_id"] for r in records] == [c.call_id for c in calls]
    # The parent takes them from the actor's result into one calls.jsonl's records.
    pool.reports = [WorkerReport(0, len(plan))]
    pool.reports[0].calls = records
    assert [r.call_id for r in pool.call_records()] == [c.call_id for c in calls]
