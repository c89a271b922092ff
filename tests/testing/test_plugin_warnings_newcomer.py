"""Installing voicelat keeps wyoming's audioop DeprecationWarning out of pytest's output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_a_suite_importing_wyoming_reports_no_audioop_warning(tmp_path: Path) -> None:
    test = tmp_path / "test_uses_wyoming.py"
    test.write_text("import wyoming.audio\n\n\ndef test_it():\n    assert wyoming.audio\n")
    # A fresh interpreter: wyoming must not be imported yet, or there is nothing to filter.
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONWARNINGS": ""},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout
    assert "1 passed" in result.stdout
    assert "audioop" not in result.stdout, result.stdout


def test_without_the_filter_the_warning_would_show(tmp_path: Path) -> None:
    # The test above can fail: with voicelat's plugin disabled the warning is there.
    test = tmp_path / "test_uses_wyoming.py"
    test.write_text("import wyoming.audio\n\n\ndef test_it():\n    assert wyoming.audio\n")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:voicelat",
            str(test),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "audioop" in result.stdout
