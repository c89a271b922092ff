"""The embedded local stack against real servers (no mocks).

Runs on ports away from the defaults (and from tests/conftest.py's 10311/10211/8091) so it
does not collide with a stack someone keeps running on this machine. Every test that starts
servers stops them; the module fixture's teardown runs `down` whatever happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib.metadata
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from voicelat.core.base.errors import EXIT_INFRA
from voicelat.stack import (
    LocalStack,
    NotInstalledError,
    ServerExitedError,
    StackConfig,
    StackError,
    StackProgress,
    check_installed,
    probes,
)

pytestmark = pytest.mark.stack

try:
    check_installed()
except NotInstalledError as exc:  # pragma: no cover - depends on the environment
    pytest.skip(str(exc), allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
NAMES = ("stt", "tts", "llm")
PACKAGES = {"stt": "wyoming-faster-whisper", "tts": "wyoming-piper", "llm": "llama-cpp-python"}
LINE = re.compile(r"^(stt|tts|llm)  (tcp|http)://127\.0\.0\.1:\d+  pid \d+  ready  \S+ \S+$")

# The driver for "another process": the real argparse wiring of `voicelat stack ...`.
CLI_DRIVER = """
import argparse, sys
from voicelat.cli.stack import add_parser
parser = argparse.ArgumentParser(prog="voicelat")
add_parser(parser.add_subparsers(dest="command", required=True))
args = parser.parse_args(sys.argv[1:])
sys.exit(args.func(args))
"""

# A process that brings an *attached* stack up, prints the pids and then idles.
ATTACHED_DRIVER = """
import json, sys, time
from pathlib import Path
from voicelat.stack import LocalStack, StackConfig
cfg = StackConfig(cache_dir=Path(sys.argv[1]), state_dir=Path(sys.argv[2]),
                  stt_port=int(sys.argv[3]), tts_port=int(sys.argv[4]), llm_port=int(sys.argv[5]))
status = LocalStack(cfg).up()
print(json.dumps([s.pid for s in status]), flush=True)
time.sleep(120)
"""


# -- helpers ------------------------------------------------------------------------------


def port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


_handed_out: set[int] = set()


def free_port(preferred: int) -> int:
    """``preferred`` or the next free port above it (never one handed out before)."""
    for port in range(preferred, preferred + 200):
        if port not in _handed_out and port_free(port):
            _handed_out.add(port)
            return port
    raise RuntimeError(f"no free port near {preferred}")


def alive(pid: int) -> bool:
    """Some thread of ``pid`` is not a zombie (an orphan's zombie may wait for a lazy init
    to reap it, and a killed leader is a zombie before its other threads are gone)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for tid in tids:
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue
        if stat.rpartition(")")[2].split()[0] not in ("Z", "X"):
            return True
    return False


def wait_gone(pids: list[int], timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = [p for p in pids if alive(p)]
        if not left:
            return []
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


def kill_leftovers(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)


def make_config(cache_dir: Path, state_dir: Path, base: tuple[int, int, int]) -> StackConfig:
    return StackConfig(
        cache_dir=cache_dir,
        state_dir=state_dir,
        stt_port=free_port(base[0]),
        tts_port=free_port(base[1]),
        llm_port=free_port(base[2]),
    )


def run_cli(config: StackConfig, *argv: str) -> subprocess.CompletedProcess[str]:
    options = [
        "--cache-dir", str(config.cache_dir),
        "--state-dir", str(config.state_root),
        "--stt-port", str(config.stt_port),
        "--tts-port", str(config.tts_port),
        "--llm-port", str(config.llm_port),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", CLI_DRIVER, "stack", *argv, *options],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=ROOT,
    )


class Pids:
    """Collects the pids announced by ``up``'s progress ("started pid N")."""

    def __init__(self) -> None:
        self.pids: list[int] = []
        self.events: list[StackProgress] = []

    def __call__(self, event: StackProgress) -> None:
        self.events.append(event)
        match = re.match(r"started pid (\d+)", event.message)
        if match:
            self.pids.append(int(match.group(1)))


# -- fixtures -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Shared by every test: the GGUF is assembled once (< 2 s), then found by its marker.
    return tmp_path_factory.mktemp("voicelat-cache")


@pytest.fixture(scope="module")
def detached(
    cache_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[StackConfig, subprocess.CompletedProcess[str]]]:
    """The stack started by `voicelat stack up` in another process, which then exits."""
    config = make_config(cache_dir, tmp_path_factory.mktemp("state-main"), (10310, 10210, 8090))
    t0 = time.monotonic()
    result = run_cli(config, "up")
    print(f"`stack up` took {time.monotonic() - t0:.2f} s\n{result.stderr}")
    try:
        yield config, result
    finally:
        state = json.loads(config.state_file.read_text()) if config.state_file.exists() else {}
        pids = [int(e["pid"]) for e in state.get("servers", {}).values()]
        LocalStack(config).down()
        kill_leftovers(wait_gone(pids, 2.0))


# -- tests: the detached stack (order matters: `down` comes last) --------------------------


def test_up_detached_starts_three_healthy_servers_with_versions(
    detached: tuple[StackConfig, subprocess.CompletedProcess[str]],
) -> None:
    config, result = detached
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 3 and all(LINE.match(line) for line in lines), result.stdout
    # The warm-up was real: the progress names each server's readiness.
    for name in NAMES:
        assert re.search(rf"{name}: ready in [\d.]+ s", result.stderr), result.stderr

    # The process that ran `up` has exited; the servers outlived it.
    status = LocalStack(config).status()
    assert status.healthy, status.lines()
    for server in status:
        assert server.pid is not None and alive(server.pid)
        assert server.version == importlib.metadata.version(PACKAGES[server.name])
        assert server.url == config.url(server.name)
        assert server.log_path.is_file()
        assert server.startup_s is not None and server.warmup_s is not None
        # Its own process group, so `down` reaches anything it spawned.
        assert os.getpgid(server.pid) == server.pid
    assert status.stt_url == f"tcp://127.0.0.1:{config.stt_port}"
    assert status.llm_url == f"http://127.0.0.1:{config.llm_port}"

    state = json.loads(config.state_file.read_text())["servers"]
    assert set(state) == set(NAMES)
    for name, entry in state.items():
        assert entry["port"] == config.port(name)
        assert entry["url"] == config.url(name)
        assert entry["cmdline"][:3] == [sys.executable, "-m", entry["cmdline"][2]]
        assert entry["owner_pid"] is None  # detached: nobody stops it but `down`
        assert Path(entry["log"]).is_file() and entry["started"]
    llm_cmd = state["llm"]["cmdline"]
    for flag, value in (("--logits_all", "false"), ("--n_threads", "2"), ("--n_ctx", "2048")):
        assert llm_cmd[llm_cmd.index(flag) + 1] == value
    assert llm_cmd[llm_cmd.index("--chat_format") + 1] == "hf-tokenizer-config"


async def test_real_synthesis_transcription_and_completion(
    detached: tuple[StackConfig, subprocess.CompletedProcess[str]],
) -> None:
    config, _ = detached
    sentence = "What is the weather like in Paris today?"
    speech = await probes.synthesize(
        config.host, config.tts_port, sentence, voice="en_US-joe-medium"
    )
    assert speech.rate == 22050 and speech.width == 2 and speech.channels == 1
    assert 1.0 < speech.seconds < 6.0

    # Piper's own speech back through Whisper (the server resamples 22.05 kHz to 16 kHz).
    text = await probes.transcribe(
        config.host, config.stt_port, speech.audio, rate=speech.rate, language="en"
    )
    words = re.sub(r"[^a-z ]", "", text.lower()).split()
    assert "weather" in words and "paris" in words, text

    reply = await probes.llm_complete(
        config.llm_url, "User: What is the capital of France?\nAssistant:", max_tokens=16
    )
    assert reply.strip(), reply

    # The chat template makes /v1/chat/completions usable with the base model.
    async with httpx.AsyncClient(timeout=60, trust_env=False) as http:
        response = await http.post(
            f"{config.llm_url}/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 16},
        )
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"].strip()


def test_up_again_reuses_running_servers_and_leaves_them_running(
    detached: tuple[StackConfig, subprocess.CompletedProcess[str]],
) -> None:
    config, _ = detached
    before = {s.name: s.pid for s in LocalStack(config).status()}
    events = Pids()
    t0 = time.monotonic()
    with LocalStack(config) as stack:
        status = stack.up(progress=events)
        elapsed = time.monotonic() - t0
        assert stack.started == ()
    assert {s.name: s.pid for s in status} == before
    assert all(s.reused and s.healthy for s in status)
    assert events.pids == []  # nothing was started
    assert elapsed < 5.0, f"reuse took {elapsed:.1f} s"
    # Leaving the `with` did not stop servers it had only reused.
    assert all(alive(pid) for pid in before.values() if pid is not None)
    assert LocalStack(config).status().healthy


async def test_async_forms_and_sync_calls_inside_a_running_loop(
    detached: tuple[StackConfig, subprocess.CompletedProcess[str]],
) -> None:
    config, _ = detached
    async with LocalStack(config) as stack:
        status = await stack.aup()
        assert all(s.reused for s in status)
    # A sync call from inside an event loop must not trip over asyncio.run().
    assert LocalStack(config).status().healthy
    assert (await LocalStack(config).astatus()).healthy


@pytest.mark.e2e
def test_up_with_other_settings_is_refused(
    detached: tuple[StackConfig, subprocess.CompletedProcess[str]],
) -> None:
    config, _ = detached
    other = StackConfig(
        cache_dir=config.cache_dir,
        state_dir=config.state_dir,
        stt_port=config.stt_port,
        tts_port=config.tts_port,
        llm_port=free_port(config.llm_port + 1),
        llm_n_ctx=1024,
    )
    with pytest.raises(StackError, match="already running with other settings") as info:
        LocalStack(other).up()
    assert "\n" not in str(info.value)
    assert LocalStack(config).status().healthy


def _another_name_for_this_python(tmp_path: Path) -> str:
    """``sys.executable`` under another name: a sibling in its venv (``python`` vs
    ``python3``), else a symlink to it."""
    exe = Path(sys.executable)
    for sibling in ("python", "python3", f"python{sys.version_info[0]}.{sys.version_info[1]}"):
        if (exe.parent / sibling).exists() and sibling != exe.name:
            return str(exe.parent / sibling)
    alias = tmp_path / "python-alias"
    alias.symlink_to(exe)
    return str(alias)


@pytest.mark.e2e
def test_up_under_another_name_of_the_same_python_reuses_the_stack(
    detached: tuple[StackConfig, subprocess.CompletedProcess[str]],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    # Issue #29: `stack up` from the `voicelat` script, then `python -m pytest` (another name
    # of the same venv's interpreter) was refused "already running with other settings".
    config, _ = detached
    before = {s.name: s.pid for s in LocalStack(config).status()}
    monkeypatch.setattr(sys, "executable", _another_name_for_this_python(tmp_path))
    stack = LocalStack(config)
    status = stack.up()
    assert stack.started == ()
    assert {s.name: s.pid for s in status} == before


def test_up_replaces_a_recorded_server_that_hangs(
    detached: tuple[StackConfig, subprocess.CompletedProcess[str]],
) -> None:
    config, _ = detached
    before = {s.name: s.pid for s in LocalStack(config).status()}
    tts_pid = before["tts"]
    assert tts_pid is not None
    os.kill(tts_pid, signal.SIGSTOP)  # alive, port open, never answers
    try:
        quick = dataclasses.replace(config, health_timeout_s=1.0, stop_timeout_s=1.0)
        assert LocalStack(quick).status()["tts"].state == "unhealthy"
        stack = LocalStack(quick)
        status = stack.up(detach=True)  # no `with`: it would stop the new tts on exit
        assert stack.started == ("tts",)
    finally:
        with contextlib.suppress(OSError):
            os.kill(tts_pid, signal.SIGCONT)
    assert not alive(tts_pid)
    assert status["tts"].pid != tts_pid and not status["tts"].reused
    assert status["stt"].pid == before["stt"] and status["stt"].reused
    assert status["llm"].pid == before["llm"] and status["llm"].reused
    assert LocalStack(config).status().healthy


def test_down_from_another_process_leaves_no_process(
    detached: tuple[StackConfig, subprocess.CompletedProcess[str]],
) -> None:
    config, _ = detached
    pids = [s.pid for s in LocalStack(config).status() if s.pid is not None]
    assert len(pids) == 3
    result = run_cli(config, "down")
    assert result.returncode == 0, result.stderr
    assert len([ln for ln in result.stdout.splitlines() if ln.endswith("stopped")]) == 3
    assert wait_gone(pids, 0.5) == []  # down waited for them
    assert not config.state_file.exists()
    assert all(port_free(config.port(name)) for name in NAMES)

    again = run_cli(config, "down")  # idempotent
    assert again.returncode == 0 and "no stack server was running" in again.stderr
    status = run_cli(config, "status")
    assert status.returncode == EXIT_INFRA
    assert all("stopped" in line for line in status.stdout.splitlines())


# -- tests: errors and cleanup (each with its own state directory and ports) --------------


def test_port_in_use_gives_a_clear_error(cache_dir: Path, tmp_path: Path) -> None:
    config = make_config(cache_dir, tmp_path / "state", (10360, 10260, 8140))
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", config.stt_port))
        blocker.listen()
        events = Pids()
        with pytest.raises(StackError) as info:
            LocalStack(config).up(progress=events)
    message = str(info.value)
    assert "\n" not in message
    assert f"port {config.stt_port}" in message
    assert "--stt-port" in message and "VOICELAT_STT_PORT" in message
    assert f"pid {os.getpid()}" in message  # names who holds it
    assert info.value.exit_code == EXIT_INFRA
    assert events.pids == []  # checked before starting anything
    assert not config.state_file.exists()


def test_server_exiting_during_startup_reports_its_log_and_stops_the_others(
    cache_dir: Path, tmp_path: Path
) -> None:
    config = make_config(cache_dir, tmp_path / "state", (10330, 10230, 8110))
    config.llm_extra_args = ("--no_such_flag", "1")
    events = Pids()
    with pytest.raises(ServerExitedError) as info:
        LocalStack(config).up(progress=events)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("llm server exited with code 2 during startup")
    assert "unrecognized arguments: --no_such_flag" in message
    assert str(config.log_path("llm")) in message
    assert info.value.log_tail
    assert len(events.pids) == 3
    left = wait_gone(events.pids, 0.5)
    kill_leftovers(left)
    assert left == []
    assert not config.state_file.exists()


@pytest.mark.e2e
def test_context_manager_stops_what_it_started_when_the_body_raises(
    cache_dir: Path, tmp_path: Path
) -> None:
    config = make_config(cache_dir, tmp_path / "state", (10320, 10220, 8100))
    pids: list[int] = []
    with pytest.raises(RuntimeError, match="boom"), LocalStack(config) as stack:
        status = stack.up()
        pids = [s.pid for s in status if s.pid is not None]
        assert status.healthy and len(pids) == 3
        assert not any(s.reused for s in status)
        assert set(stack.started) == set(NAMES)
        raise RuntimeError("boom")
    left = wait_gone(pids, 0.5)
    kill_leftovers(left)
    assert left == []
    assert not config.state_file.exists()
    assert all(port_free(config.port(name)) for name in NAMES)


def test_keyboard_interrupt_during_up_stops_the_servers_it_started(
    cache_dir: Path, tmp_path: Path
) -> None:
    config = make_config(cache_dir, tmp_path / "state", (10370, 10270, 8150))
    events = Pids()

    def interrupt(event: StackProgress) -> None:
        events(event)
        if event.server == "tts" and event.message.startswith("ready"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        LocalStack(config).up(progress=interrupt)
    assert len(events.pids) == 3
    left = wait_gone(events.pids, 0.5)
    kill_leftovers(left)
    assert left == []
    assert not config.state_file.exists()


@pytest.mark.parametrize(
    "sig",
    [signal.SIGTERM, pytest.param(signal.SIGKILL, marks=pytest.mark.e2e)],
    ids=["sigterm", "sigkill"],
)
def test_no_orphans_when_the_owning_process_dies(
    cache_dir: Path, tmp_path: Path, sig: signal.Signals
) -> None:
    # SIGTERM: turned into SystemExit, atexit stops the children. SIGKILL: nothing runs in
    # the dying process; the kernel's parent-death signal stops them.
    base = (10340, 10240, 8120) if sig == signal.SIGTERM else (10350, 10250, 8130)
    config = make_config(cache_dir, tmp_path / "state", base)
    argv = [str(config.cache_dir), str(config.state_root)]
    argv += [str(config.port(n)) for n in NAMES]
    owner = subprocess.Popen(
        [sys.executable, "-c", ATTACHED_DRIVER, *argv],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    pids: list[int] = []
    try:
        assert owner.stdout is not None
        pids = json.loads(owner.stdout.readline())
        assert len(pids) == 3 and all(alive(p) for p in pids)
        owner.send_signal(sig)
        owner.wait(timeout=30)
        left = wait_gone(pids, 10.0)
        assert left == [], f"orphans after {sig.name}: {left}"
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        kill_leftovers([p for p in pids if alive(p)])


def test_assets_are_prepared_once(cache_dir: Path) -> None:
    from voicelat.stack import CHAT_TEMPLATE, prepare_assets

    config = StackConfig(cache_dir=cache_dir, state_dir=cache_dir / "unused-state")
    events: list[StackProgress] = []
    t0 = time.monotonic()
    assets = prepare_assets(config, events.append)
    assert time.monotonic() - t0 < 1.0  # the marker spares re-hashing 253 MB
    assert events == []  # nothing to do: prepared by the earlier tests
    assert assets.gguf.stat().st_size > 200_000_000
    assert (assets.piper_dir / "en_US-joe-medium.onnx").stat().st_size > 0
    assert (assets.piper_dir / "en_US-joe-medium.onnx.json").stat().st_size > 0
    assert json.loads(assets.chat_template.read_text()) == CHAT_TEMPLATE
    assert (assets.whisper_model / "model.bin").is_file()


def test_async_probe_helpers_fail_fast_on_a_closed_port() -> None:
    port = free_port(10390)
    with pytest.raises(OSError):
        asyncio.run(probes.wyoming_describe("127.0.0.1", port, timeout=2.0))
