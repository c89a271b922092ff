"""Settings of the embedded local stack: where it lives, which ports, which engine flags.

Every default matches the command lines measured in ``LOCAL_STACK.md`` on a 2-core machine.
Ports, the cache directory and the state directory can also come from the environment
(``VOICELAT_STT_PORT``, ``VOICELAT_TTS_PORT``, ``VOICELAT_LLM_PORT``, ``VOICELAT_CACHE``,
``VOICELAT_STATE_DIR``) so a pipeline run and ``voicelat stack ...`` agree without flags.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from voicelat.core.base.errors import ConfigError, InfraError

__all__ = [
    "ENV_CACHE",
    "ENV_STATE_DIR",
    "PORT_ENV",
    "PORT_FLAG",
    "SERVER_NAMES",
    "NotInstalledError",
    "ProgressFn",
    "StackConfig",
    "StackError",
    "StackProgress",
    "default_cache_dir",
]

ENV_CACHE = "VOICELAT_CACHE"
ENV_STATE_DIR = "VOICELAT_STATE_DIR"

#: The three servers, in the order they are reported.
SERVER_NAMES: tuple[str, ...] = ("stt", "tts", "llm")

#: Environment variable and CLI flag that change each server's port (named in port errors).
PORT_ENV: dict[str, str] = {
    "stt": "VOICELAT_STT_PORT",
    "tts": "VOICELAT_TTS_PORT",
    "llm": "VOICELAT_LLM_PORT",
}
PORT_FLAG: dict[str, str] = {"stt": "--stt-port", "tts": "--tts-port", "llm": "--llm-port"}

_DEFAULT_PORTS: dict[str, int] = {"stt": 10300, "tts": 10200, "llm": 8080}


class StackError(InfraError):
    """The embedded stack cannot be started, reached or stopped; ``str()`` says how to fix it."""


class NotInstalledError(StackError):
    """A package of the ``local`` extra is missing from this environment."""


@dataclass(frozen=True)
class StackProgress:
    """One progress report from ``up``: which part (``assets``/``stt``/``tts``/``llm``), what.

    ``str()`` is a complete human line, e.g. ``llm: waiting for http://127.0.0.1:8080 (2.0 s)``.
    """

    server: str
    message: str
    elapsed_s: float | None = None

    def __str__(self) -> str:
        return f"{self.server}: {self.message}"


#: Callback receiving progress reports; it runs on the calling thread or a helper thread.
ProgressFn = Callable[[StackProgress], None]


def default_cache_dir() -> Path:
    """``$VOICELAT_CACHE`` if set, else ``~/.cache/voicelat``."""
    env = os.environ.get(ENV_CACHE)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "voicelat"


def _env_port(name: str) -> int:
    var = PORT_ENV[name]
    raw = os.environ.get(var)
    if raw is None or raw.strip() == "":
        return _DEFAULT_PORTS[name]
    # A bad variable is the user's to fix (exit 2), not a stack failure (exit 3).
    try:
        port = int(raw)
    except ValueError:
        raise ConfigError(f"{var}={raw!r} is not a port number; set it to 1-65535") from None
    if not 0 < port < 65536:
        raise ConfigError(f"{var}={raw!r} is not a port number; set it to 1-65535")
    return port


def _env_state_dir() -> Path | None:
    env = os.environ.get(ENV_STATE_DIR)
    return Path(env).expanduser() if env else None


@dataclass
class StackConfig:
    """Where the embedded stack keeps its files and how its three servers are started.

    ``state_dir`` (state file, lock, logs) defaults to ``<cache_dir>/state``; two configs
    with the same state directory describe the same stack, which is how ``voicelat stack
    down`` in one process finds the servers that ``voicelat stack up`` started in another.
    """

    host: str = "127.0.0.1"
    stt_port: int = field(default_factory=lambda: _env_port("stt"))
    tts_port: int = field(default_factory=lambda: _env_port("tts"))
    llm_port: int = field(default_factory=lambda: _env_port("llm"))
    cache_dir: Path = field(default_factory=default_cache_dir)
    state_dir: Path | None = field(default_factory=_env_state_dir)

    # LLM (llama_cpp.server). The default n_threads is cpu_count//2 = 1 on this machine.
    llm_threads: int = 2
    llm_n_ctx: int = 2048
    # logits_all=false: 43-49 ms instead of 81 ms on a fresh prompt, 135 MB less (no logprobs).
    llm_logits_all: bool = False

    # STT (wyoming-faster-whisper). Beam 1 + int8: ~390 ms instead of ~570 ms per 2.3 s clip.
    stt_beam_size: int = 1
    stt_compute_type: str = "int8"
    stt_cpu_threads: int = 2
    stt_language: str = "en"

    # TTS (wyoming-piper).
    tts_voice: str = "en_US-joe-medium"

    # Extra command-line arguments appended to each server's command (power users, tests).
    stt_extra_args: tuple[str, ...] = ()
    tts_extra_args: tuple[str, ...] = ()
    llm_extra_args: tuple[str, ...] = ()

    # Seconds from process start to "warmed up" before `up` gives up on a server.
    startup_timeout_s: float = 120.0
    # Seconds between SIGTERM and SIGKILL when stopping a server.
    stop_timeout_s: float = 5.0
    # Seconds a running server may take to answer a health probe (status, reuse by `up`);
    # an idle local server answers in milliseconds, so longer means hung.
    health_timeout_s: float = 5.0

    def __post_init__(self) -> None:
        self.cache_dir = Path(self.cache_dir).expanduser()
        if self.state_dir is not None:
            self.state_dir = Path(self.state_dir).expanduser()
        for name in SERVER_NAMES:
            port = self.port(name)
            if not 0 < port < 65536:
                raise StackError(
                    f"{name} port {port} is not a port number; "
                    f"pass {PORT_FLAG[name]} or set {PORT_ENV[name]} to 1-65535"
                )

    # -- derived locations ----------------------------------------------------------------

    @property
    def state_root(self) -> Path:
        """Directory holding the state file, the lock and the logs."""
        return self.state_dir if self.state_dir is not None else self.cache_dir / "state"

    @property
    def state_file(self) -> Path:
        """JSON file recording the servers that are running (pid, port, url, cmdline, log)."""
        return self.state_root / "stack.json"

    @property
    def lock_file(self) -> Path:
        """Serializes ``up``/``down`` between processes sharing this state directory."""
        return self.state_root / "stack.lock"

    @property
    def log_dir(self) -> Path:
        """One log file per server, truncated at each start."""
        return self.state_root / "logs"

    def log_path(self, name: str) -> Path:
        """The log file of server ``name`` (``stt``, ``tts`` or ``llm``)."""
        return self.log_dir / f"{name}.log"

    # -- ports and URLs -------------------------------------------------------------------

    def port(self, name: str) -> int:
        """The port of server ``name``."""
        ports = {"stt": self.stt_port, "tts": self.tts_port, "llm": self.llm_port}
        try:
            return ports[name]
        except KeyError:
            raise ValueError(
                f"unknown stack server {name!r}; expected one of {SERVER_NAMES}"
            ) from None

    def url(self, name: str) -> str:
        """``tcp://host:port`` for the Wyoming servers, ``http://host:port`` for the LLM."""
        scheme = "http" if name == "llm" else "tcp"
        return f"{scheme}://{self.host}:{self.port(name)}"

    @property
    def stt_url(self) -> str:
        """Wyoming URI of the STT server."""
        return self.url("stt")

    @property
    def tts_url(self) -> str:
        """Wyoming URI of the TTS server."""
        return self.url("tts")

    @property
    def llm_url(self) -> str:
        """Base URL of the OpenAI-compatible LLM server (append ``/v1/...``)."""
        return self.url("llm")
