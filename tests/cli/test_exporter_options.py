"""Exporter and agent options refused or explained in one line: ``--metrics-linger inf`` (an
``OverflowError`` text from the exporter after the run), ``agent up --timeout -1`` and
``stack up --timeout -1`` (exit 3 after starting servers, instead of 2 before), and ``agent
status`` with nothing running (no line said so)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT
from voicelat.cli.main import build_parser


def _usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args(argv)
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("voicelat: error: "), err
    return err[0]


@pytest.mark.parametrize("value", ["inf", "1e308", "nan", "-1", "86401"])
def test_metrics_linger_out_of_range_is_refused_at_parse_time(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in ("run", "ci"):
        assert "--metrics-linger" in _usage_error([command, "--metrics-linger", value], capsys)


def test_metrics_linger_in_range_is_taken() -> None:
    args = build_parser().parse_args(["run", "--metrics-linger", "30"])
    assert args.metrics_linger == 30.0


@pytest.mark.parametrize("value", ["-1", "0", "inf", "nan", "soon"])
@pytest.mark.parametrize("command", [["agent", "up"], ["stack", "up"]])
def test_a_timeout_that_is_not_positive_is_exit_2_before_anything_starts(
    command: list[str], value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "--timeout" in _usage_error([*command, "--timeout", value], capsys)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_agent_status_with_nothing_running_says_so(tmp_path: Path) -> None:
    port = _free_port()
    proc = subprocess.run(
        [sys.executable, "-m", "voicelat", "agent", "status", "--port", str(port)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "VOICELAT_STATE_DIR": str(tmp_path)},
        timeout=60,
    )
    assert proc.returncode == 3  # "exit status 0 only if it is ready"
    assert proc.stdout.splitlines()[0].endswith("stopped"), proc.stdout
    assert proc.stderr.strip() == (
        "voicelat: the example bot is not running: start it with `voicelat agent up`"
    )
