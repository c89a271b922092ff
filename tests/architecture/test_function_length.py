"""No function in voicelat is longer than 80 lines (issue #11).

A function that long does several things; each gets a name of its own. The count is from the
``def`` line to the last line of the body, docstring and comments included, as a reader sees it.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import voicelat

MAX_LINES = 80
PACKAGE = Path(voicelat.__file__).parent

#: "path relative to voicelat/:function" -> why it may be longer. Only the emulators' canned
#: content belongs here (a provider's fixed reply written out as one literal reads better whole
#: than cut into pieces); no such function is over the limit today, so the list is empty. An
#: entry that is no longer needed fails the test, so the list cannot go stale.
ALLOWED: dict[str, str] = {}


def long_functions(root: Path, limit: int = MAX_LINES) -> dict[str, int]:
    """``"relative/path.py:Qualified.name" -> lines`` for every function over ``limit``."""
    found: dict[str, int] = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        rel = path.relative_to(root).as_posix()
        _walk(tree, rel, "", limit, found)
    return found


def _walk(node: ast.AST, rel: str, prefix: str, limit: int, found: dict[str, int]) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = f"{prefix}{child.name}"
            if not isinstance(child, ast.ClassDef):
                lines = (child.end_lineno or child.lineno) - child.lineno + 1
                if lines > limit:
                    found[f"{rel}:{name}"] = lines
            _walk(child, rel, f"{name}.", limit, found)
        else:
            _walk(child, rel, prefix, limit, found)


@cache
def _package_long() -> dict[str, int]:
    # Both checks below read the same count: the package is parsed once per session.
    return long_functions(PACKAGE)


def test_no_function_over_80_lines() -> None:
    too_long = {k: n for k, n in _package_long().items() if k not in ALLOWED}
    assert too_long == {}, "functions over 80 lines:\n" + "\n".join(
        f"  {k} ({n} lines)" for k, n in sorted(too_long.items())
    )


def test_every_allowance_is_still_needed() -> None:
    found = _package_long()
    assert [k for k in ALLOWED if k not in found] == []


def test_the_counter_sees_a_long_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(85))
    (tmp_path / "m.py").write_text(f"class C:\n  def f(self):\n{body}\n\ndef g():\n    pass\n")
    assert long_functions(tmp_path) == {"m.py:C.f": 86}
