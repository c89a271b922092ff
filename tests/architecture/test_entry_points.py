"""``python -m voicelat`` and the ``voicelat`` console script both reach the command line."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points

from voicelat.cli.main import main
from voicelat.core.base.version import __version__


def test_python_dash_m_voicelat() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "voicelat", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    # The first line; the next ones name the embedded stack's servers (tests/cli).
    assert out.stdout.splitlines()[0].startswith(f"voicelat {__version__} (Python ")


def test_console_script_is_the_cli_main() -> None:
    (script,) = [ep for ep in entry_points(group="console_scripts") if ep.name == "voicelat"]
    assert script.value == "voicelat.cli.main:main"
    assert script.load() is main


def test_bad_usage_is_exit_code_2() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "voicelat", "--no-such-flag"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert out.stderr.startswith("voicelat: error: ")
