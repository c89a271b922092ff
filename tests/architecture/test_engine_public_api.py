"""Live mode, compare and every module outside the engine use only the engine's public API.

Issue #11: live sessions (``engine/live.py``) and ``voicelat compare`` used to reach into the
runner's private methods (``runner._turn_body``...), so the turn's code could not change
without breaking them. The check: the names the engine's modules keep private (module-level
``_x`` and the ``_x`` members of their classes) appear in no import and no attribute access on
another object (``self._x`` inside a module's own classes is its own business) in those
modules. Issue #22 extends it to every engine module: the turn shapes, calls and live mode
share the engine's phases (``engine/phases.py``) through their public names, never another
module's private ``_Listener``-style helper.
"""

from __future__ import annotations

import ast
from pathlib import Path

import voicelat

PACKAGE = Path(voicelat.__file__).parent
ENGINE = PACKAGE / "engine"


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_names(tree: ast.Module) -> set[str]:
    """Module-level ``_x`` definitions, and the ``_x`` members of the module's classes."""
    names: set[str] = set()
    for node in tree.body:
        names.update(_defined(node))
        if isinstance(node, ast.ClassDef):
            for member in ast.walk(node):
                names.update(_defined(member))
                if (
                    isinstance(member, ast.Attribute)
                    and isinstance(member.ctx, ast.Store)
                    and isinstance(member.value, ast.Name)
                    and member.value.id == "self"
                ):
                    names.add(member.attr)
    return {n for n in names if _is_private(n)}


def _defined(node: ast.AST) -> set[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    return set()


def private_uses(tree: ast.Module, private: set[str]) -> list[str]:
    """``line: what`` for each import of, or foreign attribute access to, a ``private`` name."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("voicelat.engine"):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name in private]
        elif isinstance(node, ast.Attribute) and node.attr in private:
            own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            if not own:
                found.append(f"{node.lineno}: {ast.unparse(node)}")
    return sorted(found, key=lambda use: int(use.split(":")[0]))


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def test_no_private_name_of_an_engine_module_is_used_outside_it() -> None:
    # Each file is parsed once (the guard used to re-parse the engine once per file: 25 s).
    trees = {path: _parse(path) for path in sorted(PACKAGE.rglob("*.py"))}
    engine_private = {p: private_names(t) for p, t in trees.items() if p.parent == ENGINE}
    everything = set().union(*engine_private.values())
    bad: dict[str, list[str]] = {}
    for path, tree in trees.items():
        if path.parent == ENGINE:
            # Another engine module's private names, less the ones this module defines itself.
            private = set().union(*(n for p, n in engine_private.items() if p != path))
            private -= engine_private[path]
        else:
            private = everything
        uses = private_uses(tree, private)
        if uses:
            bad[path.relative_to(PACKAGE).as_posix()] = uses
    assert bad == {}, "private engine names used:\n" + "\n".join(
        f"  {path}:{use}" for path, uses in bad.items() for use in uses
    )


def test_the_check_sees_a_private_use() -> None:
    engine = ast.parse("class Runner:\n    def _turn(self):\n        self._lag = 1\n_helper = 2\n")
    private = private_names(engine)
    assert private == {"_turn", "_lag", "_helper"}
    client = ast.parse(
        "from voicelat.engine.runner import _helper\n"
        "def f(runner, self):\n    runner._turn()\n    self._turn()\n    return runner.turn\n"
    )
    assert private_uses(client, private) == ["1: import _helper", "3: runner._turn"]
