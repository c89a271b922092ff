"""The kernel's netem (engine/netem.py): a namespace with a veth pair and netem on both ends.
Where netem cannot run (no root/CAP_NET_ADMIN, no iproute2, a kernel without sch_netem) the
tests that need it skip with the one-line reason :func:`netem_problem` gives; the namespace
housekeeping runs wherever ``ip netns`` does."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from voicelat.core.base.errors import ConfigError
from voicelat.core.base.network import Direction, NetworkProfile
from voicelat.engine.netem import NetemNamespace, netem_problem, remove_stale

D_MS = 25.0
PROBLEM = netem_problem()
needs_netem = pytest.mark.skipif(PROBLEM is not None, reason=f"netem unavailable: {PROBLEM}")
ECHO = Path(__file__).with_name("http_echo.py")


def _ip_netns_works() -> bool:
    if shutil.which("ip") is None or os.geteuid() != 0:
        return False
    return subprocess.run(["ip", "netns", "list"], capture_output=True).returncode == 0


def _namespaces() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split(" ")[0] for line in out.splitlines()]


def test_the_problem_is_one_line_or_none() -> None:
    assert PROBLEM is None or ("\n" not in PROBLEM and PROBLEM)


@pytest.mark.skipif(PROBLEM is None, reason="netem is usable here: nothing to refuse")
def test_a_namespace_is_refused_with_the_reason_and_the_fallback() -> None:
    with pytest.raises(ConfigError, match=r"netem is unavailable: .*; the relay is the fallback"):
        NetemNamespace(NetworkProfile("x", up=Direction(delay_ms=5)))


def _dead_pid() -> int:
    pid = 4_000_000
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except PermissionError:
            pass
        pid += 1


@pytest.mark.skipif(not _ip_netns_works(), reason="needs root and ip netns (iproute2)")
def test_a_namespace_left_by_a_killed_run_is_removed_on_the_next_start() -> None:
    stale = f"vlat{_dead_pid()}"
    subprocess.run(["ip", "netns", "add", stale], check=True)
    mine = f"vlat{os.getpid()}"  # a live run's namespace is left alone
    subprocess.run(["ip", "netns", "add", mine], check=True)
    try:
        removed = remove_stale()
        assert stale in removed and mine not in removed
        assert stale not in _namespaces() and mine in _namespaces()
    finally:
        subprocess.run(["ip", "netns", "del", stale], capture_output=True)
        subprocess.run(["ip", "netns", "del", mine], capture_output=True)


def _exchange_times(host: str, port: int, n: int = 21) -> list[float]:
    request = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nping"
    out = []
    with socket.create_connection((host, port)) as s:
        for _ in range(n + 1):
            t0 = time.perf_counter_ns()
            s.sendall(request)
            got = b""
            while not got.endswith(b"ping"):
                got += s.recv(4096)
            out.append((time.perf_counter_ns() - t0) / 1e6)
    return out[1:]


def _echo_in(ns: NetemNamespace) -> tuple[subprocess.Popen[str], int]:
    proc = ns.popen([sys.executable, str(ECHO), ns.ns_ip], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


@needs_netem
def test_netem_request_response_takes_two_one_way_delays_more() -> None:
    clean = NetworkProfile("lan", up=Direction(delay_ms=0.001), down=Direction(delay_ms=0.001))
    delayed = NetworkProfile("d", up=Direction(delay_ms=D_MS), down=Direction(delay_ms=D_MS))
    p50 = {}
    for name, profile in (("clean", clean), ("delayed", delayed)):
        with NetemNamespace(profile) as ns:
            proc, port = _echo_in(ns)
            try:
                p50[name] = statistics.median(_exchange_times(ns.ns_ip, port))
            finally:
                proc.terminate()
                proc.wait(5)
    assert abs(p50["delayed"] - p50["clean"] - 2 * D_MS) <= 2.0, p50


@needs_netem
def test_netem_never_leaves_an_impaired_interface_even_when_the_run_is_killed() -> None:
    code = (
        "import sys, time\n"
        "from voicelat.core.base.network import Direction, NetworkProfile\n"
        "from voicelat.engine.netem import NetemNamespace\n"
        "ns = NetemNamespace(NetworkProfile('k', up=Direction(delay_ms=5))).open()\n"
        "print(ns.ns, ns.host_if, flush=True)\n"
        "time.sleep(60)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    name, host_if = child.stdout.readline().split()
    assert name in _namespaces()
    child.send_signal(signal.SIGKILL)  # no finally, no atexit: the next start cleans up
    child.wait(5)
    with NetemNamespace(NetworkProfile("next", up=Direction(delay_ms=1))) as ns:
        assert name in ns.stale and name not in _namespaces()
    links = subprocess.run(["ip", "link", "show", host_if], capture_output=True)
    assert links.returncode != 0  # the veth pair went with its namespace
    assert ns.ns not in _namespaces()


def test_serve_under_netem_where_it_cannot_run_is_one_line_and_exit_2() -> None:
    if PROBLEM is None:
        pytest.skip("netem is usable here: nothing to refuse")
    from tests.helpers import voicelat

    r = voicelat("serve", "openai", "--port", "0", "--network", "4g", timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip() == (
        f"voicelat: error: netem is unavailable: {PROBLEM}; the relay is the fallback "
        "(`voicelat run --network PROFILE` relays the stages' connections)"
    )


@needs_netem
def test_serve_under_netem_listens_in_the_namespace_and_cleans_up() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "voicelat", "serve", "openai", "--port", "0", "--network", "4g"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        line = proc.stdout.readline()
        assert line.startswith("openai http://10.213."), line
        note = proc.stderr.readline()
        assert "netem in namespace vlat" in note
        name = note.split("namespace ")[1].split(" ")[0]
        assert name in _namespaces()
    finally:
        proc.terminate()
        proc.wait(15)
    assert name not in _namespaces()
