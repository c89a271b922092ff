"""``--ray`` on a REAL two-node Ray cluster on this machine (``ray start --head`` plus a second
``ray start --address``: two raylets, two node ids), against the emulated OpenAI twin: turns from
both nodes, one turns file and one summary equal to what the same turns give through the normal
summary, every planned turn exactly once, the actors' loop lag recorded, a lost actor's turns
accounted for, an open loop's one schedule kept across the nodes. The cluster is always
stopped (``ray stop --force``), and no Ray process may be left behind."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.ray_cluster import LocalRayCluster, ray_processes
from tests.cli.emulated_run import finish, popen, run_args, serving, wait_for
from tests.engine.test_workers import PROFILE, _fixtures, _lines, _pipeline, _Seen
from tests.helpers import ROOT
from voicelat.core.base.plan import plan_turns
from voicelat.core.base.turn import Turn
from voicelat.core.measure.schedule import Load
from voicelat.core.summaries.summary import build_summary
from voicelat.emulate import Emulators
from voicelat.engine.job import execute_run
from voicelat.engine.ray_workers import RayPool
from voicelat.engine.request import LoadRequest, PlanRequest, RunRequest
from voicelat.files.results import read_turns

pytestmark = pytest.mark.slow  # ~20 s to start the two nodes, then real turns on each
MS = 1_000_000


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalRayCluster]:
    # Each node labelled by its raylet's VOICELAT_REGION (docs/NETWORK.md, "Regions").
    c = LocalRayCluster(pythonpath=ROOT, regions=("eu-west", "us-east"))
    try:
        yield c.start()
    finally:
        c.stop()
        assert ray_processes() == [], "Ray processes left running"


def _cluster_nodes(address: str) -> set[str]:
    import ray

    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    try:
        return {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    finally:
        ray.shutdown()


async def test_a_run_over_two_ray_nodes_is_one_result_with_every_turn_once(
    cluster: LocalRayCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the job, as ``voicelat run --ray 127.0.0.1:6390 --concurrency 2`` runs it."""
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    monkeypatch.delenv("VOICELAT_LOOP", raising=False)
    async with Emulators(["openai"], profile=PROFILE, seed=1, thread=True) as em:
        pipeline = _pipeline(em)
        out = tmp_path / "run"
        request = RunRequest(
            out_dir=out,
            plan=PlanRequest(turns=4, warmup=2),
            load=LoadRequest(concurrency=2),
            ray=cluster.address,
            argv=("voicelat", "run"),
            pipeline=pipeline,
            fixtures=tuple(_fixtures()),
        )
        outcome = await asyncio.to_thread(execute_run, request, _Seen())
    turns = _lines(out / "turns.jsonl")
    summary = json.loads((out / "summary.json").read_text())
    # the plan split covers every turn exactly once
    assert (
        sorted(t["index"] for t in turns)
        == list(range(6))
        == sorted(t.index for t in outcome.turns)
    )
    assert all(not t["failed"] for t in turns), [t["failure"] for t in turns]
    # turns from both nodes, each turn naming its node and worker
    nodes = _cluster_nodes(cluster.address)
    assert len(nodes) == 2 and {t["extra"]["node"] for t in turns} == nodes
    assert {t["extra"]["worker"] for t in turns} == {0, 1}
    # each node's turns carry its own region label, and the summary has a row per region
    by_node = {t["extra"]["node"]: t["extra"].get("region") for t in turns}
    assert sorted(by_node.values()) == ["eu-west", "us-east"]
    assert {r: v["turns"] for r, v in summary["regions"].items()} == {"eu-west": 3, "us-east": 3}
    workers = summary["run"]["workers"]
    assert {w["node"] for w in workers} == nodes
    assert {w["node"]: w["region"] for w in workers} == by_node
    assert [w["turns_returned"] for w in workers] == [3, 3]
    assert all(w["turns_lost"] == 0 and w["exitcode"] == 0 for w in workers)
    assert os.getpid() not in {w["pid"] for w in workers}
    # each clock offset is estimated with its uncertainty (one machine: within it of 0)
    for w in workers:
        assert 0 < w["clock_offset_uncertainty_ns"] < 50 * MS
        assert abs(w["clock_offset_ns"]) <= w["clock_offset_uncertainty_ns"] + MS
    # the actors' loops were probed: their samples feed the merged trust section
    assert all(isinstance(w["loop_lag_p99_ns"], int) for w in workers)
    assert summary["loop_lag"]["n"] > 0 and "trust" in summary
    assert summary["loop_lag"]["max"] >= max(w["loop_lag_p99_ns"] for w in workers)
    assert summary["run"]["ray"]["nodes"] == 2
    # the actors' loop is the kind any run uses (asyncio by default), not Ray's uvloop
    assert summary["run"]["event_loop"] == "asyncio"
    # the merged summary is what the same turns give through the normal summary
    read, skipped = read_turns((out / "turns.jsonl").read_text().splitlines(), out)
    assert skipped == 0
    normal = build_summary(
        read,
        run=summary["run"],
        pipeline=summary["pipeline"],
        fixtures=summary["fixtures"],
        stages=summary["stages"],
        budget=pipeline.budget,
    )
    for key in ("counts", "e2e", "segments", "figures", "spans", "waterfall", "failures"):
        assert summary[key] == normal[key], key


class _KillWorkerOne(_Seen):
    def __init__(self) -> None:
        super().__init__()
        self.pool: RayPool | None = None

    def turn_finished(self, turn: Turn, total: int) -> None:
        super().turn_finished(turn, total)
        mine = [t for t in self.turns if t.extra.get("worker") == 1 and not t.failed]
        if self.pool and turn.extra.get("worker") == 1 and not turn.failed and len(mine) == 1:
            pid = self.pool.reports[1].pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)  # the actor's process: as if its node went away


async def test_a_lost_actor_keeps_its_finished_turns_and_the_rest_fail_with_the_reason(
    cluster: LocalRayCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    observer = _KillWorkerOne()
    async with Emulators(["openai"], profile=PROFILE, seed=1, thread=True) as em:
        pool = RayPool(
            _pipeline(em), _fixtures(), tmp_path / "run", 2, observer=observer,
            address=cluster.address,
        )  # fmt: skip
        observer.pool = pool
        plan = plan_turns(["book_table", "call_mom"], turns=4, warmup=2)
        outcome = await asyncio.to_thread(pool.run, plan, Load(concurrency=2))
    turns = _lines(tmp_path / "run" / "turns.jsonl")
    assert sorted(t["index"] for t in turns) == list(range(6))  # every turn accounted for
    w0 = [t for t in turns if t["extra"]["worker"] == 0]
    w1 = [t for t in turns if t["extra"]["worker"] == 1]
    assert len(w0) == 3 and all(not t["failed"] for t in w0)  # the other worker went on
    lost = [t for t in w1 if t["failed"]]
    assert len(w1) == 3 and len(lost) == 2
    assert all(t["failure"]["stage"] == "worker" for t in lost)
    assert all("worker 1 (node " in t["failure"]["reason"] for t in lost)
    assert all("Ray actor lost" in t["failure"]["reason"] for t in lost)
    assert all(t["extra"]["node"] == outcome.summary["run"]["workers"][1]["node"] for t in w1)
    report = outcome.summary["run"]["workers"][1]
    assert report["turns_lost"] == 2 and report["turns_returned"] == 1
    # Ray's "(raylet) A worker died" notice goes to stderr: stdout is --json's
    out = err = ""
    deadline = time.monotonic() + 10  # the notice comes on Ray's listener thread, a bit later
    while "(raylet)" not in err and time.monotonic() < deadline:
        captured = capfd.readouterr()
        out, err = out + captured.out, err + captured.err
        time.sleep(0.2)
    assert "(raylet)" in err and "(raylet)" not in out, (out[-500:], err[-500:])


async def test_an_open_loop_over_two_nodes_follows_one_schedule(
    cluster: LocalRayCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    async with Emulators(["openai"], profile=PROFILE, seed=1, thread=True) as em:
        pool = RayPool(_pipeline(em), _fixtures(), tmp_path / "run", 2, address=cluster.address)
        plan = plan_turns(["book_table", "call_mom"], turns=4, warmup=2)
        load = Load(rate_per_s=4.0, arrival="constant")
        outcome = await asyncio.to_thread(pool.run, plan, load)
    measured = sorted((t for t in outcome.turns if not t.warmup), key=lambda t: t.index)
    assert len(measured) == 4 and all(t.ok for t in measured)
    assert {t.extra["worker"] for t in measured} == {0, 1}
    workers: list[dict[str, Any]] = outcome.summary["run"]["workers"]
    # each node's intended starts are in its own clock: bring them to the parent's with the
    # estimated offset; the 250 ms gaps then hold within the offsets' uncertainty
    intended = sorted(
        int(t.figures["intended_start_ns"] or 0)
        - workers[int(t.extra["worker"])]["clock_offset_ns"]
        for t in measured
    )
    slack = sum(w["clock_offset_uncertainty_ns"] for w in workers) + MS
    gaps = [b - a for a, b in itertools.pairwise(intended)]
    assert all(abs(g - 250 * MS) < slack for g in gaps), (gaps, slack)


async def test_calls_over_two_nodes_are_whole_on_one_actor_each_and_in_one_calls_file(
    cluster: LocalRayCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--ray --scenario``: calls dealt whole to the actors of two nodes, one calls.jsonl."""
    from tests.engine.test_ray_workers import two_calls
    from voicelat.core.calls.call import CALL_ID
    from voicelat.files.results import read_calls

    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    fixtures, calls, plan = two_calls(tmp_path)
    async with Emulators(["openai"], profile=PROFILE, seed=1, thread=True) as em:
        pool = RayPool(
            _pipeline(em), fixtures, tmp_path / "run", 2,
            address=cluster.address, calls=calls,
        )  # fmt: skip
        outcome = await asyncio.to_thread(pool.run, plan, Load(concurrency=2))
    assert sorted(t.index for t in outcome.turns) == [p.index for p in plan]
    assert all(t.ok for t in outcome.turns)
    by_call: dict[str, set[int]] = {}
    for t in outcome.turns:
        by_call.setdefault(str(t.extra[CALL_ID]), set()).add(int(t.extra["worker"]))
    assert sorted(by_call) == [c.call_id for c in calls]
    assert all(len(w) == 1 for w in by_call.values())  # a call never spans actors
    assert {w for ws in by_call.values() for w in ws} == {0, 1}  # one call on each node
    assert [r.call_id for r in read_calls(tmp_path / "run")] == [c.call_id for c in calls]


def test_ctrl_c_keeps_every_finished_turn_and_writes_the_summary(
    cluster: LocalRayCluster, tmp_path: Path
) -> None:
    """SIGINT to a real ``voicelat run --ray`` after its first turn: exit 130, the summary
    says interrupted, every turn line written is whole, the actors are gone."""
    out = tmp_path / "out"
    with serving() as (url, _):
        args = run_args(tmp_path, url, out, turns=12)
        proc = popen("run", *args, "--ray", cluster.address, "--concurrency", "2")
        stdout = wait_for(proc, "/12]")
        proc.send_signal(signal.SIGINT)
        stderr = finish(proc, stdout)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr, stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["status"] == "interrupted"
    lines = _lines(out / "turns.jsonl")
    assert summary["counts"]["turns"] == len(lines) and len(lines) >= 1
    # the turns never run are not invented as failures (as with one process), only counted
    assert not [t for t in lines if t["failed"] and t["failure"]["stage"] == "worker"]
    workers = summary["run"]["workers"]
    assert sum(w["turns_returned"] + w["turns_lost"] for w in workers) == 12
    kept = [t for t in lines if not t["failed"]]
    assert len(kept) >= 1 and {t["extra"]["node"] for t in lines} <= _cluster_nodes(cluster.address)
    # the actors were killed: no voicelat worker left on the cluster
    assert not [p for p in ray_processes() if "RayWorker" in p]
