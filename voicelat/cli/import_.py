"""``voicelat import FILE... --out DIR``: an agent's exported traces as a results directory.

Production calls voicelat did not play, read from the agent's own OpenTelemetry spans (OTLP
protobuf or JSON files, OTLP JSON lines, the collector's file exporter, Jaeger JSON;
:mod:`voicelat.files.otlp`), turned into traced turns (:mod:`voicelat.core.traces.traced`) that
``voicelat view``, ``ci`` and ``compare`` read like any run. docs/PRODUCTION.md says what t=0
and the end point are and what trace-only e2e leaves out.

``--check`` writes nothing and prints only the findings of the conformance checks
(:mod:`voicelat.core.traces.trace_checks`), one a line. Exit codes: 0 imported (``--check``: no
finding); 1 ``--check`` found something; 2 bad input (an unreadable or corrupt file, no turn
of the mapping in the spans, a bad ``--out``); 3 the results cannot be written.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from voicelat.core.base.errors import EXIT_GATE_FAILED, EXIT_OK, ConfigError, InfraError
from voicelat.core.base.version import __version__
from voicelat.core.summaries.run_summary import RunSummary
from voicelat.core.traces.agent_trace import MAPPINGS, AgentSpan, suggest_mapping
from voicelat.core.traces.trace_checks import CHECKS
from voicelat.core.traces.traced import TracedImport, import_spans

__all__ = ["add_parser", "cmd_import"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``import`` on the ``voicelat`` command's subparsers."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "import",
        help="read an agent's exported traces (production calls) as a results directory",
        description=(
            "Read OpenTelemetry traces an agent exported (OTLP protobuf or JSON, OTLP JSON "
            "lines, the collector's file exporter, Jaeger JSON; gzipped or not) and write a "
            "results directory of traced turns for `voicelat view`, `ci` and `compare`. t=0 is "
            "the agent's own end of user speech, the end its own first audio out (not the ear): "
            "see docs/PRODUCTION.md. Exit codes: 0 imported (--check: no finding), 1 --check "
            "found something, 2 bad input, 3 the results cannot be written."
        ),
    )
    p.add_argument("files", nargs="+", type=Path, metavar="FILE", help="trace files to read")
    p.add_argument("--out", "-o", type=Path, help="results directory to write (new or empty)")
    p.add_argument(
        "--mapping",
        choices=MAPPINGS,
        default="pipecat",
        help="how spans map onto turns: Pipecat 1.14's, the OTel GenAI conventions', LiveKit "
        "Agents 1.x's, the OpenAI Agents SDK voice pipeline's (docs/PRODUCTION.md; default "
        "pipecat)",
    )
    p.add_argument(
        "--hangover-ms",
        type=_hangover,
        default=None,
        metavar="MS",
        help="the agents' VAD hangover (Pipecat: VADParams.stop_secs) where a trace does not "
        "state it (voicelat.vad_stop_secs): it goes into endpointing",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="write nothing; print only the conformance findings ("
        + ", ".join(CHECKS)
        + "); exit 1 when there are any",
    )
    p.add_argument(
        "--otlp-endpoint",
        metavar="URL",
        default=None,
        help="also send the imported turns' spans and metrics over OTLP/HTTP to URL, as a run "
        "does (the otel extra; the OTEL_EXPORTER_OTLP_* variables are NOT used here)",
    )
    p.set_defaults(func=cmd_import)
    return p


def _hangover(value: str) -> int:
    """``--hangover-ms``: milliseconds (0-10000) as ns."""
    try:
        ms = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of milliseconds") from None
    if not 0 <= ms <= 10_000:
        raise argparse.ArgumentTypeError(f"{value} ms is not a VAD hangover (0..10000 ms)")
    return round(ms * 1_000_000)


def _read(files: Sequence[Path]) -> tuple[list[AgentSpan], list[dict[str, Any]]]:
    """Every file's spans (a span exported twice, e.g. two dumps overlapping, counts once)."""
    read_trace_file = otlp_module().read_trace_file

    spans: dict[tuple[str, str], AgentSpan] = {}
    sources: list[dict[str, Any]] = []
    for path in files:
        found = read_trace_file(path)
        for span in found.spans:
            spans.setdefault((span.trace_id, span.span_id), span)
        sources.append(
            {
                "path": str(path),
                "format": found.format,
                "spans": len(found.spans),
                "rejected_spans": found.rejected_spans,
                "skipped_lines": found.skipped_lines,
            }
        )
    return list(spans.values()), sources


def otlp_module() -> Any:
    """:mod:`voicelat.files.otlp`, or one line saying which extra brings opentelemetry-proto."""
    try:
        from voicelat.files import otlp
    except ImportError as exc:
        raise InfraError(
            f"reading OTLP traces needs opentelemetry-proto ({exc.name or exc}): "
            "pip install 'voicelat[traces]'"
        ) from None
    return otlp


def _no_turns(imported: TracedImport, mapping: str, spans: Sequence[AgentSpan]) -> ConfigError:
    names = ", ".join(list(imported.unmapped)[:6]) or "none"
    other = suggest_mapping(spans, mapping)
    hint = (
        f"their turns look like --mapping {other}'s"
        if other is not None
        else f"no mapping finds a turn in them ({', '.join(MAPPINGS)})"
    )
    return ConfigError(
        f"no {mapping} turn in {imported.spans} span(s) (span names: {names}): {hint}"
    )


def cmd_import(args: argparse.Namespace) -> int:
    """Run ``voicelat import``."""
    if not args.check and args.out is None:
        raise ConfigError("--out DIR is required (or --check to print the findings only)")
    if args.out is not None and not args.check:
        from voicelat.files.results import check_out_dir

        check_out_dir(args.out)  # before reading gigabytes of traces
    spans, sources = _read(args.files)
    if not spans:
        raise ConfigError(f"no spans in {', '.join(str(f) for f in args.files)}: nothing to import")
    imported = import_spans(spans, args.mapping, args.hangover_ms)
    if args.check:
        for finding in imported.findings:
            print(finding.line())
        return EXIT_GATE_FAILED if imported.findings else EXIT_OK
    if not imported.turns and not imported.no_reply:
        raise _no_turns(imported, args.mapping, spans)
    from voicelat.files.traced import write_traced_run

    walls = [t.wall_time_ns for t in imported.turns if t.wall_time_ns is not None]
    run = {
        "tool": "voicelat",
        "version": __version__,
        "status": "complete",
        "started": _iso(min(walls)) if walls else None,
        "duration_s": (max(walls) - min(walls)) / 1e9 if walls else 0.0,
        "planned_turns": len(imported.turns),
        "source": "import",
        "argv": list(sys.argv),
    }
    summary = write_traced_run(args.out, imported, mapping=args.mapping, sources=sources, run=run)
    _export(args, imported, summary)
    failed = sum(t.failed for t in imported.turns)
    print(
        f"imported {len(imported.turns)} turn(s) ({failed} without a time) from "
        f"{imported.conversations} conversation(s), {imported.spans} span(s); "
        f"{len(imported.findings)} finding(s) -> {args.out}"
    )
    return EXIT_OK


def _export(args: argparse.Namespace, imported: TracedImport, summary: RunSummary) -> None:
    """The run's exporters on the imported turns: ``turns.csv`` always, OTLP on request. Not
    the environment's OTLP variables: an import must not send last week's calls by surprise."""
    from voicelat.export.base import ExportOptions
    from voicelat.export.registry import build_exporters

    options = ExportOptions(
        pipeline=dict(summary.pipeline),
        run_dir=args.out,
        csv=True,
        otlp_endpoint=args.otlp_endpoint,
        service_name="voicelat-import",
        env={},
    )
    exporters = build_exporters(options)
    try:
        for turn in imported.turns:
            for exporter in exporters:
                exporter.on_turn(turn)
    finally:
        for exporter in exporters:
            exporter.close(summary)


def _iso(wall_ns: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(wall_ns / 1e9))
