"""What ``voicelat ci`` holds a run to, and the finished run ``--results RUN_DIR`` gates, read
back as the gate needs it (damaged lines skipped and said, a summary the turns do not bear out
rebuilt from them)."""

from __future__ import annotations

import argparse
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from voicelat.core.base.errors import ConfigError
from voicelat.core.judge.budget import Budget, parse_budget
from voicelat.core.summaries.run_summary import RunSummary
from voicelat.files.budget import load_budget_file
from voicelat.files.results import SUMMARY_FILE, TURNS_FILE, LoadedRun, load_run

__all__ = ["budget_for", "budget_table", "load_results"]


def _info(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def budget_for(args: argparse.Namespace, table: Mapping[str, Any] | None, source: str) -> Budget:
    """The budget in force: a --budget file replaces the pipeline's [budget] table as a whole."""
    if args.budget is not None:
        return load_budget_file(args.budget)
    if table:
        return parse_budget(table, source=source)
    return Budget(source="defaults (no [budget] given)")


def budget_table(path: Path) -> dict[str, Any]:
    """The raw ``[budget]`` table of a budget file :func:`load_budget_file` has validated."""
    table = tomllib.loads(path.read_text(encoding="utf-8")).get("budget")
    return dict(table) if isinstance(table, dict) else {}


def load_results(path: Path) -> tuple[LoadedRun, RunSummary, list[str]]:
    """The run at ``path``, the summary to gate and the gate's notes (lines skipped);
    ``ConfigError`` when it holds no readable turn."""
    run = load_run(path)
    _warn_damaged_lines(run)
    if not run.turns:
        neither = f" and no {SUMMARY_FILE}" if run.summary is None else ""
        raise ConfigError(f"{run.path} holds no readable turns{neither}")
    summary = _gated_summary(run)
    skipped = (
        [f"{len(run.problems)} damaged line(s) of {TURNS_FILE} skipped"] if run.problems else []
    )
    return run, summary, skipped


def _warn_damaged_lines(run: LoadedRun) -> None:
    """One warning per turns.jsonl line skipped (what is wrong with it), then their count."""
    for problem in run.problems:
        _info(f"warning: {run.path / TURNS_FILE} {problem}; skipped")
    if run.problems:
        _info(f"warning: {len(run.problems)} damaged line(s) skipped; the gate judges the rest")


def _gated_summary(run: LoadedRun) -> RunSummary:
    """The summary ``ci --results`` gates: ``summary.json`` when it matches the turns read,
    else one rebuilt from them (with one warning saying why). A run killed before its end
    (SIGKILL) wrote no summary; a damaged or hand-edited one (negative counts, a count the
    turns do not bear out) would gate numbers no turn measured."""
    from voicelat.core.summaries.summary import counts, summarize

    recorded = run.run_summary
    if recorded is None:
        why = f"no {SUMMARY_FILE} (the run was killed before its end?)"
        doc: Mapping[str, Any] = {"run": {"status": "interrupted"}}
    else:
        have = recorded.counts.to_json()
        want = counts(run.turns)
        wrong = next((k for k, v in have.items() if v < 0 or want.get(k, 0) != v), None)
        if wrong is None:
            return recorded
        why = (
            f"{SUMMARY_FILE} counts.{wrong} is {have[wrong]} but {TURNS_FILE} holds "
            f"{want.get(wrong, 0)}"
        )
        doc = run.summary or {}
    _info(f"warning: {why}: gating a summary rebuilt from the {len(run.turns)} turn(s) read")
    return summarize(
        run.turns,
        run=_mapping(doc.get("run")),
        pipeline=_mapping(doc.get("pipeline")),
        fixtures=[f for f in doc.get("fixtures") or () if isinstance(f, Mapping)],
        stages=_mapping(doc.get("stages")),
        budget=_mapping(doc.get("budget")),
    )


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
