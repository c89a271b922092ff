"""`voicelat completion bash|zsh|fish`: scripts from the parser, run in the real shells."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import voicelat
from voicelat.cli.completion import command_tree
from voicelat.cli.main import build_parser

#: Every top-level command, as the parser has them (more land: none may be left out).
TOP = " ".join(next(c for c in command_tree(build_parser()) if c.path == ()).subcommands)


def _script(tmp_path: Path, shell: str) -> Path:
    result = voicelat("completion", shell)
    assert result.returncode == 0, result.stderr
    path = tmp_path / f"voicelat.{shell}"
    path.write_text(result.stdout)
    return path


def _bash_like(shell: str, script: Path, words: list[str]) -> list[str]:
    # What bash (and zsh's bashcompinit) hand the function: 0-based words, the cursor's index.
    quoted = " ".join(f"'{w}'" for w in words)
    code = (
        f"source {script}; COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; _voicelat; "
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    argv = ["bash", "--norc", "-c", code] if shell == "bash" else ["zsh", "-f", "-c", code]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True).stdout
    # bashcompinit's compgen -W does not filter by the typed prefix: zsh's compadd does, after.
    found = [w for w in out.splitlines() if w]
    return [w for w in found if w.startswith(words[-1])] if shell == "zsh" else found


def test_the_tree_has_every_command_of_the_parser() -> None:
    paths = {c.path for c in command_tree(build_parser())}
    for name in [
        "run",
        "stack",
        "live",
        "devices",
        "ci",
        "baseline",
        "compare",
        "view",
        "serve",
        "fixtures",
        "completion",
    ]:
        assert (name,) in paths, name
    assert {("stack", "up"), ("baseline", "save"), ("fixtures", "annotate")} <= paths


@pytest.mark.e2e
@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_bash_and_zsh_complete_commands_options_and_choices(tmp_path: Path, shell: str) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed (.ci/run installs it)")
    script = _script(tmp_path, shell)
    assert _bash_like(shell, script, ["voicelat", ""]) == TOP.split()
    assert _bash_like(shell, script, ["voicelat", "st"]) == ["stack"]
    assert _bash_like(shell, script, ["voicelat", "stack", ""]) == ["up", "down", "status"]
    assert _bash_like(shell, script, ["voicelat", "fixtures", "c"]) == ["check"]
    assert _bash_like(shell, script, ["voicelat", "run", "--arr"]) == [
        "--arrival",
        "--arrival-seed",
    ]
    assert _bash_like(shell, script, ["voicelat", "run", "--arrival", ""]) == [
        "poisson",
        "constant",
    ]
    assert "--tolerance-ms" in _bash_like(shell, script, ["voicelat", "ci", "--tol"])
    assert _bash_like(shell, script, ["voicelat", "completion", ""]) == ["bash", "zsh", "fish"]


@pytest.mark.e2e
def test_fish_completes_commands_nested_commands_and_choices(tmp_path: Path) -> None:
    if shutil.which("fish") is None:
        pytest.skip("fish is not installed (.ci/run installs it)")
    script = _script(tmp_path, "fish")

    def complete(line: str) -> list[str]:
        code = f"source {script}; complete -C {line!r}"
        out = subprocess.run(
            ["fish", "--no-config", "-c", code],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        return sorted(ln.split("\t")[0] for ln in out.splitlines() if ln)

    assert complete("voicelat st") == ["stack"]
    assert complete("voicelat stack ") == ["down", "status", "up"]
    assert complete("voicelat run --arrival ") == ["constant", "poisson"]
    assert "--min-trailing-ms" in complete("voicelat fixtures annotate --")
    assert complete("voicelat completion ") == ["bash", "fish", "zsh"]


def test_an_unknown_shell_is_a_usage_error() -> None:
    result = voicelat("completion", "powershell")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "invalid choice" in result.stderr
