"""The kernel's netem: servers voicelat starts run in a network namespace joined to the host
by a veth pair, with ``tc qdisc ... netem`` on each end (the host end shapes ``up``, the
namespace end ``down``), so TCP retransmission, head-of-line blocking and UDP loss are the
kernel's own. Needs Linux, root or CAP_NET_ADMIN, iproute2 (``ip``, ``tc``) and a kernel with
the netem qdisc (``sch_netem``); :func:`netem_problem` says in one line which is missing (the
relay, ``engine/relay.py``, is the fallback).

Only what it creates is touched: a namespace ``vlat<pid>`` and its veth pair ``vl<pid>h`` /
``vl<pid>n`` on 10.213.x.0/30. The namespace goes in ``close()`` (called from ``finally``
and ``atexit``); deleting a namespace deletes its veth pair, so no interface is left impaired.
A namespace left behind by a killed run (its pid gone) is removed by the next start
(:func:`remove_stale`).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from voicelat.core.base.errors import ConfigError, InfraError
from voicelat.core.base.network import NetworkProfile, netem_args

__all__ = ["NetemNamespace", "netem_problem", "remove_stale"]

_PREFIX = "vlat"
_CAP_NET_ADMIN = 12


def _run(cmd: Sequence[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), capture_output=True, text=True, check=check, timeout=10)


def _has_net_admin() -> bool:
    if os.geteuid() == 0:
        return True
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> _CAP_NET_ADMIN & 1)
    except OSError:
        pass
    return False


@functools.cache
def netem_problem() -> str | None:
    """Why netem cannot be used here (one line), or None when it can. Probed once: a
    throwaway namespace with a veth pair and a netem qdisc, removed at once."""
    if not sys.platform.startswith("linux"):
        return "netem is Linux's (this is " + sys.platform + ")"
    if not _has_net_admin():
        return "it needs root or CAP_NET_ADMIN"
    missing = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} missing (apt-get install iproute2)"
    ns = f"{_PREFIX}probe{os.getpid()}"
    try:
        made = _run(["ip", "netns", "add", ns], check=False)
        if made.returncode:
            return f"cannot create a network namespace: {made.stderr.strip()}"
        _run(["ip", "-n", ns, "link", "add", "p0", "type", "veth", "peer", "name", "p1"])
        qdisc = _run(
            ["tc", "-n", ns, "qdisc", "add", "dev", "p0", "root", "netem", "delay", "1ms"], False
        )
        if qdisc.returncode:
            why = qdisc.stderr.strip().removeprefix("Error: ").rstrip(".")
            return f"the kernel has no netem qdisc (sch_netem: {why})"
    except (OSError, subprocess.SubprocessError) as exc:
        return f"probing netem failed: {exc}"
    finally:
        _run(["ip", "netns", "del", ns], check=False)
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale() -> list[str]:
    """Delete the namespaces of voicelat runs that are gone (``vlat<pid>`` with no such
    pid); the names removed."""
    listed = _run(["ip", "netns", "list"], check=False).stdout.split("\n")
    removed = []
    for line in listed:
        name = line.split(" ")[0]
        digits = name[len(_PREFIX) :].removeprefix("probe")
        if name.startswith(_PREFIX) and digits.isdigit() and not _alive(int(digits)):
            _run(["ip", "netns", "del", name], check=False)
            removed.append(name)
    return removed


class NetemNamespace:
    """A namespace with a veth pair to the host and the profile's netem on both ends.

    ``host_ip`` is the host end's address, ``ns_ip`` the namespace's: a server started with
    :meth:`popen` binds ``ns_ip`` and voicelat reaches it through the impaired pair."""

    def __init__(self, profile: NetworkProfile, *, pid: int | None = None) -> None:
        problem = netem_problem()
        if problem:
            raise ConfigError(
                f"netem is unavailable: {problem}; the relay is the fallback "
                "(`voicelat run --network PROFILE` relays the stages' connections)"
            )
        self.profile = profile
        pid = os.getpid() if pid is None else pid
        self.ns = f"{_PREFIX}{pid}"
        self.host_if, self.ns_if = f"vl{pid}h"[:15], f"vl{pid}n"[:15]
        octet = pid % 250 + 1
        self.host_ip, self.ns_ip = f"10.213.{octet}.1", f"10.213.{octet}.2"
        self._active = False

    def open(self) -> NetemNamespace:
        """Create the namespace, the pair, the addresses and both netem qdiscs."""
        self.stale = remove_stale()
        atexit.register(self.close)
        self._active = True
        try:
            for cmd in self._setup_commands():
                _run(cmd)
        except subprocess.CalledProcessError as exc:
            self.close()
            raise InfraError(
                f"netem setup failed: {' '.join(exc.cmd)}: {exc.stderr.strip()}"
            ) from None
        return self

    def _setup_commands(self) -> list[list[str]]:
        ns, h, n = self.ns, self.host_if, self.ns_if
        p = self.profile
        cmds = [
            ["ip", "netns", "add", ns],
            ["ip", "link", "add", h, "type", "veth", "peer", "name", n, "netns", ns],
            ["ip", "addr", "add", f"{self.host_ip}/30", "dev", h],
            ["ip", "link", "set", h, "up"],
            ["ip", "-n", ns, "addr", "add", f"{self.ns_ip}/30", "dev", n],
            ["ip", "-n", ns, "link", "set", n, "up"],
            ["ip", "-n", ns, "link", "set", "lo", "up"],
        ]
        # netem shapes what leaves an interface: the host end carries up, the namespace's down.
        up = netem_args(p.up, jitter_buffer_ms=p.jitter_buffer_ms)
        down = netem_args(p.down, jitter_buffer_ms=p.jitter_buffer_ms)
        if up:
            cmds.append(["tc", "qdisc", "add", "dev", h, "root", "netem", *up, "limit", "10000"])
        if down:
            cmds.append(
                ["tc", "-n", ns, "qdisc", "add", "dev", n, "root", "netem", *down, "limit", "10000"]
            )
        return cmds

    def popen(self, cmd: Sequence[str], **kw: Any) -> subprocess.Popen[Any]:
        """Start ``cmd`` inside the namespace."""
        return subprocess.Popen(["ip", "netns", "exec", self.ns, *cmd], **kw)

    def close(self) -> None:
        """Remove the namespace (and with it the veth pair and its qdiscs); idempotent."""
        if not self._active:
            return
        self._active = False
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            _run(["ip", "netns", "del", self.ns], check=False)
            _run(["ip", "link", "del", self.host_if], check=False)
        atexit.unregister(self.close)

    def __enter__(self) -> NetemNamespace:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve_in_namespace(profile: NetworkProfile, command: Sequence[str], host_flag: str) -> int:
    """``voicelat serve NAME --network P``: ``command`` (the emulators' own ``voicelat serve``,
    with ``host_flag`` and the namespace's address appended) run inside a fresh namespace with
    the profile's netem; its output passed through; the namespace removed however it ends."""
    import signal

    with NetemNamespace(profile) as ns:
        print(
            f"network {profile.name}: netem in namespace {ns.ns} "
            f"({ns.host_ip} <-> {ns.ns_ip}; stale removed: {', '.join(ns.stale) or 'none'})",
            file=sys.stderr,
            flush=True,
        )
        child = ns.popen([*command, host_flag, ns.ns_ip])
        previous = signal.signal(signal.SIGTERM, lambda *_: child.terminate())
        try:
            return child.wait()
        except KeyboardInterrupt:
            child.send_signal(signal.SIGINT)
            return child.wait(10)
        finally:
            signal.signal(signal.SIGTERM, previous)
            if child.poll() is None:
                child.kill()
                child.wait()
