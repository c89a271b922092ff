"""``voicelat run --network``: bad input is one line and exit 2; on the emulated cascade
(``voicelat serve openai``) a one-way delay d lands where the protocol says (each
request/response and each stream's first event +2d), and the summary records the realised
impairment beside the requested one."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from tests.cli.emulated_run import KEY_ENV, pipeline, serving
from tests.helpers import ROOT, read_turns, voicelat
from voicelat.engine.netem import netem_problem

ENV = {KEY_ENV: "emulator-key", "PYTHONPATH": str(ROOT)}


def _one_line_exit_2(result: object, *needles: str) -> str:
    out = result.stderr.strip()  # type: ignore[attr-defined]
    assert result.returncode == 2, out  # type: ignore[attr-defined]
    errors = [line for line in out.splitlines() if "error" in line]
    assert len(errors) == 1 and "Traceback" not in out, out
    err = errors[0]
    for needle in needles:
        assert needle in err, err
    return err


def _run(*args: str) -> object:
    return voicelat("run", "--no-tui", "--turns", "1", "--warmup", "0", *args, env=ENV, timeout=120)


def test_an_unknown_profile_names_the_builtins(tmp_path: Path) -> None:
    p = ROOT / "pipelines" / "emulated-openai.toml"
    err = _one_line_exit_2(_run("-p", str(p), "--network", "wifi", "-o", str(tmp_path / "o")))
    assert "lan, broadband, 4g, 3g-bad, transatlantic, phone" in err


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("[network]\ndelay = 10\n", "net.toml:2: [network] delay is not a known key"),
        ("[network]\nloss_pct = 100\n", "net.toml:2: [network] loss_pct must be below 100"),
        ("[network]\n[network.up]\ndelay_ms = -3\n", "[network.up] delay_ms must not be negative"),
        ("[other]\n", "has no [network] table"),
    ],
)
def test_a_bad_network_file_says_where(tmp_path: Path, body: str, needle: str) -> None:
    net = tmp_path / "net.toml"
    net.write_text(body)
    p = ROOT / "pipelines" / "emulated-openai.toml"
    _one_line_exit_2(_run("-p", str(p), "--network", str(net), "-o", str(tmp_path / "o")), needle)


def test_a_pipelines_network_table_is_checked_too(tmp_path: Path) -> None:
    p = tmp_path / "p.toml"
    p.write_text(
        (ROOT / "pipelines" / "emulated-openai.toml").read_text()
        + '\n[network]\nprofile = "4g"\njitter_ms = -1\n'
    )
    _one_line_exit_2(_run("-p", str(p), "-o", str(tmp_path / "o")), "[network] jitter_ms")


def test_a_tls_address_cannot_be_relayed(tmp_path: Path) -> None:
    p = ROOT / "pipelines" / "openai.toml"
    _one_line_exit_2(
        _run("-p", str(p), "--network", "4g", "-o", str(tmp_path / "o")),
        "relays plain http://, ws:// and tcp:// addresses only",
    )


@pytest.mark.skipif(netem_problem() is None, reason="netem is usable here: nothing to refuse")
def test_netem_requested_where_it_cannot_run_says_what_is_missing(tmp_path: Path) -> None:
    net = tmp_path / "net.toml"
    net.write_text('[network]\nprofile = "lan"\nmode = "netem"\n')
    p = ROOT / "pipelines" / "emulated-openai.toml"
    err = _one_line_exit_2(_run("-p", str(p), "--network", str(net), "-o", str(tmp_path / "o")))
    assert "the relay is the fallback" in err and str(netem_problem()) in err


D_MS = 40.0


@pytest.mark.e2e
def test_a_run_under_a_profile_records_what_the_relay_realised(tmp_path: Path) -> None:
    """The fast one: one run under a 40 ms one-way delay against the exact emulator, whose
    LLM answers its first token 120 ms after the request (emulate/profiles/exact.toml)."""
    net = tmp_path / "d40.toml"
    net.write_text(f'[network]\nname = "d40"\ndelay_ms = {D_MS}\n')
    with serving("exact") as (base_url, _):
        r = voicelat(
            "run", "--no-tui", "-p", str(pipeline(tmp_path, base_url)), "--turns", "1",
            "--warmup", "1", "-o", str(tmp_path / "o"), "--network", str(net),
            env=ENV, timeout=300,
        )  # fmt: skip
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    ttft = summary["segments"]["llm_ttft"]["p50"] / 1e6
    # 120 ms injected + 2d; the emulator's headers and timers add a few ms (2.5 ms on loopback).
    assert 120 + 2 * D_MS <= ttft <= 120 + 2 * D_MS + 8, ttft
    section = summary["network"]
    assert section["requested"]["name"] == "d40" and section["misses"] == []
    assert abs(section["realised"]["down"]["delay_p50_ms"] - D_MS) <= 1.0


@pytest.mark.slow
def test_a_one_way_delay_lands_in_each_segment_the_protocol_predicts(tmp_path: Path) -> None:
    net = tmp_path / "d40.toml"
    net.write_text(f'[network]\nname = "d40"\ndelay_ms = {D_MS}\n')
    with serving("exact") as (base_url, _):
        pipe = pipeline(tmp_path, base_url)
        runs = {}
        for name, extra in (("clean", ()), ("d40", ("--network", str(net)))):
            out = tmp_path / name
            r = voicelat(
                "run", "--no-tui", "-p", str(pipe), "--turns", "3", "--warmup", "1",
                "-o", str(out), *extra, env=ENV, timeout=300,
            )  # fmt: skip
            assert r.returncode == 0, r.stderr
            runs[name] = json.loads((out / "summary.json").read_text())
    clean, slow = runs["clean"], runs["d40"]
    # Paired by turn (both runs play the same fixtures in the same order): the median of the
    # per-turn differences. The relay's own precision (2 ms at P50) is tests/network/
    # test_relay.py's; here the emulator's timers on a busy machine add a few ms each way
    # (its ground truth: marks vs scheduled_ns), hence 6 ms around 2d.
    # Warm-up turns open the connections (a cold one pays the handshake's RTT too): left out.
    measured = [[t for t in read_turns(tmp_path / r) if not t["warmup"]] for r in ("clean", "d40")]
    pairs = list(zip(*measured, strict=True))
    assert len(pairs) == 3

    def delta(seg: str) -> float:
        return statistics.median(
            (b["segments_ns"][seg] - a["segments_ns"][seg]) / 1e6 for a, b in pairs
        )

    # Each HTTP exchange over a kept-alive connection: the request's d plus the reply's d.
    for seg in ("stt", "llm_ttft", "tts_ttfb"):
        assert abs(delta(seg) - 2 * D_MS) <= 6.0, (seg, delta(seg))
    # Endpointing is the client's own VAD on local audio: the network does not touch it.
    assert abs(delta("endpointing")) <= 2.0
    net_section = slow["network"]
    assert net_section["requested"]["up"]["delay_ms"] == D_MS
    assert net_section["applied_by"] == "relay" and net_section["misses"] == []
    for direction in ("up", "down"):
        assert abs(net_section["realised"][direction]["delay_p50_ms"] - D_MS) <= 1.0
        assert net_section["realised"][direction]["packets"] > 10
    assert "network" not in clean
    assert slow["trust"]["trustworthy"] == clean["trust"]["trustworthy"]


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("lan,wifi", "--network wifi: not a built-in profile"),
        ("lan,lan", "--network lan,lan: a profile is named twice"),
    ],
)
def test_compare_network_axis_bad_input(tmp_path: Path, spec: str, needle: str) -> None:
    p = ROOT / "pipelines" / "emulated-openai.toml"
    r = voicelat(
        "compare",
        str(p),
        "--network",
        spec,
        "-o",
        str(tmp_path / "o"),
        "--no-tui",
        env=ENV,
        timeout=120,
    )
    _one_line_exit_2(r, needle)


@pytest.mark.slow
def test_compare_over_a_network_axis_puts_the_delay_in_each_exchange(tmp_path: Path) -> None:
    with serving("exact") as (base_url, _):
        r = voicelat(
            "compare", str(pipeline(tmp_path, base_url)), "--network", "lan,transatlantic",
            "--turns", "3", "--warmup", "1", "-o", str(tmp_path / "o"), "--no-tui",
            env=ENV, timeout=600,
        )  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "o" / "comparison.json").read_text())
    labels = {c["name"]: c["labels"] for c in doc["combinations"]}
    assert labels["transatlantic"]["network"] == "transatlantic" and "lan" in labels
    lan, far = (
        json.loads((tmp_path / "o" / d / "summary.json").read_text())
        for d in ("lan", "transatlantic")
    )
    for seg in ("llm_ttft", "tts_ttfb"):
        delta = (far["segments"][seg]["p50"] - lan["segments"][seg]["p50"]) / 1e6
        assert abs(delta - 2 * (80 - 0.5)) <= 8.0, (seg, delta)  # 2 x 79.5 ms, warm connections
    assert far["network"]["requested"]["name"] == "transatlantic"
    assert abs(far["network"]["realised"]["down"]["delay_p50_ms"] - 80) <= 2.0


@pytest.mark.e2e
def test_ctrl_c_keeps_the_realised_impairment_and_stops_the_relay(tmp_path: Path) -> None:
    """Ctrl-C at a terminal signals the whole process group, the relay child included: it
    ignores it, the run stops it and still records what it realised."""
    import os
    import signal
    import subprocess
    import sys

    from tests.cli.emulated_run import finish, run_args, wait_for

    out = tmp_path / "out"
    with serving("exact") as (base_url, _):
        proc = subprocess.Popen(
            [sys.executable, "-m", "voicelat", "run", *run_args(tmp_path, base_url, out),
             "--network", "lan"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
            env={**os.environ, **ENV}, start_new_session=True,
        )  # fmt: skip
        lines = wait_for(proc, "1/30")
        os.killpg(proc.pid, signal.SIGINT)
        stderr = finish(proc, lines)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr, stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["status"] == "interrupted"
    assert summary["network"]["realised"]["down"]["packets"] > 0
    relays = subprocess.run(["pgrep", "-s", str(proc.pid)], capture_output=True, text=True)
    assert relays.stdout.strip() == ""  # nothing of the run's session is left running
