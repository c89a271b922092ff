"""Live mode, compare and every module outside the engine use only the engine's public API.

Issue #11: live sessions (``engine/live.py``) and ``voicelat compare`` used to reach into the
runner's private methods (``runner._turn_body``...), so the turn's code could not change
without breaking them. The check: the names the engine's modules keep private (module-level
``_x`` and the ``_x`` members of their classes) appear in no import and no attribute access on
another object (``self._x`` inside a module's own classes is its own business) in those
modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import voicelat

PACKAGE = Path(voicelat.__file__).parent
ENGINE = PACKAGE / "engine"
#: Engine modules that must use the rest of the engine through its public API, like outsiders.
ENGINE_CLIENTS = ("live.py",)


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


def _engine_private(skip: Path | None = None) -> set[str]:
    names: set[str] = set()
    for path in sorted(ENGINE.glob("*.py")):
        if path != skip:
            names |= private_names(ast.parse(path.read_text(encoding="utf-8")))
    return names


def _clients() -> list[Path]:
    outside = [p for p in sorted(PACKAGE.rglob("*.py")) if ENGINE not in p.parents]
    return outside + [ENGINE / name for name in ENGINE_CLIENTS if (ENGINE / name).exists()]


def test_no_private_name_of_the_engine_is_used_outside_it() -> None:
    bad: dict[str, list[str]] = {}
    for path in _clients():
        private = _engine_private(skip=path if ENGINE in path.parents else None)
        uses = private_uses(ast.parse(path.read_text(encoding="utf-8")), private)
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
