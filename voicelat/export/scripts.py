"""Exports for scripts and CI dashboards: ``turns.csv``, ``--json`` and ``--benchmark-json``.

The benchmark formats are pure functions of the summary dict (summary.json as written), so
``voicelat ci --benchmark-json`` and a script reading an old run produce the same document.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from voicelat.core.base.contract import MILESTONES, SEGMENTS
from voicelat.core.base.turn import Turn
from voicelat.core.summaries.run_summary import RunSummary
from voicelat.export.base import ExportError, ExportOptions
from voicelat.export.measures import ttfa_ns, ttft_ns

TURNS_CSV = "turns.csv"

#: A summary as summary.json holds it, or the typed form (``RunSummary.to_json`` gives the same).
SummaryLike = Mapping[str, Any] | RunSummary


def summary_document(summary: SummaryLike) -> Mapping[str, Any]:
    """The JSON form of either kind of summary."""
    return summary.to_json() if isinstance(summary, RunSummary) else summary


#: The columns of turns.csv, in order. Part of the public format: add at the end, never reorder.
CSV_COLUMNS: tuple[str, ...] = (
    "index", "fixture", "repeat", "warmup", "cold", "headline", "failed", "failure_stage",
    "failure_reason", "flags", "wall_time_ns", "t0_ns", "e2e_ns",
    *(f"{s}_ns" for s in SEGMENTS),
    "ttft_ns", "ttfa_ns",
    *(f"{m}_ns" for m in MILESTONES),
    "transcript", "expected", "reply",
)  # fmt: skip


def _cell(v: object) -> str | int | float:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return v
    return str(v)


def turn_csv_row(turn: Turn) -> list[str | int | float]:
    """One turns.csv row (integer ns; empty cell for a figure the turn does not have)."""
    values: dict[str, object] = {
        "index": turn.index,
        "fixture": turn.fixture,
        "repeat": turn.repeat,
        "warmup": turn.warmup,
        "cold": turn.cold,
        "headline": turn.headline,
        "failed": turn.failed,
        "failure_stage": turn.failure_stage,
        "failure_reason": turn.failure_reason,
        "flags": ";".join(turn.flags),
        "wall_time_ns": turn.wall_time_ns,
        "t0_ns": turn.t0_ns,
        "e2e_ns": turn.e2e_ns,
        "ttft_ns": ttft_ns(turn),
        "ttfa_ns": ttfa_ns(turn),
        "transcript": turn.transcript,
        "expected": turn.expected,
        "reply": turn.reply,
    }
    values |= {f"{s}_ns": turn.segments.get(s) for s in SEGMENTS}
    values |= {f"{m}_ns": turn.milestones.get(m) for m in MILESTONES}
    return [_cell(values[c]) for c in CSV_COLUMNS]


def write_turns_csv(path: Path, turns: Iterable[Turn]) -> Path:
    """Write a whole turns.csv (for a run read back from disk)."""
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(CSV_COLUMNS)
        for t in turns:
            w.writerow(turn_csv_row(t))
    return path


class TurnsCsvExporter:
    """Writes ``turns.csv`` beside turns.jsonl, one row per turn as it finishes."""

    def __init__(self, run_dir: Path) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        self.path = run_dir / TURNS_CSV
        try:
            self._fh: IO[str] | None = self.path.open("w", encoding="utf-8", newline="")
        except OSError as exc:
            raise ExportError(f"cannot write {self.path} ({exc.strerror or exc})") from None
        self._csv = csv.writer(self._fh)
        self._csv.writerow(CSV_COLUMNS)
        self._fh.flush()

    @classmethod
    def from_options(cls, options: ExportOptions) -> TurnsCsvExporter | None:
        """The entry-point factory: enabled by ``csv`` with a ``run_dir``."""
        if not options.csv or options.run_dir is None:
            return None
        return cls(options.run_dir)

    def on_turn(self, turn: Turn) -> None:
        if self._fh is not None:
            self._csv.writerow(turn_csv_row(turn))
            self._fh.flush()

    def close(self, summary: RunSummary | None) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


# -- --json ----------------------------------------------------------------------------------
def summary_json(summary: SummaryLike) -> str:
    """What ``--json`` prints: the summary.json document, and nothing else, newline-terminated."""
    return json.dumps(summary_document(summary), indent=2, sort_keys=False) + "\n"


# -- --benchmark-json ------------------------------------------------------------------------
BENCHMARK_FORMATS: tuple[str, ...] = ("github", "bencher")
_PERCENTILES = ("p50", "p90", "p99")


def _series(summary: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """(name, distribution) of e2e, each segment and TTFT, in a stable order; empty ones out."""
    out: list[tuple[str, Mapping[str, Any]]] = [("e2e", summary.get("e2e") or {})]
    segments = summary.get("segments") or {}
    out += [(f"segment {s}", segments.get(s) or {}) for s in SEGMENTS]
    figures = summary.get("figures") or {}
    out.append(("llm ttft", figures.get("llm_ttft_ns") or {}))
    return [(n, d) for n, d in out if d.get("n")]


def _failure_rate(summary: Mapping[str, Any]) -> float | None:
    counts = summary.get("counts") or {}
    measured = int(counts.get("turns") or 0) - int(counts.get("warmup") or 0)
    if measured <= 0:
        return None
    return round(100.0 * int(counts.get("failed") or 0) / measured, 3)


def _pipeline(summary: Mapping[str, Any]) -> str:
    return str((summary.get("pipeline") or {}).get("name") or "voicelat")


def github_benchmark(summary: SummaryLike) -> list[dict[str, Any]]:
    """github-action-benchmark's ``customSmallerIsBetter`` list (milliseconds; %)."""
    summary = summary_document(summary)
    pipe = _pipeline(summary)
    out: list[dict[str, Any]] = []
    for name, dist in _series(summary):
        for p in _PERCENTILES:
            if dist.get(p) is None:
                continue
            out.append(
                {
                    "name": f"{pipe}: {name} {p}",
                    "unit": "ms",
                    "value": round(float(dist[p]) / 1e6, 3),
                    "extra": f"n={dist['n']}",
                }
            )
    rate = _failure_rate(summary)
    if rate is not None:
        out.append({"name": f"{pipe}: failure rate", "unit": "%", "value": rate})
    return out


def bencher_metrics(summary: SummaryLike) -> dict[str, dict[str, dict[str, float]]]:
    """Bencher Metric Format: one benchmark per series and percentile, its ``latency`` in ns
    (Bencher's built-in measure unit); the failure rate as a ``failure-rate`` measure."""
    summary = summary_document(summary)
    pipe = _pipeline(summary)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for name, dist in _series(summary):
        for p in _PERCENTILES:
            if dist.get(p) is not None:
                metric = {"value": float(dist[p])}
                if p == "p50" and dist.get("min") is not None and dist.get("max") is not None:
                    metric |= {"lower_value": float(dist["min"]), "upper_value": float(dist["max"])}
                out[f"{pipe}: {name} {p}"] = {"latency": metric}
    rate = _failure_rate(summary)
    if rate is not None:
        out[f"{pipe}: turns"] = {"failure-rate": {"value": rate}}
    return out


def benchmark_json(summary: SummaryLike, fmt: str = "github") -> str:
    """The ``--benchmark-json`` document in ``fmt`` (one of :data:`BENCHMARK_FORMATS`)."""
    if fmt == "github":
        doc: object = github_benchmark(summary)
    elif fmt == "bencher":
        doc = bencher_metrics(summary)
    else:
        raise ExportError(
            f"unknown benchmark format {fmt!r}: use one of {', '.join(BENCHMARK_FORMATS)}"
        )
    buf = io.StringIO()
    json.dump(doc, buf, indent=2)
    return buf.getvalue() + "\n"
