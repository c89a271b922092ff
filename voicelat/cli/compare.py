"""``voicelat compare``: measure several STT x LLM x TTS combinations fairly, rank them honestly.

::

    voicelat compare P1.toml P2.toml ...        # one combination per pipeline file
    voicelat compare --matrix matrix.toml       # the product of a matrix's alternatives
    voicelat compare RUN_DIR RUN_DIR ...        # rank runs that already exist (not interleaved)

The interleaved measuring is the engine's (:mod:`voicelat.engine.compare`: every combination's
stages entered once, then one turn at a time through each, fixture by fixture) and so is the
ranking document (:mod:`voicelat.engine.comparison`); this module is the command around them:
its options, the per-turn and progress lines (``cli/compare_progress.py``) and the reports
(``OUT/comparison.json``, ``OUT/comparison.md``, ``OUT/report.html``).

Exit codes: 0 ranked; 2 usage or configuration error (unknown stage, missing file, runs on
different fixtures); 3 no combination produced a single warm turn (each one's reason is in the
report); 130 interrupted (finished turns and their summaries are kept).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from voicelat.cli.args import add_region_argument, confidence, non_negative_int, positive_int
from voicelat.cli.compare_progress import CompareLines
from voicelat.core.base.errors import EXIT_OK, ConfigError, InfraError
from voicelat.core.judge.ranking import check_same_fixtures
from voicelat.engine.comparison import Ranking, check_live_rank_key, comparison_scores
from voicelat.engine.progress import stderr_progress as _info

if TYPE_CHECKING:
    from voicelat.core.judge.comparison_doc import ComparisonDoc

    _SubParsers = argparse._SubParsersAction[Any]
else:
    _SubParsers = Any

COMPARISON_JSON = "comparison.json"
COMPARISON_MD = "comparison.md"
REPORT_HTML = "report.html"


def add_parser(subparsers: _SubParsers) -> argparse.ArgumentParser:
    """Register ``compare``; it sets ``func`` to :func:`cmd_compare`."""

    p: argparse.ArgumentParser = subparsers.add_parser(
        "compare",
        help="measure STT x LLM x TTS combinations on the same fixtures and rank them",
        description=(
            "Measure several pipelines (files, or a --matrix of alternatives per stage) on the "
            "same fixtures, interleaved per fixture so drift hits all alike, and rank them by "
            "e2e latency with bootstrap CIs and significance against the best. Given run "
            "directories instead, ranks those existing runs."
        ),
    )
    p.add_argument(
        "inputs",
        nargs="*",
        type=Path,
        metavar="PIPELINE.toml|RUN_DIR",
        help="pipeline files to measure, or run directories to rank as they are",
    )
    p.add_argument(
        "--matrix", "-m", type=Path, metavar="MATRIX.toml", help="alternatives per stage"
    )
    p.add_argument(
        "--fixtures",
        "-f",
        type=Path,
        help="fixtures directory with manifest.json (default: bundled)",
    )
    p.add_argument(
        "--turns",
        "-n",
        type=positive_int,
        help="measured turns per combination (default: every fixture once per repeat)",
    )
    p.add_argument(
        "--repeat", "-r", type=positive_int, default=1, help="rounds over the fixtures (default 1)"
    )
    p.add_argument(
        "--warmup",
        "-w",
        type=non_negative_int,
        default=1,
        help="warm-up turns per combination, run first and excluded (default 1)",
    )
    p.add_argument(
        "--out", "-o", type=Path, help="output directory (default: runs/<time>-compare-<name>)"
    )
    _add_scenario_argument(p)
    _add_ranking_arguments(p)
    _add_network_argument(p)
    add_region_argument(p)
    p.add_argument(
        "--score",
        choices=("off", "wer", "all"),
        default="off",
        help="after every combination is measured (never during): wer scores each reply's WER "
        "(Whisper), all adds DNSMOS; needs [output] save_audio = true (default off: priced "
        "only, when the pipelines have [cost])",
    )
    p.add_argument(
        "--tui",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show the ranking in the terminal UI at the end (default: when stdout is a terminal)",
    )
    p.set_defaults(func=cmd_compare)
    return p


def _add_ranking_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--rank-by",
        choices=("p50", "p90", "barge_in_stop", "false_barge_in"),
        default="p50",
        help="what orders the ranking: the e2e percentile (default p50), or with --scenario "
        "calls that interrupt, the barge-in stop at the ear P50 (barge_in_stop) or the false "
        "barge-in rate on backchannels and noise (false_barge_in), e2e P50 breaking ties",
    )
    p.add_argument(
        "--confidence",
        type=confidence,
        default=0.95,
        help="confidence level of the bootstrap intervals (default 0.95)",
    )
    p.add_argument(
        "--resamples", type=positive_int, default=2000, help="bootstrap resamples (default 2000)"
    )
    p.add_argument(
        "--seed", type=non_negative_int, default=0, help="bootstrap seed: same input, same verdicts"
    )


def _add_scenario_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--scenario",
        type=Path,
        metavar="FILE|DIR",
        help="compare whole calls: each scenario runs as one call on every combination in "
        "turn (--repeat rounds), interleaved call by call (docs/CALLS.md); a simulated "
        "caller speaks live on the first combination, the same lines on the others",
    )
    p.add_argument(
        "--caller-cache",
        type=Path,
        metavar="DIR",
        help="where a simulated caller keeps its rendered lines, by (voice, text) hash "
        "(default: $VOICELAT_CACHE/caller, else ~/.cache/voicelat/caller)",
    )


def _add_network_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--network",
        metavar="P1,P2,...",
        help="a network axis: every combination under each profile (built-ins or [network] "
        "files, comma-separated), interleaved, each through its own relay (docs/NETWORK.md)",
    )


# -- the command ---------------------------------------------------------------------------------
def cmd_compare(args: argparse.Namespace) -> int:
    inputs: list[Path] = list(args.inputs)
    if args.matrix is not None and inputs:
        raise ConfigError("give either --matrix MATRIX.toml or pipeline files, not both")
    if args.matrix is None and not inputs:
        raise ConfigError(
            "nothing to compare: give pipeline files, run directories or --matrix MATRIX.toml"
        )
    dirs = [p for p in inputs if p.is_dir()]
    if dirs and len(dirs) != len(inputs):
        raise ConfigError(
            "mix of run directories and pipeline files: rank existing runs, or measure "
            "pipelines, not both at once"
        )
    if len(dirs) == 1:
        # One run ranked against itself "wins" with exit 0: a comparison needs two.
        raise ConfigError(
            f"compare ranks two or more runs, got one ({dirs[0]}): give another run directory"
            f" (voicelat view {dirs[0]} shows one run)"
        )
    if dirs:
        return _compare_saved(args, dirs)
    return _compare_live(args)


def _compare_live(args: argparse.Namespace) -> int:
    check_live_rank_key(_ranking(args), getattr(args, "scenario", None))
    from voicelat.engine.compare import (
        CompareRequest,
        live_comparison_document,
        measure_comparison,
        plan_comparison,
        prepare_comparison,
        read_summaries,
        score_comparison,
    )
    from voicelat.engine.request import PlanRequest

    request = CompareRequest(
        pipelines=tuple(args.inputs),
        matrix=args.matrix,
        fixtures_dir=args.fixtures,
        plan=PlanRequest(repeat=args.repeat, turns=args.turns, warmup=args.warmup),
        out_dir=args.out,
        scenario=getattr(args, "scenario", None),
        network=getattr(args, "network", None),
        argv=tuple(sys.argv),
        caller_cache=getattr(args, "caller_cache", None),
        region=getattr(args, "region", None),
    )
    setup = plan_comparison(request)
    measured = sum(not p.warmup for p in setup.plan)
    what = (
        f"{len(setup.calls)} call(s) ({measured} turns) each, interleaved call by call"
        if setup.calls
        else f"{args.warmup} warm-up + {measured} measured turn(s) each, interleaved"
    )
    runs = prepare_comparison(setup, _info)
    _info(
        f"compare {setup.name}: {len(setup.combos)} combinations x {len(setup.fixtures)} "
        f"fixtures; {what} ({len(setup.schedule)} turns); results -> {setup.out}"
    )
    measure_comparison(setup, runs, CompareLines(setup.schedule, len(runs)), _info)
    score_comparison(runs, getattr(args, "score", "off"), _info)
    summaries = read_summaries(runs)
    check_same_fixtures({k: s.fixture_set_sha256 for k, s in summaries.items()})
    scores = comparison_scores({r.combo.name: r.run_dir for r in runs})
    doc = live_comparison_document(_ranking(args), setup, runs, summaries, scores)
    return _finish(args, doc, setup.out)


def _ranking(args: argparse.Namespace) -> Ranking:
    return Ranking(args.rank_by, args.confidence, args.resamples, args.seed)


def _finish(args: argparse.Namespace, doc: ComparisonDoc, out: Path) -> int:
    from voicelat.cli.view import comparison_page, load_comparison
    from voicelat.files.comparison import write_comparison
    from voicelat.report.comparison import comparison_markdown, comparison_text

    out.mkdir(parents=True, exist_ok=True)
    write_comparison(out, doc)
    data = doc.to_json()  # the reports render the document's JSON shape
    _write(out / COMPARISON_MD, comparison_markdown(data))
    # Read back as `voicelat view OUT` reads it: the page and the screen show the same turns.
    loaded = load_comparison(out)
    _write(out / REPORT_HTML, comparison_page(loaded))
    print()
    print(comparison_text(data))
    print()
    print(f"reports: {out / COMPARISON_MD}, {out / REPORT_HTML}, {out / COMPARISON_JSON}")
    print(f"open it again: voicelat view {out}")
    from voicelat.cli.tui_child import want_tui

    if want_tui(args):
        # The measurement is over: the UI cannot disturb a stamp any more.
        from voicelat.tui.compare import show_comparison

        show_comparison(data, loaded.runs)
    if not doc.ranked:
        first = doc.combinations[0] if doc.combinations else None
        raise InfraError(
            f"no combination produced a warm turn; {first.name if first else '?'}: "
            f"{(first.failure or first.status) if first else '?'} (reports in {out})"
        )
    return EXIT_OK


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


# -- ranking runs that already exist --------------------------------------------------------------
def _compare_saved(args: argparse.Namespace, dirs: Sequence[Path]) -> int:
    from voicelat.engine.compare import default_compare_out
    from voicelat.engine.comparison import check_rank_key, saved_comparison_document, saved_runs

    if getattr(args, "score", "off") != "off":
        raise ConfigError(
            "--score scores a comparison it measures; score existing runs with "
            "`voicelat score RUN` first, then rank them"
        )
    saved = saved_runs(dirs)
    check_rank_key(_ranking(args), saved.summaries)
    out: Path = args.out or default_compare_out("runs")
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"output directory {out} is not empty: choose another --out")
    return _finish(args, saved_comparison_document(_ranking(args), saved), out)


__all__ = ["COMPARISON_JSON", "COMPARISON_MD", "REPORT_HTML", "add_parser", "cmd_compare"]
