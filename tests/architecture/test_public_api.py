"""The public API is importable from the package, and importing it stays light."""

from __future__ import annotations

import subprocess
import sys

import voicelat


def test_every_exported_name_resolves() -> None:
    for name in voicelat.__all__:
        assert getattr(voicelat, name) is not None, name
    assert voicelat.Turn.__module__ == "voicelat.core.base.turn"
    assert voicelat.percentile([1, 2, 3, 4], 50) == 2.5


def test_import_voicelat_pulls_in_no_io_library() -> None:
    code = (
        "import sys, voicelat; voicelat.TurnRecorder; voicelat.build_summary; "
        "print(sorted(m for m in ('textual', 'httpx', 'websockets') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
