"""Relay vs netem: the same profile applied both ways gives the same delay and jitter.

    python bench/network_agree.py [--exchanges 101] [--delay-ms 25] [--jitter-ms 5]

A TCP echo server (its own process) is reached two ways under each profile: through the
in-process relay (engine/relay.py, on loopback) and, where the kernel's netem can run (root or
CAP_NET_ADMIN, iproute2, sch_netem), inside a network namespace over a veth pair with netem on
both ends (engine/netem.py). Each exchange is a 160-byte request echoed back over a kept-alive
connection (+2d expected). Prints P10/P50/P90 of the round trip per way and profile and the
P50 difference; exit 0 when every profile agrees within 2 ms at P50 (and the relay alone
matches 2d within 2 ms), 1 when one does not, 3 when netem cannot run here (the relay's
numbers are still printed, with the reason).
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import machine_line
from voicelat.core.base.network import Direction, NetworkProfile
from voicelat.engine.netem import NetemNamespace, netem_problem
from voicelat.engine.network import RelayProcess

_ECHO = """
import socket, sys, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 0)); s.listen(16); print(s.getsockname()[1], flush=True)
def serve(c):
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while d := c.recv(65536):
        c.sendall(d)
while True:
    threading.Thread(target=serve, args=(s.accept()[0],), daemon=True).start()
"""
TOL_MS = 2.0


@contextlib.contextmanager
def _echo(host: str, ns: NetemNamespace | None = None) -> Iterator[int]:
    cmd = [sys.executable, "-c", _ECHO, host]
    proc = (
        ns.popen(cmd, stdout=subprocess.PIPE, text=True)
        if ns
        else subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    )
    assert proc.stdout is not None
    try:
        yield int(proc.stdout.readline())
    finally:
        proc.terminate()
        proc.wait(5)


def _rtts(host: str, port: int, n: int) -> list[float]:
    out = []
    with socket.create_connection((host, port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(n + 1):
            t0 = time.perf_counter_ns()
            s.sendall(bytes(160))
            got = 0
            while got < 160:
                got += len(s.recv(4096))
            if i:  # the first one warms the path
                out.append((time.perf_counter_ns() - t0) / 1e6)
            time.sleep(0.02)  # a frame's pace: netem's jitter draws are per packet
    return out


def _pcts(xs: list[float]) -> tuple[float, float, float]:
    q = statistics.quantiles(xs, n=10)
    return q[0], statistics.median(xs), q[-1]


def _relay(profile: NetworkProfile, n: int) -> list[float]:
    with _echo("127.0.0.1") as port, RelayProcess(profile, [("tcp", "127.0.0.1", port)]) as r:
        return _rtts(*r.listen[0], n)


def _netem(profile: NetworkProfile, n: int) -> list[float]:
    with NetemNamespace(profile) as ns, _echo(ns.ns_ip, ns) as port:
        return _rtts(ns.ns_ip, port, n)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exchanges", type=int, default=101)
    ap.add_argument("--delay-ms", type=float, default=25.0)
    ap.add_argument("--jitter-ms", type=float, default=5.0)
    args = ap.parse_args()
    d = args.delay_ms
    profiles = [
        NetworkProfile("delay", up=Direction(delay_ms=d), down=Direction(delay_ms=d)),
        NetworkProfile(
            "delay+jitter",
            up=Direction(delay_ms=d, jitter_ms=args.jitter_ms),
            down=Direction(delay_ms=d, jitter_ms=args.jitter_ms),
        ),
    ]
    print(machine_line())
    problem = netem_problem()
    base = statistics.median(_rtts_direct(args.exchanges))
    print(f"loopback round trip P50 {base:.3f} ms; expected +{2 * d:g} ms under each profile")
    ok = True
    for p in profiles:
        relay = _pcts(_relay(p, args.exchanges))
        line = f"{p.name:13s} relay P10/P50/P90 {relay[0]:7.2f} {relay[1]:7.2f} {relay[2]:7.2f} ms"
        ok &= abs(relay[1] - base - 2 * d) <= TOL_MS
        if problem is None:
            netem = _pcts(_netem(p, args.exchanges))
            diff = relay[1] - netem[1]
            ok &= abs(diff) <= TOL_MS
            line += f" | netem {netem[0]:7.2f} {netem[1]:7.2f} {netem[2]:7.2f} ms | P50 diff {diff:+.2f}"
        print(line)
    if problem is not None:
        print(f"netem: unavailable here ({problem}); only the relay was measured")
        return 3
    print("agree within 2 ms at P50" if ok else "DISAGREE beyond 2 ms at P50")
    return 0 if ok else 1


def _rtts_direct(n: int) -> list[float]:
    with _echo("127.0.0.1") as port:
        return _rtts("127.0.0.1", port, n)


if __name__ == "__main__":
    raise SystemExit(main())
