"""``voicelat watch`` for real: the command in a subprocess, the test exporter's OTLP protobuf
bodies (real OpenTelemetry SDK spans, tests/trace_exporter.py) POSTed to it over loopback as an
exporter sends them; Prometheus scraped; SIGHUP reopens a period, SIGTERM writes the last one;
a span store over its cap drops and counts."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tests.trace_exporter import BASE_NS, E2E_NS, conversation, request_bytes
from voicelat.files.results import load_run


def _start(out: Path, *extra: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "voicelat", "watch", "--port", "0", "--out", str(out)]
    return subprocess.Popen(
        [*cmd, "--every", "30", "--settle", "0.5", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


@pytest.fixture
def watch(tmp_path: Path) -> Iterator[Callable[..., tuple[subprocess.Popen[str], list[str]]]]:
    procs: list[subprocess.Popen[str]] = []

    def start(*extra: str) -> tuple[subprocess.Popen[str], list[str]]:
        proc = _start(tmp_path / "periods", *extra)
        procs.append(proc)
        assert proc.stdout is not None
        first = proc.stdout.readline().split()
        assert first[:1] == ["watching"], (first, proc.stderr.read() if proc.stderr else "")
        urls = [first[1]]
        if "--metrics-port" in extra:
            urls.append(proc.stdout.readline().split()[1])
        return proc, urls

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def _post(url: str, body: bytes) -> int:
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/x-protobuf"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        status: int = resp.status
    return status


def _until(check: Callable[[], object], timeout: float = 15.0) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError("timed out")


def _metric(url: str, name: str) -> float | None:
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_watch_takes_turns_serves_histograms_reopens_on_sighup_and_ends_on_sigterm(
    tmp_path: Path, watch: Callable[..., tuple[subprocess.Popen[str], list[str]]]
) -> None:
    proc, (url, metrics) = watch("--metrics-port", "0")
    for i, conv in enumerate(("a", "b")):  # two calls of two turns
        assert _post(url, request_bytes(conversation(conv, 2, base_ns=BASE_NS + i * 60 * 10**9)))
    count = _until(lambda: _metric(metrics, "voicelat_turn_e2e_seconds_count") == 4.0)
    assert count
    # The same histogram a run exports: its sum is the four turns' e2e.
    total = _metric(metrics, "voicelat_turn_e2e_seconds_sum")
    assert total is not None and abs(total - 4 * E2E_NS / 1e9) < 1e-6
    periods = tmp_path / "periods"
    proc.send_signal(signal.SIGHUP)
    first = _until(lambda: sorted(periods.glob("0001-*")))
    run = load_run(first[0])  # type: ignore[index]
    assert len(run.turns) == 4 and {t.e2e_ns for t in run.turns} == {E2E_NS}
    assert run.summary is not None and run.summary["run"]["watch"]["reason"] == "reopen"
    assert _post(url, request_bytes(conversation("c", 1, base_ns=BASE_NS + 200 * 10**9)))
    _until(lambda: _metric(metrics, "voicelat_turn_e2e_seconds_count") == 5.0)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    (last,) = sorted(periods.glob("0002-*"))
    final = load_run(last)
    assert [t.fixture for t in final.turns] == ["c"] and final.turns[0].index == 4
    assert final.summary is not None and final.summary["run"]["watch"]["turns"] == 5
    assert "5 turn(s) in all" in out and "Traceback" not in err


def test_a_flood_over_the_span_cap_is_dropped_and_counted(
    tmp_path: Path, watch: Callable[..., tuple[subprocess.Popen[str], list[str]]]
) -> None:
    proc, (url,) = watch("--max-spans", "12")
    # Three calls of two turns (9 spans each) in one export batch: the cap keeps at most 12
    # spans, so the two calls fed first are let go, with their four turns, before any is taken.
    spans = [
        s for i in range(3) for s in conversation(f"f{i}", 2, base_ns=BASE_NS + i * 60 * 10**9)
    ]
    assert _post(url, request_bytes(spans)) == 200
    time.sleep(1.5)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    periods = sorted((tmp_path / "periods").glob("*"))
    watched = load_run(periods[-1]).summary["run"]["watch"]  # type: ignore[index]
    assert watched["spans_dropped"] == 18 and watched["turns_dropped"] == 4
    assert watched["turns"] == 2  # every turn taken or counted
    assert [t.fixture for t in load_run(periods[-1]).turns] == ["f2", "f2"]
    assert f"dropped {watched['spans_dropped']} span(s)" in out


def test_a_port_in_use_is_exit_3_and_a_bad_option_exit_2(tmp_path: Path) -> None:
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = str(held.getsockname()[1])
        cmd = [sys.executable, "-m", "voicelat", "watch", "--out", str(tmp_path / "o")]
        busy = subprocess.run([*cmd, "--port", port], capture_output=True, text=True, timeout=60)
    assert busy.returncode == 3 and "cannot listen" in busy.stderr
    assert busy.stderr.count("\n") == 1 and "Traceback" not in busy.stderr
    bad = subprocess.run([*cmd, "--window", "0"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--window" in bad.stderr
    assert not (tmp_path / "o").exists()
