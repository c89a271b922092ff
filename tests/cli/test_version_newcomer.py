"""`voicelat --version` names the embedded stack's servers when it runs (issue 18)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers import voicelat
from voicelat.core.base.version import __version__


def test_version_without_a_running_stack_says_so(tmp_path: Path) -> None:
    result = voicelat("--version", env={"VOICELAT_STATE_DIR": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.splitlines()
    assert first.startswith(f"voicelat {__version__} (Python ")
    assert second.startswith("embedded stack: not running")
    assert "llama-cpp-python" in second and "wyoming-piper" in second  # what is installed


@pytest.mark.stack
def test_version_names_each_running_server(local_stack: dict[str, Any]) -> None:
    result = voicelat("--version", env=local_stack["env"])
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1] == "embedded stack:"
    by_name = {ln.split()[0]: ln for ln in lines[2:]}
    for server in local_stack["status"]:
        line = by_name[server.name]
        assert f"pid {server.pid}" in line and server.package in line and "ready" in line
        assert server.version and server.version in line
