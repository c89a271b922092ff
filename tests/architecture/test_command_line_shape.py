"""The command line stays a thin layer (issue #29): each ``voicelat/cli/*.py`` is a parser, a
command and its printing, at most 300 lines, and nothing below it reads ``argparse``.

What the engine, the pytest plugin or a bench script needs (a run, a comparison, a what-if)
takes a typed request built in ``cli/`` (``cli/request.py``), never an ``argparse.Namespace``:
a module outside ``cli/`` that imports argparse fails here, whatever it does with it.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import voicelat

MAX_CLI_LINES = 300
PACKAGE = Path(voicelat.__file__).parent
CLI = PACKAGE / "cli"


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def argparse_importers(root: Path, allowed: Path) -> tuple[str, ...]:
    """Every module under ``root`` but outside ``allowed`` that imports argparse (anywhere in
    its code: a function's own ``import argparse`` counts too)."""
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        if allowed in path.parents:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(n == "argparse" or n.startswith("argparse.") for n in names):
                found.append(path.relative_to(root).as_posix())
                break
    return tuple(found)


@cache
def _package_importers() -> tuple[str, ...]:
    return argparse_importers(PACKAGE, CLI)


def test_every_command_module_is_at_most_300_lines() -> None:
    modules = sorted(CLI.glob("*.py"))
    assert len(modules) > 10  # the command line is where this test looks
    too_long = {p.name: n for p in modules if (n := _lines(p)) > MAX_CLI_LINES}
    assert too_long == {}, (
        f"cli modules over {MAX_CLI_LINES} lines (split the orchestration below cli/, or the "
        f"command into parser / command / printing): {too_long}"
    )


def test_no_module_below_the_command_line_imports_argparse() -> None:
    assert _package_importers() == ()


def test_the_guard_sees_every_way_of_importing_argparse(tmp_path: Path) -> None:
    """A package with argparse imported at the top, inside a function, by name, and in its
    own cli/ (allowed): the check names the three below cli/ and nothing else."""
    (tmp_path / "cli").mkdir()
    (tmp_path / "engine").mkdir()
    (tmp_path / "cli" / "main.py").write_text("import argparse\n")
    (tmp_path / "engine" / "top.py").write_text("import argparse\n")
    (tmp_path / "engine" / "late.py").write_text("def f():\n    import argparse\n")
    (tmp_path / "engine" / "named.py").write_text("from argparse import Namespace\n")
    (tmp_path / "engine" / "clean.py").write_text("import dataclasses\n")
    assert argparse_importers(tmp_path, tmp_path / "cli") == (
        "engine/late.py",
        "engine/named.py",
        "engine/top.py",
    )
