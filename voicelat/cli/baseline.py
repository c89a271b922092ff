"""Baselines of ``voicelat ci``: ``voicelat baseline save RUN_DIR DEST`` keeps a run's
``summary.json`` and ``turns.jsonl``; ``ci --baseline DIR`` reads them back to hold a run
against (its turns are resampled, so both files are kept)."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voicelat.cli.ci_reports import GATE_FILE, JUNIT_FILE, MARKDOWN_FILE
from voicelat.core.base.display import fmt_ms
from voicelat.core.base.errors import EXIT_OK, ConfigError, VoicelatError
from voicelat.core.judge.compare import check_baseline
from voicelat.core.summaries.run_summary import RunSummary, SummaryLike
from voicelat.files.results import SUMMARY_FILE, TURNS_FILE, LoadedRun, load_run

__all__ = ["Baseline", "add_baseline_parser", "cmd_baseline_save", "load_baseline", "save_baseline"]


def add_baseline_parser(subparsers: Any) -> None:
    """Register ``baseline save`` on the ``voicelat`` command's subparsers."""
    baseline = subparsers.add_parser("baseline", help="keep a run as the baseline for `ci`")
    bsub = baseline.add_subparsers(dest="baseline_command", metavar="COMMAND")
    save = bsub.add_parser(
        "save",
        help="copy a run's summary.json and turns.jsonl into a baseline directory",
        description="Copy a run's summary.json and turns.jsonl (all `ci --baseline` reads) "
        "into DEST, replacing the baseline there.",
    )
    save.add_argument("run", type=Path, metavar="RUN_DIR", help="the run to keep")
    save.add_argument("dest", type=Path, metavar="DEST", help="baseline directory to write")
    save.set_defaults(func=cmd_baseline_save)


@dataclass
class Baseline:
    label: str
    run: LoadedRun
    summary: RunSummary | None
    notes: list[str]


def load_baseline(args: argparse.Namespace, current: SummaryLike) -> Baseline | None:
    if args.baseline is None:
        return None
    label = str(args.baseline)
    try:
        run = load_run(args.baseline)
    except VoicelatError as exc:
        raise ConfigError(f"baseline: {exc}") from None
    if not (run.path / TURNS_FILE).exists():
        raise ConfigError(
            f"baseline {label} has no {TURNS_FILE}: the comparison resamples its turns; keep the "
            "whole run directory (voicelat baseline save RUN_DIR DEST)"
        )
    summary = run.run_summary
    notes = check_baseline(summary, current, source=label, force=args.force)
    if run.skipped_lines:
        notes.append(f"baseline: {run.skipped_lines} unreadable line(s) of {TURNS_FILE} skipped")
    return Baseline(label, run, summary, notes)


def save_baseline(run_dir: Path, dest: Path) -> None:
    """Copy a run's ``summary.json`` and ``turns.jsonl`` into ``dest`` (each replaced atomically)."""
    if dest.exists() and not dest.is_dir():
        raise ConfigError(f"baseline destination {dest} is a file, not a directory")
    if dest.resolve() == run_dir.resolve():
        return  # the run already is the baseline
    others = sorted(
        p.name
        for p in (dest.iterdir() if dest.exists() else ())
        if p.name not in (SUMMARY_FILE, TURNS_FILE, JUNIT_FILE, MARKDOWN_FILE, GATE_FILE)
    )
    if others:
        raise ConfigError(
            f"{dest} holds {', '.join(others[:3])}: not a baseline directory; choose another"
        )
    try:
        dest.mkdir(parents=True, exist_ok=True)
        for name in (SUMMARY_FILE, TURNS_FILE):
            data = (run_dir / name).read_bytes()
            tmp = dest / f".{name}.tmp"
            tmp.write_bytes(data)
            os.replace(tmp, dest / name)
    except OSError as exc:
        raise ConfigError(f"cannot save the baseline to {dest}: {exc.strerror}") from None


def cmd_baseline_save(args: argparse.Namespace) -> int:
    """``voicelat baseline save RUN_DIR DEST``."""
    run = load_run(args.run)
    summary = run.run_summary
    if summary is None or not (run.path / TURNS_FILE).exists():
        raise ConfigError(
            f"{run.path} needs both {SUMMARY_FILE} and {TURNS_FILE} to serve as a baseline"
        )
    n = sum(t.headline for t in run.turns)
    if n == 0:
        raise ConfigError(f"{run.path} has no warm measured turn: nothing to compare against")
    save_baseline(run.path, args.dest)
    p50, p90 = summary.e2e.p50, summary.e2e.p90
    figures = (
        f"; e2e P50 {fmt_ms(p50)} ms, P90 {fmt_ms(p90)} ms"
        if p50 is not None and p90 is not None
        else ""
    )
    print(f"baseline saved: {args.dest} ({n} warm turns{figures})")
    return EXIT_OK
