"""A fresh clone as a new user has it: a copy of the checkout, a new HOME, no voicelat installed.

Used by the tests that follow the docs step by step (the README, docs/CI.md's workflow). pip's
real cache directory stands in for a restored one (llama-cpp-python compiles from source, 3-4
minutes on 2 cores, unless its built wheel is there); the stack runs on free ports with its own
state directory, so it neither meets nor stops a developer's.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import ROOT

PORT_VARS = ("VOICELAT_STT_PORT", "VOICELAT_TTS_PORT", "VOICELAT_LLM_PORT")


@dataclass(frozen=True)
class Clone:
    """Where the clone lives and the environment its commands run in."""

    work: Path
    home: Path
    env: dict[str, str]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pip_cache_or_skip() -> Path:
    """pip's cache directory; skips the test when it holds no llama-cpp-python wheel."""
    out = subprocess.run(
        [sys.executable, "-m", "pip", "cache", "dir"], capture_output=True, text=True
    ).stdout.strip()
    cache = Path(out) if out else Path.home() / ".cache" / "pip"
    if not any((cache / "wheels").rglob("llama_cpp_python-*.whl")):
        pytest.skip("no llama-cpp-python wheel in pip's cache (install voicelat[local] once)")
    return cache


def relax_budget(work: Path) -> None:
    """The copy's pipeline gets limits no working run breaks: a loaded test machine is slower
    than the 2-core one the budget is for, and the budget is not what these tests check."""
    local = work / "pipelines" / "local.toml"
    text = local.read_text()
    for key in ("p50_ms = ", "p90_ms = "):
        text = re.sub(rf"^{key}\d+", f"{key}60000", text, flags=re.M)
    local.write_text(text)


def make_clone(tmp_path: Path, pip_cache: Path, path_prefix: Path | None = None) -> Clone:
    """A copy of the checkout (no .git, .venv or results) and its environment."""
    work, home = tmp_path / "checkout", tmp_path / "home"
    ignore = shutil.ignore_patterns(
        ".git", ".venv", "runs", "ci-results", "__pycache__", "*.egg-info", "snapshot_report.html"
    )
    shutil.copytree(ROOT, work, ignore=ignore)
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VOICELAT_", "VIRTUAL_ENV"))}
    env.pop("PYTHONPATH", None)
    env.update({k: str(free_port()) for k in PORT_VARS})
    path = os.environ["PATH"]
    if path_prefix is not None:
        path = f"{path_prefix}:{path}"
    else:  # no virtual environment of the test's first on PATH: `python3` is the system's
        path = os.pathsep.join(p for p in path.split(os.pathsep) if not p.startswith(sys.prefix))
    env.update(
        HOME=str(home),
        PATH=path,
        PIP_CACHE_DIR=str(pip_cache),
        VOICELAT_STATE_DIR=str(tmp_path / "stack-state"),
    )
    return Clone(work, home, env)
