"""The embedded stack's processes, ports and state file: what ``voicelat stack`` and
``voicelat agent`` both need to start servers in the background, find them again from another
command, and stop them (and only them) without leaving orphans.

Split out of :mod:`voicelat.stack.manager` so the agent manager (:mod:`voicelat.stack.agent`)
shares these helpers through a public API instead of reaching into the manager's privates.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from voicelat.core.base import jsontext
from voicelat.stack.config import SERVER_NAMES, StackError

#: The state file's format (``voicelat stack status`` reads what ``up`` wrote).
STATE_VERSION = 1

# ---------------------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------------------

_HAVE_PROC = Path("/proc/self/cmdline").exists()


def _proc_cmdline(pid: int) -> list[str] | None:
    """argv of a live process, None if gone or a zombie (whose cmdline is empty)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    if not raw:
        return None
    return [part.decode(errors="replace") for part in raw.rstrip(b"\0").split(b"\0")]


def _pid_alive(pid: int) -> bool:
    """The process exists and some thread of it is not a zombie.

    Per thread, not per process: a killed multi-threaded server shows its leader as a
    zombie while other threads are still exiting, and until the last one is gone its
    sockets stay open (its port is still taken).
    """
    if _HAVE_PROC:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return False
        for tid in tids:
            try:
                stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
            except OSError:
                continue
            # The state letter follows the parenthesised command name (may hold spaces).
            if stat.rpartition(")")[2].split()[:1] not in (["Z"], ["X"]):
                return True
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_recorded_process(pid: int, cmdline: list[str]) -> bool:
    """``pid`` is alive and still runs ``cmdline`` (guards against a recycled pid)."""
    if not _HAVE_PROC:
        return _pid_alive(pid)
    return _proc_cmdline(pid) == cmdline


def interpreter_identity(executable: str) -> str:
    """What makes two interpreter paths the same Python for a server: its environment.

    ``.venv/bin/python``, ``.venv/bin/python3`` and ``.venv/bin/python3.11`` are one
    interpreter under three names (``python -m pytest`` and the ``voicelat`` script may
    report different ones), so a virtual environment is named by its resolved root (the
    directory holding ``pyvenv.cfg``); any other interpreter by its resolved path. Two
    environments on the same base Python stay different: their packages differ.
    """
    path = Path(executable)
    root = path.parent.parent
    if path.is_absolute() and (root / "pyvenv.cfg").is_file():
        return f"venv:{root.resolve()}"
    return str(path.resolve())


def same_server_command(recorded: list[str], wanted: list[str]) -> bool:
    """``recorded`` (a running server's argv) is the ``wanted`` command: the same arguments
    and the same interpreter (:func:`interpreter_identity`), whatever name it ran under."""
    if len(recorded) != len(wanted) or recorded[1:] != wanted[1:]:
        return False
    if not recorded:
        return True
    return recorded[0] == wanted[0] or (
        interpreter_identity(recorded[0]) == interpreter_identity(wanted[0])
    )


def _signal_group(pid: int, sig: signal.Signals) -> None:
    # start_new_session=True made the server the leader of group `pid`.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


@dataclass
class Victim:
    name: str
    pid: int
    popen: subprocess.Popen[bytes] | None = None

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        return _pid_alive(self.pid)


def stop_processes(victims: list[Victim], timeout_s: float) -> None:
    """SIGTERM every group, wait up to ``timeout_s`` for all, SIGKILL what is left.

    All at once rather than one by one: stopping three servers costs one timeout at most.
    """
    for v in victims:
        try:
            _signal_group(v.pid, signal.SIGTERM)
        except PermissionError:
            raise StackError(
                f"cannot stop {v.name} (pid {v.pid}): permission denied; "
                f"it belongs to another user, stop it as that user"
            ) from None
    deadline = time.monotonic() + timeout_s
    while any(v.alive() for v in victims) and time.monotonic() < deadline:
        time.sleep(0.05)
    for v in victims:
        # Also reaches anything the server left behind in its group after it exited.
        with contextlib.suppress(PermissionError):
            _signal_group(v.pid, signal.SIGKILL)
    deadline = time.monotonic() + 2.0
    while any(v.alive() for v in victims) and time.monotonic() < deadline:
        time.sleep(0.05)
    for v in victims:
        if v.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                v.popen.wait(timeout=0.5)  # reap: no zombie left behind in this process


# Children started by attached (non-detached) stacks of this process: stopped at exit
# even if nobody called release()/down() (an exception that escaped, sys.exit, SIGTERM).
_ATTACHED: dict[int, tuple[str, subprocess.Popen[bytes]]] = {}
_ATTACHED_LOCK = threading.Lock()
_ATEXIT_REGISTERED = False


def _cleanup_attached() -> None:
    with _ATTACHED_LOCK:
        items = list(_ATTACHED.items())
        _ATTACHED.clear()
    victims = [Victim(name, pid, popen) for pid, (name, popen) in items]
    if victims:
        with contextlib.suppress(Exception):
            stop_processes(victims, 3.0)


def _exit_on_signal(signum: int, frame: FrameType | None) -> None:
    # Turn SIGTERM/SIGHUP into SystemExit so `with` blocks and atexit run and the
    # servers are stopped; the default action would kill Python without any cleanup.
    raise SystemExit(128 + signum)


def register_attached(name: str, popen: subprocess.Popen[bytes]) -> None:
    global _ATEXIT_REGISTERED
    with _ATTACHED_LOCK:
        _ATTACHED[popen.pid] = (name, popen)
        if not _ATEXIT_REGISTERED:
            atexit.register(_cleanup_attached)
            _ATEXIT_REGISTERED = True
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            # Only replace the default action: an application's own handler wins.
            if signal.getsignal(sig) is signal.SIG_DFL:
                signal.signal(sig, _exit_on_signal)


def unregister_attached(pids: list[int]) -> None:
    with _ATTACHED_LOCK:
        for pid in pids:
            _ATTACHED.pop(pid, None)


def pdeathsig_preexec() -> Callable[[], None] | None:
    """Linux: make the kernel SIGTERM the child if this process dies, even by SIGKILL.

    Only from the main thread: the signal fires when the *thread* that forked exits, and a
    worker thread may end long before the process does.
    """
    if not sys.platform.startswith("linux"):
        return None
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()
    pr_set_pdeathsig = 1

    def preexec() -> None:
        prctl(pr_set_pdeathsig, int(signal.SIGTERM))
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


def log_tail(path: Path, lines: int = 3) -> tuple[str, ...]:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 8192))
            text = f.read().decode(errors="replace")
    except OSError:
        return ()
    kept = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("# ")]
    return tuple(kept[-lines:])


# ---------------------------------------------------------------------------------------
# Ports
# ---------------------------------------------------------------------------------------


def port_free(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        # SO_REUSEADDR like the servers themselves: a TIME_WAIT left by a server we just
        # stopped does not make the port busy for them, so it must not for us either.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return False
            raise StackError(f"cannot bind {host}:{port}: {exc.strerror}") from None
    return True


def port_holder(port: int) -> str | None:
    """Best effort (Linux): ``pid N (command)`` of the process bound to ``port``."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            # 0A = LISTEN, 07 = bound but not listening; inode 0 = no owner (TIME_WAIT).
            if len(cols) > 9 and cols[3] in ("0A", "07") and cols[9] != "0":
                with contextlib.suppress(ValueError):
                    if int(cols[1].rsplit(":", 1)[1], 16) == port:
                        inodes.add(f"socket:[{cols[9]}]")
    if not inodes:
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                if os.readlink(fd) in inodes:
                    cmd = " ".join(_proc_cmdline(int(proc.name)) or ["?"])
                    if len(cmd) > 80:
                        cmd = cmd[:77] + "..."
                    return f"pid {proc.name}: {cmd}"
        except OSError:
            continue
    return None


# ---------------------------------------------------------------------------------------
# State file and lock
# ---------------------------------------------------------------------------------------


def read_state(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data: Any = jsontext.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return {}  # unreadable: treat as nothing recorded (up rewrites it)
    servers = data.get("servers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        return {}
    return {
        name: entry
        for name, entry in servers.items()
        if name in SERVER_NAMES
        and isinstance(entry, dict)
        and isinstance(entry.get("pid"), int)
        and isinstance(entry.get("cmdline"), list)
    }


def write_state(path: Path, servers: dict[str, dict[str, Any]]) -> None:
    if not servers:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps({"version": STATE_VERSION, "servers": servers}, indent=2) + "\n")
    os.replace(tmp, path)  # readers (status) never see a half-written file


def entry_running(entry: dict[str, Any]) -> bool:
    return is_recorded_process(int(entry["pid"]), [str(a) for a in entry["cmdline"]])


@contextlib.contextmanager
def state_lock(path: Path, wait_s: float) -> Iterator[None]:
    """Exclusive lock between processes (and threads) sharing a state directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise StackError(
                        f"another voicelat process is starting or stopping the stack "
                        f"(lock {path} held for {wait_s:.0f} s); wait for it to finish"
                    ) from None
                time.sleep(0.1)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
