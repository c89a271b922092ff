"""engine/network.py: which addresses a run relays, how the pipeline is re-pointed, and what
the summary records (the realised impairment beside the requested; a miss is a trust reason)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ROOT
from voicelat.core.base.errors import ConfigError
from voicelat.core.base.network import Direction, NetworkProfile, builtin_profile
from voicelat.engine.network import NetworkRun, open_network, relayed_pipeline
from voicelat.files.pipeline import load_pipeline


def test_a_run_without_a_network_opens_nothing() -> None:
    pipe = load_pipeline(ROOT / "pipelines" / "emulated-openai.toml")
    assert open_network(None, pipe) is None


def test_the_stages_are_pointed_at_one_relay_per_target_and_it_is_stopped() -> None:
    pipe = load_pipeline(ROOT / "pipelines" / "emulated-openai.toml")
    run = open_network("lan", pipe)
    assert run is not None and run.relay is not None
    try:
        ((host, port),) = run.relay.listen
        # The three stages share one server (127.0.0.1:8401): one relay, each path kept.
        for kind in ("stt", "llm", "tts"):
            assert getattr(run.pipeline, kind)["base_url"] == f"http://{host}:{port}/v1"
        assert run.relay.targets == [("tcp", "127.0.0.1", 8401)]
        assert pipe.stt["base_url"] == "http://127.0.0.1:8401/v1"  # the original untouched
    finally:
        section = run.close()
    assert section["requested"]["name"] == "lan" and section["applied_by"] == "relay"
    assert run.relay._proc is None  # the child is gone


def test_an_agent_url_keeps_its_path_and_query() -> None:
    pipe = load_pipeline(ROOT / "pipelines" / "agent-twilio.toml")
    out = relayed_pipeline(pipe, {("127.0.0.1", 7860): ("127.0.0.1", 5555)})
    assert out.agent["url"] == "ws://127.0.0.1:5555/ws"


def test_a_tls_address_is_refused_in_one_line() -> None:
    pipe = load_pipeline(ROOT / "pipelines" / "openai-realtime.toml")
    with pytest.raises(ConfigError, match=r"\[s2s\] base_url = 'wss://api.openai.com/v1': "):
        open_network("4g", pipe)


class _Realised:
    """The relay's answer at stop, as given (the recording logic is what is tested)."""

    def __init__(self, realised: dict[str, Any]) -> None:
        self.realised = realised

    def close(self) -> dict[str, Any]:
        return self.realised


def _outcome(tmp_path: Path) -> Any:
    summary = {"trust": {"trustworthy": True, "reasons": [], "checks": {}, "thresholds": {}}}
    return argparse.Namespace(run_dir=tmp_path, summary=summary)


def test_a_realised_miss_is_recorded_and_makes_the_run_untrustworthy(tmp_path: Path) -> None:
    profile = NetworkProfile("d", up=Direction(delay_ms=40), down=Direction(delay_ms=40))
    realised = {
        "up": {"packets": 100, "lost": 0, "loss_pct": 0.0, "delay_p50_ms": 52.0},
        "down": {"packets": 100, "lost": 0, "loss_pct": 0.0, "delay_p50_ms": 40.2},
    }
    run = NetworkRun(profile, None, relay=_Realised(realised))  # type: ignore[arg-type]
    outcome = _outcome(tmp_path)
    run.record(outcome)
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written["network"]["realised"] == realised
    assert written["network"]["requested"]["up"]["delay_ms"] == 40
    assert written["trust"]["trustworthy"] is False
    (reason,) = written["trust"]["reasons"]
    assert reason["code"] == "network_missed"
    assert "up: realised P50 one-way delay 52 ms, requested 40 ms" in reason["message"]


def test_a_realised_match_keeps_the_trust_as_it_was(tmp_path: Path) -> None:
    profile = builtin_profile("transatlantic")
    realised = {
        d: {"packets": 100, "lost": 0, "loss_pct": 0.0, "delay_p50_ms": 80.4}
        for d in ("up", "down")
    }
    run = NetworkRun(profile, None, relay=_Realised(realised))  # type: ignore[arg-type]
    outcome = _outcome(tmp_path)
    run.record(outcome)
    assert outcome.summary["trust"] == {
        "trustworthy": True, "reasons": [], "checks": {}, "thresholds": {},
    }  # fmt: skip
    assert outcome.summary["network"]["misses"] == []


def test_a_relay_on_loopback_is_refused_for_a_ray_cluster() -> None:
    pipe = load_pipeline(ROOT / "pipelines" / "emulated-openai.toml")
    with pytest.raises(ConfigError, match="with --ray: the relay listens on this machine"):
        open_network("4g", pipe, ray="auto")
