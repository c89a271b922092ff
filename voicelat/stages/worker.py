"""A worker process for engines that run inside voicelat (pocketsphinx, espeak-ng).

An engine that decodes or synthesizes on the event loop that stamps events would delay every
stamp taken while it computes: the tool would measure its own contention. So in-process engines
run in a separate process and talk to the stage over a ``multiprocessing`` connection (a
socket pair). The worker is a fresh interpreter (``python -m voicelat.stages.worker``): forking
a process that runs an event loop and threads is unsafe, and multiprocessing's ``spawn`` would
re-import the caller's ``__main__`` (a script without a ``__main__`` guard would run twice).

* loop -> worker: ``(kind, seq, *payload)`` tuples, handed to a sender thread so a full pipe can
  never block the loop;
* worker -> loop: ``(kind, seq, *payload)`` tuples, read by a loop reader callback that stamps
  each one on the stage's clock *before* unpickling it (the stamp is when the loop saw the
  result, which is what the pipeline would see), then queued for the stage.

``seq`` names the request a message belongs to, so a late message of an abandoned request
(a timed-out turn) is never taken for the next request's. The worker announces itself with
``("ready", 0, info)`` or ``("error", 0, reason)`` once its model is loaded.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import queue
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, ClassVar, Self

from voicelat.core.base.errors import StageError
from voicelat.core.measure.clock import Clock, MonotonicClock

#: A message as the loop received it: (arrival stamp in ns, the worker's tuple).
Stamped = tuple[int, tuple[Any, ...]]
#: What the engine's entry point looks like (it runs in the worker; returns when told to close).
EngineMain = Callable[[Connection, dict[str, Any]], None]

READY_TIMEOUT_S = 60.0


def worker_main(fd: int) -> None:
    """Runs in the worker process: read ``("init", 0, target, options)``, import the engine by
    name and hand it the connection."""
    conn = Connection(fd)
    try:
        _, _, target, options = conn.recv()
        module_name, _, func_name = str(target).partition(":")
        try:
            func: EngineMain = getattr(importlib.import_module(module_name), func_name)
        except (ImportError, AttributeError) as exc:
            conn.send(("error", 0, f"cannot import engine {target}: {exc}"))
            return
        func(conn, dict(options))
    except (EOFError, BrokenPipeError, KeyboardInterrupt):
        pass  # the stage went away: nothing left to report to
    finally:
        conn.close()


class WorkerProcess:
    """One engine in one worker process, with a stamped inbox on the current event loop."""

    def __init__(
        self, target: str, options: dict[str, Any], *, name: str, clock: Clock | None = None
    ) -> None:
        self.target = target
        self.clock: Clock = clock or MonotonicClock()
        self.options = dict(options)
        self.name = name
        self.inbox: asyncio.Queue[Stamped] = asyncio.Queue()
        self.info: dict[str, Any] = {}
        self._proc: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self._outbox: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
        self._sender: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._seq = 0

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    async def start(self, timeout_s: float = READY_TIMEOUT_S) -> dict[str, Any]:
        """Start the worker and wait until its engine is loaded; returns what it reported."""
        ours, theirs = socket.socketpair()
        child_fd = theirs.detach()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "voicelat.stages.worker", str(child_fd)],
                pass_fds=(child_fd,),
                stdin=subprocess.DEVNULL,
            )
        finally:
            # The worker holds its end; closing ours lets EOF reach us when it dies.
            os.close(child_fd)
        parent = Connection(ours.detach())
        self._conn = parent
        self._outbox.put(("init", 0, self.target, self.options))
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(parent.fileno(), self._on_readable)
        self._sender = threading.Thread(
            target=self._send_loop, name=f"voicelat-{self.name}-send", daemon=True
        )
        self._sender.start()
        try:
            _, msg = await asyncio.wait_for(self.inbox.get(), timeout_s)
        except TimeoutError:
            await self.close()
            raise StageError(
                f"{self.name}: the engine worker did not start within {timeout_s:.0f} s",
                exit_code=3,
            ) from None
        if msg[0] != "ready":
            await self.close()
            reason = msg[2] if len(msg) > 2 else "the worker exited while loading"
            raise StageError(f"{self.name}: {reason}", exit_code=3)
        self.info = dict(msg[2])
        return self.info

    def send(self, *msg: Any) -> int:
        """Queue a message for the worker; returns the hand-off stamp (ns).

        The write happens on the sender thread: a pipe whose reader lags behind fills up, and a
        blocking write on the loop would freeze every stamp.
        """
        t = self.clock.now_ns()
        self._outbox.put(msg)
        return t

    def note(self, *msg: Any) -> None:
        """Put a local message (stamped now) into the inbox, beside the worker's messages, so a
        stage waits on one queue for both what it sent and what came back."""
        self.inbox.put_nowait((self.clock.now_ns(), msg))

    async def receive(self, seq: int, timeout_s: float | None) -> Stamped:
        """The next message of request ``seq`` (or a worker-wide one: ``eof``); late messages of
        earlier requests are dropped."""
        while True:
            if timeout_s is None:
                t, msg = await self.inbox.get()
            else:
                t, msg = await asyncio.wait_for(self.inbox.get(), timeout_s)
            if msg[0] == "eof" or msg[1] == seq:
                return t, msg

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    async def close(self) -> None:
        """Ask the worker to exit, then make sure it has (terminate after a grace period)."""
        if self._loop is not None and self._conn is not None:
            with contextlib.suppress(ValueError, OSError):
                self._loop.remove_reader(self._conn.fileno())
        if self._sender is not None:
            self._outbox.put(("close", 0))
            self._outbox.put(None)
            await asyncio.to_thread(self._sender.join, 5.0)
            self._sender = None
        if self._proc is not None:
            proc = self._proc
            try:
                await asyncio.to_thread(proc.wait, 5.0)
            except subprocess.TimeoutExpired:
                proc.terminate()
                try:
                    await asyncio.to_thread(proc.wait, 5.0)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    await asyncio.to_thread(proc.wait)
            self._proc = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- internals ------------------------------------------------------------------------
    def _on_readable(self) -> None:
        conn = self._conn
        if conn is None:
            return
        now = self.clock.now_ns
        while True:
            t = now()  # first: the moment the loop saw the result
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                if self._loop is not None:
                    with contextlib.suppress(ValueError, OSError):
                        self._loop.remove_reader(conn.fileno())
                self.inbox.put_nowait((t, ("eof", 0, "the engine worker exited")))
                return
            self.inbox.put_nowait((t, tuple(msg)))
            try:
                if not conn.poll():
                    return
            except (EOFError, OSError):
                continue  # recv reports it

    def _send_loop(self) -> None:
        conn = self._conn
        while (msg := self._outbox.get()) is not None:
            if conn is None:
                return
            try:
                conn.send(msg)
            except (BrokenPipeError, OSError):
                return  # the worker is gone; the reader reports eof


__all__ = ["EngineMain", "Stamped", "WorkerProcess", "worker_main"]


if __name__ == "__main__":
    worker_main(int(sys.argv[1]))


class WorkerStage:
    """Lifecycle of a stage whose engine runs in a :class:`WorkerProcess`: the engine starts
    and loads its model in ``__aenter__`` (never inside a turn) and stops in ``__aexit__``.

    Subclasses set ``engine_target`` (``"module:function"``), ``engine_options`` and
    ``start_timeout_s``.
    """

    engine_target: ClassVar[str]
    stage_name: ClassVar[str]
    engine_options: dict[str, Any]
    start_timeout_s: float
    #: Stamps every event (in this process, as results arrive); the engine may replace it
    #: before ``__aenter__``.
    clock: Clock = MonotonicClock()

    _worker: WorkerProcess | None = None
    _used: bool = False
    _last_info: dict[str, Any] | None = None

    async def __aenter__(self) -> Self:
        self._worker = WorkerProcess(
            self.engine_target, self.engine_options, name=self.stage_name, clock=self.clock
        )
        await self._worker.start(self.start_timeout_s)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._worker is not None:
            # The run's summary describes its stages after they are closed: keep what the
            # engine said about itself (version, pid), or the results record nulls.
            self._last_info = dict(self._worker.info)
            await self._worker.close()
            self._worker = None

    async def prepare(self) -> None:
        return None

    @property
    def worker_info(self) -> dict[str, Any]:
        """What the engine reported about itself (version, pid, ...), also after it stopped."""
        return dict(self._worker.info) if self._worker else dict(self._last_info or {})

    def _first_use(self) -> bool:
        """True once: the first request on the loaded engine is reported cold."""
        cold = not self._used
        self._used = True
        return cold
