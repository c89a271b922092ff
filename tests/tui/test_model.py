"""The TUI's data model: budgets, sorting, live events, the saved run (no App, no terminal)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.tui.helpers import MS, SAVED_RUN, make_turn, saved_model
from voicelat.core.base.stats import Distribution
from voicelat.files.results import LoadedRun, load_run
from voicelat.tui.model import (
    SORT_KEYS,
    LiveTurn,
    MilestoneSeen,
    RunEnded,
    RunModel,
    SetupLine,
    TurnFinished,
    TurnStarted,
    crossing_segment,
    e2e_budget_ns,
    fmt_ms,
    judge,
    next_in,
    round_to_total,
    segment_limit_ns,
    sort_turns,
    turn_status,
)


def test_round_to_total_keeps_the_sum_and_stays_within_one_of_each_value() -> None:
    values = {"a": 0.56, "b": 313.34, "c": 42.8, "d": 0.27, "e": 702.03}
    total = round(sum(values.values()))
    rounded = round_to_total(values, total)
    assert sum(rounded.values()) == total
    assert all(abs(rounded[k] - v) < 1 for k, v in values.items())
    # three halves: rounding each on its own gives 0 + 0 + 0 (banker's rounding), not 2
    halves = {"x": 0.5, "y": 0.5, "z": 0.5}
    assert sum(round(v) for v in halves.values()) == 0
    assert sum(round_to_total(halves, 2).values()) == 2


def test_budget_limits_are_read_from_the_raw_budget_table() -> None:
    budget = {
        "e2e": {"p50_ms": 2500, "p90_ms": 3500},
        "stt": {"p90_ms": 300},
        "max_failure_rate": 0.1,
    }
    assert e2e_budget_ns(budget, 50) == 2500 * MS
    assert e2e_budget_ns(budget, 99) is None
    assert segment_limit_ns(budget, "stt", 90) == 300 * MS
    assert segment_limit_ns(budget, "max_failure_rate", 90) is None
    assert segment_limit_ns({"e2e": {"p50_ms": True}}, "e2e", 50) is None


def test_crossing_segment_is_the_one_in_which_the_running_sum_passes_the_limit() -> None:
    segments = {"endpointing": 500.0, "stt": 300.0, "handoff": 1.0, "llm_ttft": 200.0}
    assert crossing_segment(segments, 700.0) == "stt"
    assert crossing_segment(segments, 850.0) == "llm_ttft"
    assert crossing_segment(segments, 499.0) == "endpointing"
    assert crossing_segment(segments, 2000.0) is None


def test_judge_flags_over_budget_and_a_segment_over_its_own_limit() -> None:
    segments = {"endpointing": 500 * MS, "stt": 400 * MS, "llm_ttft": 300 * MS}
    budget = {"e2e": {"p90_ms": 1000}, "stt": {"p90_ms": 350}, "llm_ttft": {"p90_ms": 500}}
    verdict = judge(90, 1200 * MS, segments, budget)
    assert verdict.over and verdict.limit_ns == 1000 * MS
    assert verdict.crossing == "llm_ttft"  # 500 + 400 = 900 < 1000 < 1200
    assert set(verdict.own_limit) == {"stt"}
    # A per-segment limit is judged on that segment's own percentile when one is given.
    dists = {"stt": Distribution(n=5, p90=340 * MS), "llm_ttft": Distribution(n=5, p90=600 * MS)}
    verdict = judge(90, 1200 * MS, segments, budget, dists)
    assert set(verdict.own_limit) == {"llm_ttft"}
    assert verdict.own_limit["llm_ttft"] == (600 * MS, 500 * MS)
    within = judge(50, 900 * MS, segments, {"e2e": {"p50_ms": 2500}})
    assert not within.over and within.crossing is None


def test_sorting_turns_puts_slow_turns_first_and_failed_ones_last() -> None:
    fast = make_turn(0, {"stt": 100})
    slow = make_turn(1, {"llm_ttft": 900})
    failed = make_turn(
        2, failed=True, failure_stage="stt", failure_reason="boom", e2e_ns=None, segments={}
    )
    mid = make_turn(3, {"stt": 400})
    turns = [fast, slow, failed, mid]
    assert [t.index for t in sort_turns(turns, "index")] == [0, 1, 2, 3]
    assert [t.index for t in sort_turns(turns, "e2e")] == [1, 3, 0, 2]
    assert [t.index for t in sort_turns(turns, "largest")] == [1, 3, 0, 2]
    assert next(t.index for t in sort_turns(turns, "status")) == 2
    assert [t.fixture for t in sort_turns(turns, "fixture")] == ["fx0", "fx1", "fx2", "fx3"]
    with pytest.raises(ValueError, match="unknown sort key"):
        sort_turns(turns, "colour")


def test_turn_status_words() -> None:
    assert turn_status(make_turn(0)) == "ok"
    assert turn_status(make_turn(0, warmup=True, cold=True)) == "warm-up"
    assert turn_status(make_turn(0, cold=True)) == "cold"
    assert turn_status(make_turn(0, flags=("pacer_lag",))) == "flagged"
    assert turn_status(make_turn(0, failed=True)) == "failed"


def test_keys_cycle_through_their_options() -> None:
    assert next_in((50, 90, 99), 50) == 90
    assert next_in((50, 90, 99), 99) == 50
    assert next_in(SORT_KEYS, "status") == "index"
    assert next_in((50, 90), 75) == 50


def test_fmt_ms_keeps_a_decimal_only_where_it_matters() -> None:
    assert fmt_ms(None) == "-"
    assert fmt_ms(560_000) == "0.6"
    assert fmt_ms(1_066_027_372) == "1066"


def test_live_events_build_the_live_turn_then_settle_it() -> None:
    model = RunModel(results_path=Path("out"), live_mode=True)
    assert model.running
    model.apply(SetupLine("embedded stack ready in 1.2 s\n"))
    assert list(model.setup_log) == ["embedded stack ready in 1.2 s"]
    model.apply(TurnStarted(0, "alpha", 3, True, 2000 * MS))
    assert model.status == "running" and model.planned == 3
    assert model.live is not None and model.live.fixture == "alpha"
    # endpoint 480 ms after speech_end, reported when the UI clock read 10 s
    model.apply(MilestoneSeen(0, "endpoint", 2480 * MS, 10_000 * MS))
    live = model.live
    assert live.since_speech_end("endpoint") == 480 * MS
    assert live.t0_clock_ns == (10_000 - 2480) * MS
    assert live.elapsed_ns(10_100 * MS) == 580 * MS
    model.apply(MilestoneSeen(7, "stt_final", 1, 1))  # another turn's late event: ignored
    assert "stt_final" not in live.milestones
    turn = make_turn(0)
    model.apply(TurnFinished(turn, 3))
    assert model.turns == [turn] and model.live is None
    model.apply(RunEnded("interrupted", "stopped by the user"))
    assert model.status == "interrupted" and model.message == "stopped by the user"
    assert not model.running


def test_live_turn_without_annotation_counts_from_the_audio_start() -> None:
    live = LiveTurn(0, "raw", False, None, {"endpoint": 900 * MS})
    assert live.since_speech_end("endpoint") == 900 * MS
    assert live.elapsed_ns(5) is None


def test_the_saved_run_loads_its_budget_plan_and_lag_limit() -> None:
    model = saved_model()
    assert len(model.turns) == 15 and model.planned == 15
    assert model.budget["e2e"] == {"p50_ms": 2500, "p90_ms": 3500}
    assert model.pipeline_name == "local" and model.status == "complete"
    assert model.pacer_lag_limit_ns == 10 * MS
    c = model.counts()
    assert c == {"done": 15, "failed": 0, "warmup": 1, "cold": 0, "headline": 14, "flagged": 1}
    # the bands come from the headline turns and match what the runner wrote in summary.json
    bands = model.bands()
    assert bands[50].n == 14 and round(bands[90].e2e_percentile) == 1185729096
    assert model.max_figure("pacer_lag_max_ns") == max(
        int(t.figures["pacer_lag_max_ns"] or 0) for t in model.turns
    )


def test_a_run_without_summary_says_so() -> None:
    turns = tuple(saved_model().turns[:3])
    model = RunModel.from_loaded(LoadedRun(SAVED_RUN, turns, None, 2))
    assert model.status.startswith("no summary") and model.skipped_lines == 2
    assert model.budget == {} and model.planned is None


def test_the_error_bar_comes_from_a_saved_summary_or_the_runs_end(tmp_path: Path) -> None:
    """``voicelat view``: the summary's instrument section; a live run: the one its RunEnded
    brought (read from the summary the child wrote), and an end without one keeps it."""
    run = tmp_path / "run"
    shutil.copytree(SAVED_RUN, run)
    summary = json.loads((run / "summary.json").read_text())
    assert RunModel.from_loaded(load_run(run)).instrument is None  # a run from before calibration
    section = {"status": "calibrated", "error_p50_ns": 300_000, "error_p99_ns": 900_000}
    (run / "summary.json").write_text(json.dumps(summary | {"instrument": section}))
    assert RunModel.from_loaded(load_run(run)).instrument == section
    live = RunModel(results_path=None, live_mode=True)
    live.apply(RunEnded("complete", None, section))
    assert live.instrument == section
    live.apply(RunEnded("complete"))
    assert live.instrument == section
    assert RunEnded("complete", None, section) == RunEnded("complete")  # the status is the event
