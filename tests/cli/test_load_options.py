"""`voicelat run --concurrency / --rate` bad input: one clear line, exit 2, nothing started."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import voicelat


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--concurrency", "0"], "argument --concurrency/-c: 0 must be at least 1"),
        (["--concurrency", "-3"], "argument --concurrency/-c: -3 must be at least 1"),
        (["-c", "2.5"], "argument --concurrency/-c: '2.5' is not an integer"),
        (["--rate", "0"], "argument --rate: 0 must be a positive number of turns per second"),
        (["--rate", "-1.5"], "argument --rate: -1.5 must be a positive number"),
        (["--rate", "nan"], "argument --rate: nan must be a positive number"),
        (["--rate", "fast"], "argument --rate: 'fast' is not a number"),
        (["--rate", "2", "--concurrency", "4"], "not allowed with argument --rate"),
        (["--concurrency", "4", "--rate", "2"], "not allowed with argument --concurrency"),
        (["--arrival", "bursty", "--rate", "1"], "argument --arrival: invalid choice: 'bursty'"),
        (["--arrival", "constant"], "--arrival and --arrival-seed shape an open-loop schedule"),
        (["--arrival-seed", "3"], "add --rate R"),
    ],
)
def test_bad_load_options_are_one_line_and_exit_2(
    args: list[str], says: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    proc = voicelat("run", "--no-tui", "--out", str(out), *args, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("voicelat: error:")]
    assert len(errors) == 1 and says in errors[0], proc.stderr
    assert not out.exists()  # refused before any run (or server) started


def test_run_help_documents_both_loops() -> None:
    proc = voicelat("run", "--help", timeout=60)
    assert proc.returncode == 0
    for word in ("--concurrency", "closed loop", "--rate", "open loop", "--arrival"):
        assert word in proc.stdout
