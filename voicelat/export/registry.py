"""Which exporters a run gets: the built-in ones and those registered under the
``voicelat.exporters`` entry-point group, each enabled (or not) by :class:`ExportOptions`.

A factory takes the options and returns an exporter or ``None``; it imports its library only
once it is enabled, so a missing extra matters only to the flag that needs it.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points

from voicelat.export.base import (
    ENTRY_POINT_GROUP,
    Exporter,
    ExportError,
    ExportFanout,
    ExportOptions,
    Warn,
    warn_stderr,
)

Factory = Callable[[ExportOptions], Exporter | None]


def _missing(flag: str, extra: str, exc: ImportError) -> ExportError:
    return ExportError(f"{flag} needs the {extra} extra ({exc.name} is not installed): "
                       f"pip install 'voicelat[{extra}]'")  # fmt: skip


def prometheus_exporter(options: ExportOptions) -> Exporter | None:
    """``--metrics-port``: binds the port now (a port in use raises before the run)."""
    if options.metrics_port is None:
        return None
    try:
        from voicelat.export.prometheus import PrometheusExporter
    except ImportError as exc:
        raise _missing("--metrics-port", "prometheus", exc) from None
    return PrometheusExporter.from_options(options)


def otel_exporter(options: ExportOptions) -> Exporter | None:
    """``--otlp-endpoint`` or the OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT variables."""
    if not options.otel_enabled:
        return None
    try:
        from voicelat.export.otel import OtelExporter
    except ImportError as exc:
        raise _missing("--otlp-endpoint", "otel", exc) from None
    return OtelExporter.from_options(options)


def csv_exporter(options: ExportOptions) -> Exporter | None:
    """``turns.csv`` beside turns.jsonl (no extra needed)."""
    from voicelat.export.scripts import TurnsCsvExporter

    return TurnsCsvExporter.from_options(options)


#: Built-in exporters, in the order they are built: Prometheus first, so a port in use fails
#: before anything else opened a file or a connection.
BUILTIN: dict[str, Factory] = {
    "prometheus": prometheus_exporter,
    "csv": csv_exporter,
    "otel": otel_exporter,
}


def exporter_factories() -> dict[str, Factory]:
    """Name -> factory: the built-ins, then entry points (a plugin cannot shadow a built-in)."""
    out = dict(BUILTIN)
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        if ep.name not in out:
            out[ep.name] = _lazy(ep.name, ep.load)
    return out


def _lazy(name: str, load: Callable[[], object]) -> Factory:
    def factory(options: ExportOptions) -> Exporter | None:
        try:
            fn = load()
        except Exception as exc:
            raise ExportError(f"exporter plugin {name!r} cannot be loaded ({exc})") from None
        if not callable(fn):
            raise ExportError(f"exporter plugin {name!r} is not a factory")
        result = fn(options)
        if result is not None and not isinstance(result, Exporter):
            raise ExportError(f"exporter plugin {name!r} returned {type(result).__name__}, "
                              "which has no on_turn/close")  # fmt: skip
        return result

    return factory


def build_exporters(options: ExportOptions) -> list[Exporter]:
    """Every exporter ``options`` enables. On an error, the ones already built are closed."""
    built: list[Exporter] = []
    try:
        for factory in exporter_factories().values():
            exporter = factory(options)
            if exporter is not None:
                built.append(exporter)
    except BaseException:
        for e in built:
            e.close(None)
        raise
    return built


def open_exports(options: ExportOptions, *, warn: Warn = warn_stderr) -> ExportFanout:
    """Build every exporter ``options`` enables and start their fan-out: the one call a command
    makes BEFORE its run (a metrics port in use raises :class:`MetricsPortInUse` here, exit 3).
    With nothing enabled, the fan-out has no thread and ``submit`` does nothing."""
    fan = ExportFanout(build_exporters(options), warn=warn)
    fan.start()
    return fan
