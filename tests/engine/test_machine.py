"""The machine sampler on the real /proc: intervals back to back on the run's clock, the
measuring thread's and each server's CPU time and run-queue wait; two CPU-bound processes
pinned to one core wait for it half the time, and the trust verdict names that."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.emulated_run import finish, popen, run_args, serving, wait_for
from voicelat.core.summaries.diagnostics import assess_trust
from voicelat.engine.machine import MachineSampler, server_pids

pytestmark = pytest.mark.skipif(not Path("/proc/self/schedstat").exists(), reason="needs Linux")

_SPIN = "import time\nend = time.monotonic() + 30\nwhile time.monotonic() < end: pass\n"


@pytest.fixture
def spinners() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Two CPU-bound processes pinned to the same core."""
    core = min(os.sched_getaffinity(0))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _SPIN], preexec_fn=lambda: os.sched_setaffinity(0, {core})
        )
        for _ in range(2)
    ]
    try:
        yield procs
    finally:
        for p in procs:
            p.kill()
            p.wait(5)


def test_server_pids_from_the_stack_info() -> None:
    info = {"stt": {"pid": 12}, "llm": {"pid": None}, "tts": {"pid": True}, "x": "y"}
    assert server_pids(info) == {"stt": 12}


def test_samples_are_back_to_back_with_the_servers_and_the_measuring_thread(
    spinners: list[subprocess.Popen[bytes]],
) -> None:
    sampler = MachineSampler(
        time.perf_counter_ns,
        {"llm": spinners[0].pid, "gone": 2**22 + 7},  # no such pid: left out
        period_s=0.25,
    )
    sampler.start()
    time.sleep(1.6)
    samples = sampler.stop()
    assert len(samples) >= 4
    for a, b in itertools.pairwise(samples):
        assert a.end_ns == b.start_ns  # back to back on the run's clock
    for s in samples:
        names = {p.name for p in s.processes}
        assert names == {"voicelat", "llm"}
        assert s.cores == os.cpu_count() and s.cpu_ticks > 0 and s.load1_milli >= 0
    llm = [p for s in samples for p in s.processes if p.name == "llm"]
    wall = samples[-1].end_ns - samples[0].start_ns
    cpu = sum(p.cpu_ns for p in llm)
    wait = sum(p.runq_wait_ns for p in llm)
    # sharing one core with the other spinner: it ran at most about half the time, and waited
    # for the core while the other ran (other work on a shared machine only adds to the wait)
    assert 0 < cpu < 0.75 * wall, (cpu, wall)
    assert wait > 0.5 * cpu, (wait, cpu)
    trust = assess_trust([], [], machine=samples)
    assert not trust["trustworthy"]
    assert trust["checks"]["llm_runq_wait_share"] > 0.2
    messages = " ".join(r["message"] for r in trust["reasons"])
    assert "llm waited for a CPU" in messages, trust["reasons"]


@pytest.mark.e2e
def test_a_run_records_the_machine_in_its_trust_section(tmp_path: Path) -> None:
    with serving() as (url, _):
        out = tmp_path / "out"
        proc = popen("run", *run_args(tmp_path, url, out, turns=1))
        lines = wait_for(proc, "1/1", limit_s=90)
        stderr = finish(proc, lines)
    assert proc.returncode == 0, stderr
    checks = json.loads((out / "summary.json").read_text())["trust"]["checks"]
    assert checks["machine_samples"] >= 1  # a turn lasts seconds: one sample a second
    assert 0 <= checks["voicelat_runq_wait_share"] <= 1
    for key in ("machine_load_per_core_max", "machine_steal_share", "machine_io_stall_share"):
        assert checks[key] >= 0
