"""README.md's install section names the system packages the tests need (issue #29: a new user
found them only by reading skipped tests), the same ones .ci/run installs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _readme_apt() -> set[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    line = re.search(r"apt-get install ([^\n`]+)", text)
    assert line is not None, "README.md has no apt-get install line"
    return set(line.group(1).split())


def _ci_apt() -> set[str]:
    text = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    block = re.search(r"apt-get install -y -qq \\\n\s+([^>]+)>", text)
    assert block is not None, ".ci/run has no apt-get install"
    return set(block.group(1).split())


def _programs_the_tests_look_for() -> set[str]:
    found: set[str] = set()
    for path in (ROOT / "tests").rglob("*.py"):
        found |= set(re.findall(r'shutil\.which\("([\w-]+)"\)', path.read_text(encoding="utf-8")))
    return found


def test_the_readme_lists_what_ci_installs() -> None:
    assert _ci_apt() <= _readme_apt(), _ci_apt() - _readme_apt()


def test_every_program_a_test_looks_for_is_installed_by_the_readme_line() -> None:
    # Debian's package names are the programs' names for these, but for the few mapped here.
    package = {"ip": "iproute2", "tc": "iproute2"}
    looked_for = {package.get(p, p) for p in _programs_the_tests_look_for()}
    missing = looked_for - _readme_apt() - {"bash", "python3"}
    assert missing == set(), f"tests look for {missing}: add them to README.md and .ci/run"


def test_the_readme_says_the_install_can_take_ten_minutes_and_pip_is_silent() -> None:
    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert "about 10 minutes" in text and "pip prints nothing" in text
