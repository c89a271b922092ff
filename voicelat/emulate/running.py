"""Run emulators inside a process: for tests, benches and ``voicelat serve``.

::

    async with Emulators(["openai"], profile={"openai": {"latency": {"ttft": 120}}}, seed=1) as em:
        base_url = em.url("openai")            # http://127.0.0.1:<port>/v1
        ...
        ex = em.truth.last("openai", "chat")   # what the emulator did, on perf_counter_ns

By default the servers run on the caller's event loop (same clock, no threads). With
``thread=True`` they get an event loop on a thread of their own, so a heavily loaded client
loop does not delay the emulator's writes (and the reverse); stamps stay comparable because
``perf_counter_ns`` is one clock for the whole process, but the threads share the GIL, which
adds up to a switch interval (5 ms) to the tails. For heavy loads, ``voicelat serve --truth``
in a process of its own shares neither.
"""

from __future__ import annotations

import asyncio
import errno
import sys
import threading
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from ssl import SSLContext
from typing import Any, Self

from voicelat.core.base.errors import ConfigError
from voicelat.emulate.base import Emulator
from voicelat.emulate.profile import Profile, load_profile
from voicelat.emulate.registry import emulator_class
from voicelat.emulate.server import EmulatorServer
from voicelat.emulate.truth import GroundTruth

__all__ = ["Emulators"]

ProfileLike = Profile | Mapping[str, Any] | str | Path | None


def _as_profile(profile: ProfileLike, extra_names: Sequence[str]) -> Profile:
    if profile is None:
        return Profile()
    if isinstance(profile, Profile):
        return profile
    if isinstance(profile, str | Path):
        return load_profile(profile)
    return Profile.from_dict(profile, source="profile", extra_names=extra_names)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Emulators:
    """Start emulators (registered names, or Emulator classes) on loopback; stop them on exit. Ports: ``port=0`` gives each an
    ephemeral port, ``port=None`` each its default port, ``port=P`` the ports P, P+1, ..."""

    def __init__(
        self,
        names: Sequence[str | type[Emulator]],
        *,
        profile: ProfileLike = None,
        seed: int | None = None,
        host: str = "127.0.0.1",
        port: int | None = 0,
        thread: bool = False,
        log: Callable[[str], None] = _stderr,
        ssl: SSLContext | None = None,
        truth_limit: int | None = None,
        free_if_busy: bool = False,
    ) -> None:
        if not names:
            raise ConfigError("name at least one emulator")
        classes = [emulator_class(n) if isinstance(n, str) else n for n in names]
        labels = [cls.name for cls in classes]
        if len(set(labels)) != len(labels):
            raise ConfigError(f"an emulator is named twice in {', '.join(labels)}")
        extra = [n.name for n in names if not isinstance(n, str)]
        self.profile = _as_profile(profile, extra).with_seed(seed)
        self.truth = GroundTruth(max_kept=truth_limit)
        self.servers: dict[str, EmulatorServer] = {}
        for i, cls in enumerate(classes):
            name = cls.name
            config = self.profile.resolve(cls)
            chosen = cls.default_port if port is None else (port + i if port else 0)
            self.servers[name] = EmulatorServer(
                cls(config),
                self.truth,
                host=host,
                port=chosen,
                seed=self.profile.seed,
                log=log,
                ssl=ssl,
            )
        self.thread = thread
        #: An emulator whose port another process holds takes a free one (``voicelat serve``
        #: without ``--port``: the run finds it through ``emulate/served.py``).
        self.free_if_busy = free_if_busy
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # -- access -------------------------------------------------------------------------------
    def url(self, name: str) -> str:
        """The base URL a client is given (``http://127.0.0.1:PORT/v1`` for OpenAI)."""
        return self.servers[name].base_url

    def root(self, name: str) -> str:
        """``http://host:port`` without the provider's base path."""
        return self.servers[name].root_url

    @property
    def urls(self) -> dict[str, str]:
        return {name: s.base_url for name, s in self.servers.items()}

    @property
    def errors(self) -> list[str]:
        """Internal errors of handlers (none in a healthy run; tests assert that)."""
        return [e for s in self.servers.values() for e in s.errors]

    # -- lifecycle --------------------------------------------------------------------------
    async def _start(self) -> None:
        started: list[EmulatorServer] = []
        try:
            for name, server in self.servers.items():
                try:
                    await server.start(free_if_busy=self.free_if_busy)
                except OSError as exc:
                    if exc.errno == errno.EADDRINUSE:
                        raise ConfigError(
                            f"cannot serve {name} on {server.host}:{server.port}: the port is in "
                            "use (another voicelat serve?): choose another with --port"
                        ) from None
                    raise ConfigError(
                        f"cannot serve {name} on {server.host}:{server.port}: {exc.strerror}"
                    ) from None
                started.append(server)
        except BaseException:
            for server in started:
                await server.stop()
            raise

    async def _stop(self) -> None:
        for server in self.servers.values():
            await server.stop()

    async def _on_loop(self, coro: Coroutine[Any, Any, None]) -> None:
        if self._loop is None:
            await coro
            return
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    async def __aenter__(self) -> Self:
        if self.thread:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(
                target=self._loop.run_forever, name="voicelat-emulators", daemon=True
            )
            self._thread.start()
        try:
            await self._on_loop(self._start())
        except BaseException:
            self._stop_thread()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self._on_loop(self._stop())
        finally:
            self._stop_thread()

    def _stop_thread(self) -> None:
        if self._loop is None or self._thread is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()
        self._loop = self._thread = None
