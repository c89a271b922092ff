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
#: Every module of the core's layers (voicelat/core/<layer>/<module>.py).
CORE_MODULES = sorted(
    "voicelat.core." + ".".join(p.relative_to(CORE_DIR).with_suffix("").parts)
    for p in CORE_DIR.rglob("*.py")
    if p.stem != "__init__"
)


def _loaded_after_import(*modules: str) -> list[str]:
    code = (
        "import importlib, json, sys\n"
        f"for m in {list(modules)!r}: importlib.import_module(m)\n"
        f"print(json.dumps(sorted(m for m in {FORBIDDEN!r} if m in sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    loaded: list[str] = json.loads(out.stdout)
    return loaded


def test_the_core_has_modules_to_check() -> None:
    assert "voicelat.core.measure.recorder" in CORE_MODULES and len(CORE_MODULES) > 10


def test_core_modules_import_no_io_library() -> None:
    # One fresh interpreter imports every core module: if none of the forbidden libraries is
    # loaded after all of them, none is after any one. Only on a failure is each module
    # imported alone, to name the culprit (one interpreter each is ~50 starts, ~20 s).
    if _loaded_after_import(*CORE_MODULES) == []:
        return
    culprits = {m: found for m in CORE_MODULES if (found := _loaded_after_import(m))}
    pytest.fail(f"core modules pull in an I/O library: {culprits}")


def test_the_check_sees_an_io_library() -> None:
    # The same probe on a module that does use one: the test above can fail.
    assert "asyncio" in _loaded_after_import("voicelat.core.base.stats", "voicelat.engine.job")
