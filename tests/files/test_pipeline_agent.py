"""Pipeline files with an [agent] table: one black-box agent instead of the cascade."""

from __future__ import annotations

from pathlib import Path

import pytest

from voicelat.core.base.errors import ConfigError
from voicelat.files.pipeline import load_pipeline

AGENT = """\
[pipeline]
name = "bot"

[agent]
stage = "twilio"
url = "ws://127.0.0.1:8765/twilio"
traces = "pipecat"
trace_wait_ms = 500
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(text)
    return path


def test_agent_table_is_the_pipelines_one_stage_without_the_trace_keys(tmp_path: Path) -> None:
    p = load_pipeline(_write(tmp_path, AGENT))
    assert p.agent == {"stage": "twilio", "url": "ws://127.0.0.1:8765/twilio"}
    assert p.agent.line_of("url") == 6  # type: ignore[attr-defined]
    assert p.agent_traces.mapping == "pipecat" and p.agent_traces.wait_ms == 500
    assert p.s2s is None and p.stt == {}
    assert p.to_json()["agent"]["stage"] == "twilio"
    assert p.to_json()["traces"]["mapping"] == "pipecat"
    assert p.to_json()["traces"]["wait_ms"] == 500


def test_agent_defaults_to_black_box(tmp_path: Path) -> None:
    p = load_pipeline(_write(tmp_path, '[agent]\nstage = "twilio"\n'))
    assert p.agent_traces.mapping == "none" and p.agent_traces.wait_ms == 2000
    assert p.agent_traces.port == 4318 and p.agent_traces.clock_offset_ms == 0.0


def test_an_agent_on_another_host_states_its_clock(tmp_path: Path) -> None:
    text = (
        AGENT + "trace_port = 4400\ntrace_clock_offset_ms = -12.5\ntrace_clock_uncertainty_ms = 2\n"
    )
    p = load_pipeline(_write(tmp_path, text))
    t = p.agent_traces
    assert (t.port, t.clock_offset_ms, t.clock_uncertainty_ms) == (4400, -12.5, 2.0)
    assert "trace_port" not in p.agent
    with pytest.raises(ConfigError, match=r"p\.toml:9: \[agent\] trace_port must be within"):
        load_pipeline(_write(tmp_path, AGENT + "trace_port = 70000\n"))


def test_bad_agent_tables_name_file_line_and_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"p\.toml:7: \[agent\] traces must be one of none, "):
        load_pipeline(_write(tmp_path, AGENT.replace('"pipecat"', '"jaeger"')))
    with pytest.raises(ConfigError, match=r"p\.toml:8: \[agent\] trace_wait_ms must be within"):
        load_pipeline(_write(tmp_path, AGENT.replace("500", "-1")))
    with pytest.raises(ConfigError, match=r"p\.toml:9: \[stt\] cannot be combined with \[agent\]"):
        load_pipeline(_write(tmp_path, AGENT + '[stt]\nstage = "x"\n'))
    with pytest.raises(ConfigError, match=r"\[agent\] cannot be combined with \[s2s\]"):
        load_pipeline(_write(tmp_path, '[s2s]\nstage = "x"\n' + AGENT))
    with pytest.raises(ConfigError, match=r"\[agent\] stage is missing"):
        load_pipeline(_write(tmp_path, '[agent]\nurl = "ws://x:1"\n'))
