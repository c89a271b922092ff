"""``--workers N`` from the command line: absurd counts refused in one line, workers capped at
the plan, and worker processes that die with their parent, SIGKILL included (real processes:
``voicelat run`` against ``voicelat serve openai`` on loopback, pids checked in /proc)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.emulated_run import popen, run_args, serving, wait_for
from tests.helpers import ROOT
from voicelat.core.measure.schedule import Load
from voicelat.engine.workers import effective_workers


@pytest.fixture(scope="module")
def emulator() -> Iterator[str]:
    with serving() as (url, _):
        yield url


def test_workers_are_capped_at_the_plans_measured_turns() -> None:
    n, warning = effective_workers(Load(rate_per_s=5.0), 6, turns=2)
    assert n == 2 and warning is not None and "2 measured turn(s)" in warning
    n, warning = effective_workers(Load(concurrency=8), 6, turns=3)
    assert n == 3 and warning is not None and "using 3 worker(s)" in warning
    # the sessions cut first, then the plan: one line says both
    n, warning = effective_workers(Load(concurrency=4), 6, turns=2)
    assert n == 2 and warning is not None and "4 session(s)" in warning
    assert effective_workers(Load(concurrency=2), 2, turns=10) == (2, None)


@pytest.mark.e2e
@pytest.mark.parametrize("count", ["1000000000", "1025", "0", "-3", "two"])
def test_an_absurd_worker_count_is_one_line_exit_2(count: str, tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    proc = subprocess.run(
        [sys.executable, "-m", "voicelat", "run", "--workers", count, "--rate", "5", "--out", out],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--workers" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.e2e
def test_six_workers_for_a_two_turn_plan_start_two(tmp_path: Path, emulator: str) -> None:
    out = tmp_path / "out"
    args = run_args(tmp_path, emulator, out, turns=2)
    proc = subprocess.run(
        [sys.executable, "-m", "voicelat", "run", *args, "--workers", "6", "--rate", "4"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "VOICELAT_EMULATOR_KEY": "k", "PYTHONPATH": str(ROOT)},
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    assert "plan's 2 measured turn(s): using 2 worker(s)" in proc.stderr, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert [w["planned_turns"] for w in summary["run"]["workers"]] == [1, 1]


def _children(pid: int) -> list[int]:
    """The live child processes of ``pid`` (from /proc: every thread's children)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _gone_within(pids: list[int], limit_s: float) -> list[int]:
    deadline = time.monotonic() + limit_s
    while (alive := [p for p in pids if _alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


@pytest.mark.e2e
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigkill_of_a_workers_parent_takes_its_workers_with_it(
    tmp_path: Path, emulator: str
) -> None:
    out = tmp_path / "out"
    proc = popen("run", *run_args(tmp_path, emulator, out), "--workers", "2", "-c", "2")
    workers: list[int] = []
    try:
        wait_for(proc, "1/30")  # a turn finished: both workers run
        workers = [p for p in _children(proc.pid) if "spawn_main" in _cmdline(p)]
        assert len(workers) == 2, [_cmdline(p) for p in _children(proc.pid)]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)  # not its stderr: a worker left behind holds that pipe open
        # They used to run on, 10 s later still there, loading the servers for nobody.
        assert _gone_within(workers, 10) == []
    finally:
        for pid in workers:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_die_with_parent_ends_a_process_whose_parent_was_killed(tmp_path: Path) -> None:
    """The mechanism alone: parent P forks worker W, which arms ``die_with_parent``; SIGKILL of
    P ends W within a second (a W that never armed it lives on: the control)."""
    script = textwrap.dedent(
        """
        import os, sys, time
        from voicelat.engine.workers import die_with_parent
        parent = os.getpid()
        for arm in (True, False):
            if os.fork() == 0:
                if arm:
                    die_with_parent(parent)
                os.write(1, f"{os.getpid()} {arm}\\n".encode())  # one write: no interleaving
                time.sleep(60)
                os._exit(0)
        time.sleep(60)
        """
    )
    middle = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert middle.stdout is not None
    pids = {}
    try:
        for _ in range(2):
            pid, arm = middle.stdout.readline().split()
            pids[arm] = int(pid)
        middle.kill()
        middle.wait(10)
        assert _gone_within([pids["True"]], 5) == []
        assert _alive(pids["False"])  # without it, the orphan runs on
    finally:
        for pid in pids.values():
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
