"""`voicelat agent` and its manager without the models: error paths, exit codes, the state file.

Fast and in the default suite. One test starts the real bot script with no LLM server behind
it: it must exit with its one-line reason, and `agent up` must report that line and exit 3.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from voicelat.cli.main import main
from voicelat.core.base.errors import EXIT_INFRA, EXIT_OK, EXIT_USAGE, ConfigError
from voicelat.stack import agent as agent_mod
from voicelat.stack.agent import (
    TRANSPORTS,
    AgentConfig,
    PipecatBot,
    bot_script,
    check_agent_installed,
)
from voicelat.stack.config import NotInstalledError, StackConfig

ROOT = Path(__file__).resolve().parents[2]


def _free_port(start: int = 9160) -> int:
    for port in range(start, start + 10):
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 9160-9169")


@pytest.fixture
def listener() -> Iterator[int]:
    """A port some other program holds (a listening socket of this test)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", _free_port()))
        s.listen()
        yield int(s.getsockname()[1])


def _args(tmp_path: Path, port: int) -> list[str]:
    return ["--state-dir", str(tmp_path / "state"), "--cache-dir", str(tmp_path / "cache"),
            "--port", str(port)]  # fmt: skip


def _one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("voicelat: error:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def test_the_bot_script_is_found_and_its_urls_follow_the_port() -> None:
    script = bot_script()
    assert script == ROOT / "examples" / "pipecat-bot" / "bot.py"
    cfg = AgentConfig(stack=StackConfig(llm_port=8180), port=9161, otlp_endpoint=None)
    assert cfg.urls() == {
        "twilio": "ws://127.0.0.1:9161/ws",
        "pipecat-ws": "ws://127.0.0.1:9161/ws-client",
        "webrtc": "http://127.0.0.1:9161/api/offer",
    }
    cmd = cfg.command(script)
    assert cmd[1] == str(script)
    assert cmd[cmd.index("--llm-url") + 1] == "http://127.0.0.1:8180"
    assert "--otlp-endpoint=" in cmd  # no tracing, and no empty argument (see command())
    assert cmd[cmd.index("--transport") + 1] == ",".join(TRANSPORTS)


def test_a_missing_package_names_the_agents_extra() -> None:
    with pytest.raises(NotInstalledError, match=r"voicelat\[agents\]") as info:
        check_agent_installed({"no_such_module_for_voicelat": "pipecat-ai", "json": "x"})
    assert "pipecat-ai" in str(info.value) and "x" not in str(info.value).split("missing")[1]
    assert info.value.exit_code == EXIT_INFRA
    check_agent_installed()  # the real extra is installed in the test environment


def test_bad_transport_and_port_are_configuration_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ConfigError, match="unknown agent transport sip"):
        AgentConfig(transports=("twilio", "sip"))
    monkeypatch.setenv("VOICELAT_AGENT_PORT", "seventy")
    with pytest.raises(ConfigError, match="VOICELAT_AGENT_PORT='seventy' is not a port"):
        AgentConfig()


def test_cli_up_without_pipecat_exits_3_with_the_install_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(agent_mod, "_REQUIRED_MODULES", {"no_such_pipecat": "pipecat-ai"})
    code = main(["agent", "up", "--no-stack", *_args(tmp_path, _free_port())])
    assert code == EXIT_INFRA
    line = _one_error_line(capsys.readouterr().err)
    assert "missing pipecat-ai" in line and "pip install 'voicelat[agents]'" in line


def test_cli_up_on_a_taken_port_exits_3_naming_the_port(
    tmp_path: Path, listener: int, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["agent", "up", "--no-stack", *_args(tmp_path, listener)])
    assert code == EXIT_INFRA
    line = _one_error_line(capsys.readouterr().err)
    assert f"port {listener} for the example bot" in line and "--port" in line
    assert not (tmp_path / "state" / "agent.json").exists()


def test_cli_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["agent", "up", "--transport", "sip", *_args(tmp_path, _free_port())])
    assert code == EXIT_USAGE
    assert "unknown agent transport sip" in _one_error_line(capsys.readouterr().err)


def test_cli_status_and_down_when_nothing_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = _free_port()
    assert main(["agent", "status", *_args(tmp_path, port)]) == EXIT_INFRA
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["agent", f"http://127.0.0.1:{port}", "-", "stopped"]
    assert f"ws://127.0.0.1:{port}/ws" in out
    assert main(["agent", "down", *_args(tmp_path, port)]) == EXIT_OK
    assert "was not running" in capsys.readouterr().err


def test_a_stale_state_file_is_reported_and_cleared(tmp_path: Path) -> None:
    cfg = AgentConfig(
        stack=StackConfig(state_dir=tmp_path / "state", cache_dir=tmp_path), port=_free_port()
    )
    cfg.state_file.parent.mkdir(parents=True)
    cfg.state_file.write_text(json.dumps({"agent": {"pid": 2**22 - 1, "cmdline": ["gone"]}}))
    status = PipecatBot(cfg).status()
    assert status.state == "stopped" and "is gone" in status.detail
    assert PipecatBot(cfg).down() is None
    assert not cfg.state_file.exists()


def test_the_bot_exiting_at_startup_is_reported_with_its_own_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real bot.py, no LLM server on the port: it exits 3, `agent up` quotes why."""
    llm_port = _free_port(9165)  # nothing listens there
    args = [*_args(tmp_path, _free_port()), "--llm-port", str(llm_port)]
    code = main(["agent", "up", "--no-stack", "--no-traces", "--timeout", "60", *args])
    assert code == EXIT_INFRA
    line = _one_error_line(capsys.readouterr().err)
    assert "the example bot exited with code 3 during startup" in line
    assert f"the LLM server at http://127.0.0.1:{llm_port} does not answer" in line
    assert not (tmp_path / "state" / "agent.json").exists()


def test_the_packaged_bot_is_preferred_and_a_missing_one_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a wheel the bot is package data (voicelat/data/examples/pipecat-bot/bot.py)."""
    package = tmp_path / "site" / "voicelat"
    monkeypatch.setattr(agent_mod, "__file__", str(package / "stack" / "agent.py"))
    with pytest.raises(NotInstalledError, match="the example Pipecat bot is missing"):
        bot_script()
    packaged = package / "data" / "examples" / "pipecat-bot" / "bot.py"
    packaged.parent.mkdir(parents=True)
    packaged.write_text("")
    assert bot_script() == packaged.resolve()


async def test_the_async_forms_do_not_block_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = AgentConfig(
        stack=StackConfig(state_dir=tmp_path / "state", cache_dir=tmp_path), port=_free_port()
    )
    bot = PipecatBot(cfg)
    assert (await bot.astatus()).state == "stopped"
    assert await bot.adown() is None
    monkeypatch.setitem(agent_mod._REQUIRED_MODULES, "no_such_pipecat_module", "pipecat-ai")
    with pytest.raises(NotInstalledError, match="missing pipecat-ai"):
        await bot.aup()


def test_the_livekit_agent_is_its_own_bot_with_one_bridge_and_no_stack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = bot_script("livekit")
    assert script == ROOT / "examples" / "livekit-agent" / "agent.py"
    cfg = AgentConfig(
        bot="livekit", port=9162, openai_url="http://127.0.0.1:8499/v1", otlp_endpoint=None,
        stack=StackConfig(state_dir=tmp_path),
    )  # fmt: skip
    assert cfg.urls() == {"livekit": "ws://127.0.0.1:9162/ws"} and not cfg.start_stack
    cmd = cfg.command(script)
    assert cmd[cmd.index("--openai-url") + 1] == "http://127.0.0.1:8499/v1"
    assert "--no-traces" in cmd and "--llm-url" not in cmd
    # Recorded apart from the Pipecat bot: both examples may run at once.
    assert cfg.state_file.name == "agent-livekit.json" and cfg.log_path.name == "agent-livekit.log"
    with pytest.raises(ConfigError, match="unknown example bot 'vapi'"):
        AgentConfig(bot="vapi")
    monkeypatch.setattr(agent_mod, "_LIVEKIT_MODULES", {"no_such_livekit": "livekit-agents"})
    code = main(["agent", "up", "--bot", "livekit", *_args(tmp_path, _free_port())])
    assert code == EXIT_INFRA
    line = _one_error_line(capsys.readouterr().err)
    assert "example LiveKit agent cannot run (missing livekit-agents)" in line
    assert "pip install 'voicelat[livekit]'" in line


def test_cli_livekit_status_names_its_bridge_on_its_own_port(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VOICELAT_AGENT_PORT", raising=False)
    state = ["--state-dir", str(tmp_path / "state"), "--cache-dir", str(tmp_path / "cache")]
    assert main(["agent", "status", "--bot", "livekit", *state]) == EXIT_INFRA
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:2] == ["agent", "http://127.0.0.1:7880"]
    assert out[1].split() == ["livekit", "ws://127.0.0.1:7880/ws"]
