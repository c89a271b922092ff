"""Every module of voicelat.core imports, on its own, without an I/O library.

The core is the sans-I/O part: events, the recorder, metrics, statistics, the summary. It is
what a unit test drives with a fake clock, so it must not start an event loop, open a socket,
spawn a thread or pull in numpy or a UI. Each module is imported in a fresh interpreter: in
this one, other tests have long imported all of those.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import voicelat.core

#: What no core module may bring in, directly or through what it imports.
FORBIDDEN = (
    "asyncio",
    "numpy",
    "httpx",
    "httpcore",
    "websockets",
    "textual",
    "rich",
    "threading",
    "socket",
    "subprocess",
)

CORE_DIR = Path(voicelat.core.__file__).parent
CORE_MODULES = sorted(
    f"voicelat.core.{p.stem}" for p in CORE_DIR.glob("*.py") if p.stem != "__init__"
)


def _loaded_after_import(module: str) -> list[str]:
    code = (
        "import importlib, json, sys\n"
        f"importlib.import_module({module!r})\n"
        f"print(json.dumps(sorted(m for m in {FORBIDDEN!r} if m in sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    loaded: list[str] = json.loads(out.stdout)
    return loaded


def test_the_core_has_modules_to_check() -> None:
    assert "voicelat.core.recorder" in CORE_MODULES and len(CORE_MODULES) > 10


@pytest.mark.parametrize("module", CORE_MODULES)
def test_core_module_imports_no_io_library(module: str) -> None:
    assert _loaded_after_import(module) == [], f"{module} pulls in an I/O library"


def test_the_check_sees_an_io_library() -> None:
    # The same probe on a module that does use one: the test above can fail.
    assert "asyncio" in _loaded_after_import("voicelat.engine.job")
