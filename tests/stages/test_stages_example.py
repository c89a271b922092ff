"""examples/acme-voicelat, the third-party stage docs/STAGES.md walks through, kept true.

The example is built and installed as a user would (pip, its own pyproject, into a target
directory rather than the shared environment), found through its ``voicelat.stages`` entry
point, and its own tests run: real turns through `voicelat run` against `voicelat serve openai`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.helpers import ROOT

EXAMPLE = ROOT / "examples" / "acme-voicelat"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment in which the example package is installed (PYTHONPATH to its target)."""
    target = tmp_path_factory.mktemp("acme-site")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(target),
            str(EXAMPLE),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    path = os.pathsep.join(p for p in (str(target), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path}


def test_the_entry_point_finds_the_example_stage(installed: dict[str, str]) -> None:
    code = (
        "from voicelat.stages.base import load_stage_class;"
        "cls = load_stage_class('acme-llm', 'llm'); print(cls.__module__, cls.kind)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=installed, capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["acme_voicelat.llm", "llm"]


@pytest.mark.e2e
def test_the_example_runs_real_turns_against_the_emulator(installed: dict[str, str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=EXAMPLE,
        env=installed,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "2 passed" in result.stdout


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, re.S)


def test_the_code_docs_stages_shows_is_the_example_code() -> None:
    # docs/STAGES.md quotes the example instead of paraphrasing it: every Python block is a
    # verbatim piece of acme_voicelat/llm.py, the entry-point block a piece of its pyproject.
    doc = (ROOT / "docs" / "STAGES.md").read_text()
    source = (EXAMPLE / "acme_voicelat" / "llm.py").read_text()
    python = _blocks(doc, "python")
    assert len(python) >= 3
    for block in python:
        assert block in source, f"docs/STAGES.md quotes code not in the example:\n{block}"
    entry = next(b for b in _blocks(doc, "toml") if "voicelat.stages" in b)
    assert entry in (EXAMPLE / "pyproject.toml").read_text()
