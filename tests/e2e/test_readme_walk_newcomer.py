"""A fresh clone, walked as the README says (issue 18's "Done when").

A copy of the checkout under a new HOME, with nothing of voicelat installed, runs the README's
first command as written (a virtual environment, the install with CMAKE_ARGS, `voicelat run`),
then the commands the README names for a newcomer's next steps. The run's output must have the
shape of the README's sample output, line kind by line kind.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.e2e.fresh_clone import make_clone, pip_cache_or_skip
from tests.helpers import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    start = README.index(f"## {title}")
    return README[start : README.index("\n## ", start + 3)]


def _first_block(title: str, lang: str = "bash") -> str:
    match = re.search(rf"```{lang}\n(.*?)```", _section(title), re.S)
    assert match, f"no ```{lang} block under ## {title}"
    return match.group(1)


def test_the_readme_first_command_is_what_the_walk_runs() -> None:
    command = _first_block("Two commands")
    assert "python3 -m venv .venv" in command
    assert 'CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF"' in command
    assert command.strip().endswith(".venv/bin/voicelat run")


@pytest.mark.slow
@pytest.mark.stack
def test_a_fresh_clone_follows_the_readme(tmp_path: Path) -> None:
    clone = make_clone(tmp_path, pip_cache_or_skip())
    run = lambda cmd, timeout=900: subprocess.run(  # noqa: E731
        ["bash", "-c", f"set -euo pipefail\n{cmd}"],
        cwd=clone.work,
        env=clone.env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    try:
        first = run(_first_block("Two commands"))
        log = first.stdout + first.stderr
        assert first.returncode == 0, log[-4000:]
        assert "Building wheel for llama-cpp-python" not in log, "pip's cache was not used"
        # The output has every kind of line the README's sample shows.
        sample = _first_block("Sample output", "")
        seen = {ln.split()[0].lower() for ln in log.splitlines() if ln and not ln[0].isspace()}
        for line in sample.splitlines():
            if line.startswith(("$", "[", " ", "...")) or not line.strip():
                continue
            # The first word: "trust:" may read "TRUST:" on a loaded machine, numbers differ.
            assert line.split()[0].lower() in seen, f"README sample line {line!r}"
        assert re.search(r"from the endpoint: P50 band \d+ ms, P90 band \d+ ms", first.stdout)
        # The next steps a newcomer takes, from the README's command table.
        check = run(".venv/bin/voicelat fixtures check fixtures", timeout=120)
        assert check.returncode == 0 and "0 error(s)" in check.stdout, check.stdout
        version = run(".venv/bin/voicelat --version", timeout=60)
        assert version.returncode == 0 and version.stdout.startswith("voicelat ")
        bash = run(".venv/bin/voicelat completion bash > c.bash && bash -n c.bash", timeout=60)
        assert bash.returncode == 0, bash.stderr
    finally:
        run(".venv/bin/voicelat stack down || true", timeout=60)
        shutil.rmtree(clone.work / ".venv", ignore_errors=True)  # about 1 GB
