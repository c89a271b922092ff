"""One signal policy for every command: SIGINT, SIGTERM and SIGHUP all stop the command the way
Ctrl-C does (finished turns kept, the summary and reports written, servers it started stopped)
and the exit status says which signal it was: 128 + the signal's number (130 SIGINT, 143
SIGTERM, 129 SIGHUP), the convention shells, ``timeout`` and CI runners read.

SIGTERM is what ``timeout``, CI cancellation and ``docker stop`` send; its default action kills
Python before any ``finally`` runs. Rather than teach every command a second stop path, the
handler re-raises the signal as SIGINT, so whatever handles Ctrl-C at that moment (Python's
KeyboardInterrupt, asyncio's cancel-the-main-task, an emulator's loop handler) handles it.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

__all__ = ["STOP_SIGNALS", "exit_status", "install", "received", "reset"]

#: The signals that stop a command cleanly.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_received: list[int] = []


def _as_interrupt(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    current = signal.getsignal(signal.SIGINT)
    if current in (signal.SIG_IGN, signal.SIG_DFL, None):
        # A background job (`voicelat run &` in a script) starts with SIGINT ignored: the
        # SIGTERM must still stop it, through the same KeyboardInterrupt path.
        raise KeyboardInterrupt
    signal.raise_signal(signal.SIGINT)


def install() -> None:
    """Route SIGTERM and SIGHUP to the Ctrl-C path (main thread only; a no-op elsewhere).

    A signal someone chose to ignore stays ignored (``nohup`` ignores SIGHUP).
    """
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is signal.SIG_DFL:
            signal.signal(sig, _as_interrupt)


def received() -> int | None:
    """The first stop signal this process received (SIGTERM re-raised as SIGINT counts as
    SIGTERM), or None."""
    return _received[0] if _received else None


def reset() -> None:
    """Forget the signals received (for tests that call ``main`` twice in one process)."""
    _received.clear()


def exit_status(default: int) -> int:
    """128 + the stop signal received, else ``default`` (130 for a bare KeyboardInterrupt)."""
    sig = received()
    return default if sig is None else 128 + sig
