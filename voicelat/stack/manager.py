"""Start, probe, reuse and stop the embedded stack's three servers.

Each server runs as a child process in its own process group (so a stop reaches anything
it spawned, and a Ctrl-C in the terminal does not hit the servers of a detached ``voicelat
stack up``). What is running is recorded in a JSON state file under a file lock, so ``voicelat
stack down`` in one process stops what ``voicelat stack up`` started in another, and a
pipeline run reuses servers that are already up instead of paying their startup again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self, TypeVar

import httpx

from voicelat.stack import probes
from voicelat.stack.assets import (
    SERVER_PACKAGES,
    StackAssets,
    check_installed,
    package_version,
    prepare_assets,
)
from voicelat.stack.config import (
    PORT_ENV,
    PORT_FLAG,
    SERVER_NAMES,
    ProgressFn,
    StackConfig,
    StackError,
    StackProgress,
)
from voicelat.stack.processes import (
    Victim,
    entry_running,
    log_tail,
    pdeathsig_preexec,
    port_free,
    port_holder,
    read_state,
    register_attached,
    same_server_command,
    state_lock,
    stop_processes,
    unregister_attached,
    write_state,
)

__all__ = [
    "LocalStack",
    "ServerExitedError",
    "ServerStatus",
    "StackStatus",
    "build_commands",
]

_T = TypeVar("_T")

_WARMUP_TTS_TEXT = "Ready when you are."
# Seconds between "still waiting" progress reports.
_PROGRESS_EVERY_S = 2.0


#: llama.cpp built with -march=native crashes on CPUs with AMX (seen: SIGSEGV in
#: ggml_backend_amx_mul_mat on the first completion, in a VM); the README builds for AVX2.
_LLM_CRASH_HINT = (
    "; llama.cpp crashed (SIGSEGV): if llama-cpp-python was built for this CPU (-march=native, "
    "e.g. with AMX), rebuild it: pip cache remove llama_cpp_python, then reinstall with "
    'CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF" (README.md, "Two commands")'
)


class ServerExitedError(StackError):
    """A server process exited while starting; ``log_tail`` holds the end of its log."""

    def __init__(self, message: str, *, log_path: Path, log_tail: tuple[str, ...]) -> None:
        super().__init__(message)
        self.log_path = log_path
        self.log_tail = log_tail


# ---------------------------------------------------------------------------------------
# Status
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerStatus:
    """One server of the stack as last seen."""

    name: str
    """``stt``, ``tts`` or ``llm``."""
    url: str
    """``tcp://127.0.0.1:10300`` (Wyoming) or ``http://127.0.0.1:8080`` (OpenAI-compatible)."""
    pid: int | None
    running: bool
    """The recorded process is alive (and is still the command we started)."""
    healthy: bool
    """It answered a protocol round trip (``describe``/``info`` or ``GET /v1/models``)."""
    package: str
    version: str | None
    """Version of the server package (importlib.metadata)."""
    log_path: Path
    reused: bool = False
    """``up`` found it already running and healthy and did not start it."""
    startup_s: float | None = None
    """Process start until the first protocol round trip succeeded."""
    warmup_s: float | None = None
    """Duration of the warm-up request(s) after that."""
    detail: str = ""
    """Why it is not ready, when it is not."""

    @property
    def state(self) -> str:
        """``ready``, ``unhealthy`` (running but not answering) or ``stopped``."""
        if self.running and self.healthy:
            return "ready"
        return "unhealthy" if self.running else "stopped"

    def line(self) -> str:
        """One line for humans: ``stt  tcp://127.0.0.1:10300  pid 123  ready  <pkg> <ver>``."""
        pid = f"pid {self.pid}" if self.pid is not None and self.running else "-"
        parts = [self.name, self.url, pid, self.state, f"{self.package} {self.version or '?'}"]
        if self.detail:
            parts.append(f"({self.detail})")
        return "  ".join(parts)


@dataclass(frozen=True)
class StackStatus:
    """The three servers of the stack (always all three, in ``stt, tts, llm`` order)."""

    servers: tuple[ServerStatus, ...]
    state_file: Path

    @property
    def healthy(self) -> bool:
        """Every server is running and answering."""
        return all(s.running and s.healthy for s in self.servers)

    @property
    def running(self) -> bool:
        """At least one server is running."""
        return any(s.running for s in self.servers)

    def __getitem__(self, name: str) -> ServerStatus:
        for server in self.servers:
            if server.name == name:
                return server
        raise KeyError(name)

    def __iter__(self) -> Iterator[ServerStatus]:
        return iter(self.servers)

    @property
    def stt_url(self) -> str:
        """Wyoming URI of the STT server."""
        return self["stt"].url

    @property
    def tts_url(self) -> str:
        """Wyoming URI of the TTS server."""
        return self["tts"].url

    @property
    def llm_url(self) -> str:
        """Base URL of the LLM server."""
        return self["llm"].url

    def lines(self) -> list[str]:
        """One :meth:`ServerStatus.line` per server."""
        return [s.line() for s in self.servers]


# ---------------------------------------------------------------------------------------
# Command lines
# ---------------------------------------------------------------------------------------


def build_commands(config: StackConfig, assets: StackAssets) -> dict[str, list[str]]:
    """The exact argv of each server (``sys.executable -m <server> ...``)."""
    py = sys.executable
    host = config.host
    return {
        "stt": [
            py, "-m", "wyoming_faster_whisper",
            "--uri", config.stt_url,
            "--model", str(assets.whisper_model),
            "--data-dir", str(assets.whisper_data_dir),
            "--language", config.stt_language,
            "--beam-size", str(config.stt_beam_size),
            "--compute-type", config.stt_compute_type,
            "--cpu-threads", str(config.stt_cpu_threads),
            # Fail loudly on a wrong model path instead of reaching for the hub.
            "--local-files-only",
            *config.stt_extra_args,
        ],
        "tts": [
            py, "-m", "wyoming_piper",
            "--uri", config.tts_url,
            "--voice", config.tts_voice,
            "--data-dir", str(assets.piper_dir),
            *config.tts_extra_args,
        ],
        "llm": [
            py, "-m", "llama_cpp.server",
            "--model", str(assets.gguf),
            "--host", host,
            "--port", str(config.llm_port),
            "--n_ctx", str(config.llm_n_ctx),
            "--n_threads", str(config.llm_threads),
            "--chat_format", "hf-tokenizer-config",
            "--hf_tokenizer_config_path", str(assets.chat_template),
            "--logits_all", "true" if config.llm_logits_all else "false",
            # By default llama_cpp.server cuts a streaming reply short when another request
            # arrives: under --concurrency (or two agent calls) one reply came back empty.
            "--interrupt_requests", "false",
            *config.llm_extra_args,
        ],
    }  # fmt: skip


# ---------------------------------------------------------------------------------------
# Async helpers
# ---------------------------------------------------------------------------------------


def _run_sync(make: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
    """Run a coroutine to completion from sync code, even inside a running event loop.

    asyncio.run() refuses to nest, and the TUI or an async runner may call us from a
    loop thread, so then the coroutine gets its own loop on a helper thread.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="voicelat-stack") as pool:
        return pool.submit(lambda: asyncio.run(make())).result()


_PROBE_ERRORS = (OSError, httpx.HTTPError, StackError, ValueError)


@dataclass
class _Launch:
    name: str
    popen: subprocess.Popen[bytes]
    cmdline: list[str]
    log_path: Path
    t_spawn: float
    started: str
    startup_s: float | None = None
    warmup_s: float | None = None
    detached: bool = False

    def entry(self, config: StackConfig) -> dict[str, Any]:
        return {
            "pid": self.popen.pid,
            "port": config.port(self.name),
            "url": config.url(self.name),
            "started": self.started,
            "cmdline": self.cmdline,
            "log": str(self.log_path),
            "package": SERVER_PACKAGES[self.name],
            "version": package_version(SERVER_PACKAGES[self.name]),
            # null: left running by `voicelat stack up`; else the process that stops it.
            "owner_pid": None if self.detached else os.getpid(),
            "startup_s": self.startup_s,
            "warmup_s": self.warmup_s,
        }


# ---------------------------------------------------------------------------------------
# LocalStack
# ---------------------------------------------------------------------------------------


@dataclass(eq=False)  # identity semantics: each instance owns its own children
class LocalStack:
    """The embedded STT + LLM + TTS stack on loopback.

    ``up()`` starts what is not already running (reusing healthy servers recorded in the
    state file) and returns when every server answered and was warmed up. Used as a
    context manager it stops, on exit, only what *it* started, exceptions and Ctrl-C
    included; servers it found running stay up (``voicelat stack down`` stops them).
    ``down()`` stops every recorded server.
    """

    config: StackConfig = field(default_factory=StackConfig)
    _launches: dict[str, _Launch] = field(default_factory=dict, init=False, repr=False)

    # -- public API -------------------------------------------------------------------------

    @property
    def started(self) -> tuple[str, ...]:
        """Names of the servers this instance started and has not stopped yet."""
        return tuple(self._launches)

    def up(
        self,
        progress: ProgressFn | None = None,
        *,
        detach: bool = False,
        timeout_s: float | None = None,
    ) -> StackStatus:
        """Start (or reuse) the three servers and wait until each is warmed up.

        ``detach=True`` leaves the servers running after this process exits (``voicelat
        stack up``); otherwise they are also stopped at interpreter exit and, on Linux,
        when this process dies. Raises :class:`StackError` (one line: what and how to fix)
        if a package is missing, a port is taken, or a server exits or times out; the
        servers this call started are stopped before it raises.
        """
        cfg = self.config
        timeout = cfg.startup_timeout_s if timeout_s is None else timeout_s
        emit = _emitter(progress)
        check_installed()
        cfg.log_dir.mkdir(parents=True, exist_ok=True)
        with state_lock(cfg.lock_file, wait_s=timeout + 30.0):
            assets = prepare_assets(cfg, progress)
            commands = build_commands(cfg, assets)
            state = read_state(cfg.state_file)
            reused, to_start = self._plan(state, commands, emit)
            for name in to_start:
                self._check_port(name)
            launches: dict[str, _Launch] = {}
            try:
                for name in to_start:
                    launches[name] = self._spawn(name, commands[name], detach)
                    emit(name, f"started pid {launches[name].popen.pid}: {cfg.url(name)}")
                    state[name] = launches[name].entry(cfg)
                # Record before waiting: if this process is killed mid-startup, the next
                # `up` or `down` still finds the pids.
                write_state(cfg.state_file, state)
                if launches:
                    deadline = time.monotonic() + timeout
                    _run_sync(lambda: self._wait_all(list(launches.values()), deadline, emit))
                for name, launch in launches.items():
                    state[name] = launch.entry(cfg)
                write_state(cfg.state_file, state)
            except BaseException:
                # Includes KeyboardInterrupt: nothing this call started may outlive it.
                stop_processes(
                    [Victim(n, ln.popen.pid, ln.popen) for n, ln in launches.items()],
                    cfg.stop_timeout_s,
                )
                unregister_attached([ln.popen.pid for ln in launches.values()])
                for name in launches:
                    state.pop(name, None)
                with contextlib.suppress(OSError):
                    write_state(cfg.state_file, state)
                raise
            self._launches.update(launches)
        servers = []
        for name in SERVER_NAMES:
            if name in launches:
                servers.append(self._launch_status(launches[name]))
            else:
                servers.append(self._entry_status(name, reused[name], healthy=True, reused=True))
        return StackStatus(tuple(servers), cfg.state_file)

    def status(self) -> StackStatus:
        """What is running now (from the state file), each running server probed for health."""
        cfg = self.config
        state = read_state(cfg.state_file)
        running = {name: e for name, e in state.items() if entry_running(e)}
        healthy: dict[str, bool] = {}
        if running:
            healthy = _run_sync(lambda: self._probe_many(list(running)))
        servers = []
        for name in SERVER_NAMES:
            if name in running:
                status = self._entry_status(name, running[name], healthy=healthy.get(name, False))
                if not status.healthy:
                    # No startup time recorded yet: an `up` is probably still waiting on it.
                    starting = running[name].get("startup_s") is None
                    detail = "not answering yet, still starting?" if starting else "not answering"
                    status = replace(status, detail=detail)
                servers.append(status)
                continue
            detail = ""
            entry = state.get(name)
            if entry is not None:
                detail = f"recorded pid {entry['pid']} is gone"
            port = cfg.port(name)
            with contextlib.suppress(StackError):
                if not port_free(cfg.host, port):
                    holder = port_holder(port)
                    detail = f"port {port} is used by another program" + (
                        f", {holder}" if holder else ""
                    )
            servers.append(
                ServerStatus(
                    name=name,
                    url=cfg.url(name),
                    pid=None,
                    running=False,
                    healthy=False,
                    package=SERVER_PACKAGES[name],
                    version=package_version(SERVER_PACKAGES[name]),
                    log_path=cfg.log_path(name),
                    detail=detail,
                )
            )
        return StackStatus(tuple(servers), cfg.state_file)

    def down(self, progress: ProgressFn | None = None) -> list[ServerStatus]:
        """Stop every recorded server (SIGTERM its group, 5 s, SIGKILL); idempotent.

        Returns the servers that were running. Removes the state file.
        """
        cfg = self.config
        emit = _emitter(progress)
        stopped: list[ServerStatus] = []
        with state_lock(cfg.lock_file, wait_s=cfg.startup_timeout_s + 30.0):
            state = read_state(cfg.state_file)
            victims: list[Victim] = []
            for name, entry in state.items():
                if not entry_running(entry):
                    continue
                launch = self._launches.get(name)
                popen = launch.popen if launch and launch.popen.pid == entry["pid"] else None
                victims.append(Victim(name, int(entry["pid"]), popen))
                stopped.append(self._entry_status(name, entry, healthy=False))
                emit(name, f"stopping pid {entry['pid']}")
            # Our own children even if the state file lost them (deleted by hand).
            recorded = {v.pid for v in victims}
            for name, launch in self._launches.items():
                if launch.popen.pid not in recorded and launch.popen.poll() is None:
                    victims.append(Victim(name, launch.popen.pid, launch.popen))
            stop_processes(victims, cfg.stop_timeout_s)
            unregister_attached([v.pid for v in victims])
            self._launches.clear()
            cfg.state_file.unlink(missing_ok=True)
        return stopped

    def release(self) -> None:
        """Stop only the servers this instance started; leave reused ones running."""
        if not self._launches:
            return
        cfg = self.config
        launches = list(self._launches.values())
        self._launches.clear()
        # Stop first, without the lock: our own children must go even if another
        # process holds the lock for a long time.
        stop_processes(
            [Victim(ln.name, ln.popen.pid, ln.popen) for ln in launches], cfg.stop_timeout_s
        )
        unregister_attached([ln.popen.pid for ln in launches])
        with contextlib.suppress(StackError, OSError), state_lock(cfg.lock_file, wait_s=5.0):
            state = read_state(cfg.state_file)
            pids = {ln.popen.pid for ln in launches}
            for name in [n for n, e in state.items() if e["pid"] in pids]:
                del state[name]
            write_state(cfg.state_file, state)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    # Async forms for an event loop (the TUI, an async runner): the blocking work runs in
    # a worker thread so the loop keeps drawing. Started from a worker thread, the
    # servers get no parent-death signal; atexit and release() still stop them.

    async def aup(
        self,
        progress: ProgressFn | None = None,
        *,
        detach: bool = False,
        timeout_s: float | None = None,
    ) -> StackStatus:
        """:meth:`up` without blocking the event loop (``progress`` runs off the loop)."""
        return await asyncio.to_thread(self.up, progress, detach=detach, timeout_s=timeout_s)

    async def astatus(self) -> StackStatus:
        """:meth:`status` without blocking the event loop."""
        return await asyncio.to_thread(self.status)

    async def adown(self, progress: ProgressFn | None = None) -> list[ServerStatus]:
        """:meth:`down` without blocking the event loop."""
        return await asyncio.to_thread(self.down, progress)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Shielded from cancellation: a cancelled task must still stop its servers.
        await asyncio.shield(asyncio.to_thread(self.release))

    # -- internals --------------------------------------------------------------------------

    def _plan(
        self,
        state: dict[str, dict[str, Any]],
        commands: dict[str, list[str]],
        emit: _Emit,
    ) -> tuple[dict[str, dict[str, Any]], list[str]]:
        """Split the servers into healthy recorded ones to reuse and ones to start."""
        cfg = self.config
        running = {name: e for name, e in state.items() if entry_running(e)}
        for name in [n for n in state if n not in running]:
            del state[name]  # a stale record: the process is gone
        for name, recorded in running.items():
            if not same_server_command([str(a) for a in recorded["cmdline"]], commands[name]):
                # Restarting it would pull the server from under whoever started it.
                raise StackError(
                    f"{name} is already running with other settings ({recorded.get('url')}, "
                    f"pid {recorded['pid']}, recorded in {cfg.state_file}); stop it with "
                    f"`voicelat stack down` or use the same ports and --cache-dir"
                )
        healthy = _run_sync(lambda: self._probe_many(list(running))) if running else {}
        reused: dict[str, dict[str, Any]] = {}
        to_start: list[str] = []
        for name in SERVER_NAMES:
            entry = running.get(name)
            if entry is not None and healthy.get(name):
                reused[name] = entry
                emit(name, f"reusing pid {entry['pid']} at {cfg.url(name)}")
                continue
            if entry is not None:
                # Recorded by us but not answering (hung): replace it.
                emit(name, f"pid {entry['pid']} is not answering; restarting it")
                stop_processes([Victim(name, int(entry["pid"]))], cfg.stop_timeout_s)
                del state[name]
            to_start.append(name)
        return reused, to_start

    def _check_port(self, name: str) -> None:
        cfg = self.config
        port = cfg.port(name)
        if port_free(cfg.host, port):
            return
        holder = port_holder(port)
        by = f" ({holder})" if holder else ""
        raise StackError(
            f"port {port} for {name} on {cfg.host} is already in use by another program{by}; "
            f"stop it or choose another port with {PORT_FLAG[name]} or {PORT_ENV[name]}"
        )

    def _spawn(self, name: str, cmdline: list[str], detach: bool) -> _Launch:
        cfg = self.config
        log_path = cfg.log_path(name)
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"  # so a crash's last lines are in the log, not lost
        env["HF_HUB_OFFLINE"] = "1"  # the stack is offline by design: never reach the hub
        started = datetime.now(UTC).isoformat(timespec="seconds")
        with log_path.open("wb") as log:
            log.write(f"# voicelat {name} started {started}: {shlex.join(cmdline)}\n".encode())
            log.flush()
            popen = subprocess.Popen(
                cmdline,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=cfg.state_root,
                env=env,
                # Own process group: stop reaches the whole server, and the terminal's
                # Ctrl-C does not (an attached run stops it itself, in order).
                start_new_session=True,
                preexec_fn=None if detach else pdeathsig_preexec(),
            )
        t_spawn = time.monotonic()
        if not detach:
            register_attached(name, popen)
        return _Launch(name, popen, cmdline, log_path, t_spawn, started, detached=detach)

    def _exited_error(self, launch: _Launch) -> ServerExitedError:
        code = launch.popen.poll()
        tail = log_tail(launch.log_path)
        last = " | ".join(tail) if tail else "no output"
        hint = _LLM_CRASH_HINT if launch.name == "llm" and code == -signal.SIGSEGV else ""
        return ServerExitedError(
            f"{launch.name} server exited with code {code} during startup: {last} "
            f"(full log: {launch.log_path}){hint}",
            log_path=launch.log_path,
            log_tail=tail,
        )

    async def _wait_all(
        self,
        launches: list[_Launch],
        deadline: float,
        emit: _Emit,
    ) -> None:
        tasks = [asyncio.create_task(self._wait_one(ln, deadline, emit)) for ln in launches]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for task in tasks:  # in launch order, so the error names the first failing server
            error = task.exception() if task in done else None
            if error is not None:
                raise error

    async def _wait_one(self, launch: _Launch, deadline: float, emit: _Emit) -> None:
        name = launch.name
        url = self.config.url(name)
        last_report = launch.t_spawn
        last_error = "no answer yet"
        while True:
            if launch.popen.poll() is not None:
                raise self._exited_error(launch)
            now = time.monotonic()
            if now >= deadline:
                raise StackError(
                    f"{name} did not answer at {url} within "
                    f"{deadline - launch.t_spawn:.0f} s ({last_error}); see {launch.log_path} "
                    f"or allow more time with --timeout"
                )
            try:
                await asyncio.wait_for(self._probe(name), timeout=min(5.0, deadline - now))
                break
            except (*_PROBE_ERRORS, TimeoutError) as exc:
                last_error = str(exc) or type(exc).__name__
            now = time.monotonic()
            if now - last_report >= _PROGRESS_EVERY_S:
                last_report = now
                elapsed = now - launch.t_spawn
                emit(name, f"waiting for {url} ({elapsed:.1f} s)", elapsed)
            await asyncio.sleep(0.1)
        t_ready = time.monotonic()
        launch.startup_s = t_ready - launch.t_spawn
        emit(name, f"answering after {launch.startup_s:.2f} s; warming up", launch.startup_s)
        try:
            await asyncio.wait_for(self._warmup(name), timeout=max(1.0, deadline - t_ready))
        except (*_PROBE_ERRORS, TimeoutError) as exc:
            if launch.popen.poll() is not None:
                raise self._exited_error(launch) from exc
            raise StackError(
                f"{name} warm-up request to {url} failed: {exc or type(exc).__name__}; "
                f"see {launch.log_path}"
            ) from exc
        launch.warmup_s = time.monotonic() - t_ready
        total = launch.startup_s + launch.warmup_s
        emit(
            name,
            f"ready in {total:.2f} s (answering {launch.startup_s:.2f} s + warm-up "
            f"{launch.warmup_s:.2f} s)",
            total,
        )

    async def _probe(self, name: str, timeout: float | None = None) -> None:
        """Protocol round trip: the server is up and its model is loaded."""
        cfg = self.config
        timeout = cfg.health_timeout_s if timeout is None else timeout
        if name == "llm":
            await probes.llm_models(cfg.llm_url, timeout=timeout)
            return
        info = await probes.wyoming_describe(cfg.host, cfg.port(name), timeout=timeout)
        if name == "stt" and not info.asr:
            raise StackError(f"{cfg.stt_url} answered describe but offers no speech-to-text")
        if name == "tts" and not info.tts:
            raise StackError(f"{cfg.tts_url} answered describe but offers no text-to-speech")

    async def _warmup(self, name: str) -> None:
        """One real request of each kind, so the first measured turn is not a cold one."""
        cfg = self.config
        if name == "stt":
            await probes.transcribe(
                cfg.host, cfg.stt_port, probes.warmup_audio(), language=cfg.stt_language
            )
        elif name == "tts":
            # Piper loads the voice on the first request (+~360 ms): pay it here.
            result = await probes.synthesize(
                cfg.host, cfg.tts_port, _WARMUP_TTS_TEXT, voice=cfg.tts_voice
            )
            if not result.audio:
                raise StackError(f"{cfg.tts_url} returned no audio for {cfg.tts_voice}")
        else:
            await probes.llm_complete(cfg.llm_url, probes.WARMUP_PROMPT, max_tokens=4)

    async def _probe_many(self, names: list[str]) -> dict[str, bool]:
        async def one(name: str) -> bool:
            try:
                await asyncio.wait_for(self._probe(name), timeout=self.config.health_timeout_s)
            except (*_PROBE_ERRORS, TimeoutError):
                return False
            return True

        results = await asyncio.gather(*(one(n) for n in names))
        return dict(zip(names, results, strict=True))

    def _launch_status(self, launch: _Launch) -> ServerStatus:
        return ServerStatus(
            name=launch.name,
            url=self.config.url(launch.name),
            pid=launch.popen.pid,
            running=True,
            healthy=True,
            package=SERVER_PACKAGES[launch.name],
            version=package_version(SERVER_PACKAGES[launch.name]),
            log_path=launch.log_path,
            startup_s=launch.startup_s,
            warmup_s=launch.warmup_s,
        )

    def _entry_status(
        self, name: str, entry: dict[str, Any], *, healthy: bool, reused: bool = False
    ) -> ServerStatus:
        package = SERVER_PACKAGES[name]
        version = entry.get("version")
        return ServerStatus(
            name=name,
            url=str(entry.get("url") or self.config.url(name)),
            pid=int(entry["pid"]),
            running=True,
            healthy=healthy,
            package=package,
            version=str(version) if version else package_version(package),
            log_path=Path(str(entry.get("log") or self.config.log_path(name))),
            reused=reused,
            startup_s=_opt_float(entry.get("startup_s")),
            warmup_s=_opt_float(entry.get("warmup_s")),
        )


def _opt_float(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


class _Emit(Protocol):
    def __call__(self, server: str, message: str, elapsed_s: float | None = None) -> None: ...


def _emitter(progress: ProgressFn | None) -> _Emit:
    def emit(server: str, message: str, elapsed_s: float | None = None) -> None:
        if progress is not None:
            progress(StackProgress(server, message, elapsed_s))

    return emit
