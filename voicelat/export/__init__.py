"""Exports of voicelat's results into other tools: OTel, Prometheus, CSV, JSON and CI formats.

This package sits above ``voicelat.core`` and ``voicelat.files`` and below the CLI. Importing it
is light: the OTel and Prometheus exporters (``voicelat.export.otel``, ``.prometheus``) import
their libraries (the ``otel`` / ``prometheus`` extras) only when built. See docs/EXPORT.md.
"""

from __future__ import annotations

from voicelat.export.base import (
    ENTRY_POINT_GROUP,
    Exporter,
    ExportError,
    ExportFanout,
    ExportObserver,
    ExportOptions,
    LoopLagSink,
    MetricsPortInUse,
    warn_stderr,
)
from voicelat.export.registry import build_exporters, exporter_factories, open_exports
from voicelat.export.scripts import (
    BENCHMARK_FORMATS,
    CSV_COLUMNS,
    TURNS_CSV,
    TurnsCsvExporter,
    bencher_metrics,
    benchmark_json,
    github_benchmark,
    summary_json,
    write_turns_csv,
)
from voicelat.export.validate import SUMMARY_SCHEMA, TURN_SCHEMA, load_schema, validate

__all__ = [
    "BENCHMARK_FORMATS",
    "CSV_COLUMNS",
    "ENTRY_POINT_GROUP",
    "SUMMARY_SCHEMA",
    "TURNS_CSV",
    "TURN_SCHEMA",
    "ExportError",
    "ExportFanout",
    "ExportObserver",
    "ExportOptions",
    "Exporter",
    "LoopLagSink",
    "MetricsPortInUse",
    "TurnsCsvExporter",
    "bencher_metrics",
    "benchmark_json",
    "build_exporters",
    "exporter_factories",
    "github_benchmark",
    "load_schema",
    "open_exports",
    "summary_json",
    "validate",
    "warn_stderr",
    "write_turns_csv",
]
