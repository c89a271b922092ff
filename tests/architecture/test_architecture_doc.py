"""docs/ARCHITECTURE.md names only modules that exist, and every core layer is in it.

The doc is the map a newcomer reads first; a module renamed or moved without the map following
it sends them to a file that isn't there. Checked: every `pkg/.../module.py` path and dotted
`voicelat.x.y` name, and every `name.py` in a row of the package table, against the tree."""

from __future__ import annotations

import re
from pathlib import Path

import voicelat

PACKAGE = Path(voicelat.__file__).parent
DOC = (PACKAGE.parent / "docs" / "ARCHITECTURE.md").read_text()
TOP = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())

_PATH = re.compile(rf"(?<![\w/.])(?:voicelat/)?((?:{'|'.join(TOP)})/[\w/]+\.py)")
_DOTTED = re.compile(r"\bvoicelat(?:\.\w+)+")
#: Entry-point groups are spelled like modules (`voicelat.exporters`) but are not modules: every
#: `ENTRY_POINT_GROUP = "..."` in the package.
_GROUPS = {
    m
    for path in PACKAGE.rglob("*.py")
    for m in re.findall(r'ENTRY_POINT_GROUP = "([\w.]+)"', path.read_text())
}
_ROW = re.compile(r"^\| `(\w+)/` \|(.*)$", re.M)


def _module_exists(dotted: str) -> bool:
    parts = dotted.split(".")[1:]
    # A dotted name may end in an attribute (voicelat.core.measure.clock.now_ns): some prefix
    # of it must be a module or package.
    for n in range(len(parts), 0, -1):
        base = PACKAGE.joinpath(*parts[:n])
        if base.with_suffix(".py").exists() or (base / "__init__.py").exists():
            return True
    return not parts


def test_every_module_path_in_the_doc_exists() -> None:
    paths = set(_PATH.findall(DOC))
    assert len(paths) > 20
    missing = sorted(p for p in paths if not (PACKAGE / p).exists())
    assert missing == [], f"docs/ARCHITECTURE.md names files that do not exist: {missing}"


def test_every_dotted_module_in_the_doc_exists() -> None:
    names = set(_DOTTED.findall(DOC))
    assert "voicelat.core.measure.clock" in names
    missing = sorted(n for n in names - _GROUPS if not _module_exists(n))
    assert missing == [], f"docs/ARCHITECTURE.md names modules that do not exist: {missing}"


def test_every_module_in_the_package_table_exists() -> None:
    rows = _ROW.findall(DOC)
    assert {pkg for pkg, _ in rows} >= {"core", "engine", "stages", "audio", "files"}
    missing = []
    for pkg, text in rows:
        for name in set(re.findall(r"`(\w+)\.py`", text)):
            if not list((PACKAGE / pkg).rglob(f"{name}.py")):
                missing.append(f"{pkg}/{name}.py")
    assert missing == [], f"docs/ARCHITECTURE.md's table names files that do not exist: {missing}"


def test_every_core_layer_is_mapped() -> None:
    layers = sorted(p.name for p in (PACKAGE / "core").iterdir() if (p / "__init__.py").exists())
    assert len(layers) >= 5
    unmapped = [layer for layer in layers if f"`core/{layer}/`" not in DOC]
    assert unmapped == [], f"core layers missing from docs/ARCHITECTURE.md: {unmapped}"
