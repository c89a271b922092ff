"""Which exporters a run gets: flags, environment and the ``voicelat.exporters`` entry points."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest
from synthetic_turns import synthetic_turns

from voicelat.core.base.turn import Turn
from voicelat.export import (
    ENTRY_POINT_GROUP,
    ExportError,
    ExportOptions,
    build_exporters,
    open_exports,
    registry,
)
from voicelat.export.scripts import TurnsCsvExporter


class Plugin:
    def __init__(self, options: ExportOptions) -> None:
        self.options = options

    def on_turn(self, turn: Turn) -> None:
        return None

    def close(self, summary: Mapping[str, Any] | None) -> None:
        return None


def make_plugin(options: ExportOptions) -> Plugin | None:
    return Plugin(options) if options.pipeline.get("name") == "with-plugin" else None


def not_an_exporter(options: ExportOptions) -> object:
    return 42


def _with_entry_points(monkeypatch: pytest.MonkeyPatch, *eps: EntryPoint) -> None:
    def fake(group: str) -> list[EntryPoint]:
        assert group == ENTRY_POINT_GROUP
        return list(eps)

    monkeypatch.setattr(registry, "entry_points", fake)


def test_nothing_asked_nothing_built() -> None:
    assert build_exporters(ExportOptions(env={})) == []
    fan = open_exports(ExportOptions(env={}))
    assert fan.exporters == () and fan._thread is None  # no thread for nothing to do
    fan.submit(synthetic_turns(1)[0])
    fan.close(None)


def test_open_exports_builds_and_starts(tmp_path: Path) -> None:
    fan = open_exports(ExportOptions(csv=True, run_dir=tmp_path, env={}))
    for t in synthetic_turns(4):
        fan.submit(t)
    fan.close({"counts": {}})
    assert len((tmp_path / "turns.csv").read_text().splitlines()) == 1 + 4


def test_csv_needs_a_run_dir(tmp_path: Path) -> None:
    assert build_exporters(ExportOptions(csv=True, env={})) == []
    built = build_exporters(ExportOptions(csv=True, run_dir=tmp_path, env={}))
    assert [type(e) for e in built] == [TurnsCsvExporter]
    built[0].close(None)
    assert (tmp_path / "turns.csv").read_text().startswith("index,fixture,")


def test_entry_point_plugins_are_built_when_they_say_so(monkeypatch: pytest.MonkeyPatch) -> None:
    ep = EntryPoint("mine", f"{__name__}:make_plugin", ENTRY_POINT_GROUP)
    shadow = EntryPoint("csv", f"{__name__}:not_an_exporter", ENTRY_POINT_GROUP)
    _with_entry_points(monkeypatch, ep, shadow)
    names = list(registry.exporter_factories())
    assert names == ["prometheus", "csv", "otel", "mine"]  # a plugin cannot shadow "csv"
    assert build_exporters(ExportOptions(env={})) == []
    built = build_exporters(ExportOptions(pipeline={"name": "with-plugin"}, env={}))
    assert [type(e).__name__ for e in built] == ["Plugin"]


def test_a_plugin_returning_junk_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    _with_entry_points(monkeypatch, EntryPoint("junk", f"{__name__}:not_an_exporter", "g"))
    with pytest.raises(ExportError, match="'junk' returned int"):
        build_exporters(ExportOptions(env={}))
    _with_entry_points(monkeypatch, EntryPoint("gone", "no_such_module_xyz:f", "g"))
    with pytest.raises(ExportError, match="'gone' cannot be loaded"):
        build_exporters(ExportOptions(env={}))


def test_importing_the_package_pulls_in_no_exporter_library() -> None:
    code = (
        "import sys, voicelat.export; "
        "print(sorted(m for m in ('opentelemetry', 'prometheus_client', 'jsonschema', 'asyncio') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
