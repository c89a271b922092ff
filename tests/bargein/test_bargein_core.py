"""The barge-in figures with plain integers: the stop waterfall sums, missing marks fold into
the next segment, pauses and talk-over from audible spans, the summary section, the budget
lines, the scenario steps and their mistakes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.bargein.bargein_helpers import scenario
from voicelat.core.base.errors import ConfigError
from voicelat.core.calls.bargein import (
    OverlayOutcome,
    barge_in_section,
    longest_gap_ns,
    stop_segments,
)
from voicelat.core.judge.budget import evaluate_budget, parse_budget
from voicelat.core.summaries.run_summary import BargeInSummary, CallsSummary, RunSummary
from voicelat.files.scenario import load_scenario


def test_the_stop_waterfall_sums_and_folds_missing_marks() -> None:
    full = stop_segments(100, {"detected": 150, "cancel": 160, "last_byte": 200}, 300)
    assert full == {"detection": 50, "cancel": 10, "drain": 40, "flush": 100}
    # An agent without traces: no detection, no cancel of ours; only its last byte.
    agent = stop_segments(100, {"detected": None, "cancel": None, "last_byte": 250}, 300)
    assert agent == {"detection+cancel+drain": 150, "flush": 50}
    # Marks out of order (the last byte came before the detection) are clamped: still sums.
    early = stop_segments(100, {"detected": 150, "cancel": 160, "last_byte": 120}, 170)
    assert early == {"detection": 50, "cancel": 10, "drain": 0, "flush": 10}
    assert sum(early.values()) == 70


def test_pauses_talk_over_and_false_barge_ins_come_from_the_audible_spans() -> None:
    spans = ((0, 900), (1700, 3000))
    assert longest_gap_ns(spans, 1000, 2000) == 700
    assert longest_gap_ns(spans, 1800, 2000) == 0
    held = OverlayOutcome("backchannel", "bc", "s", 1, onset_ns=1000, speech_end_ns=1400,
                          audible=((0, 3000),), pause_threshold_ns=600)  # fmt: skip
    assert held.false_barge_in is False and held.talk_over_ns == 400
    paused = OverlayOutcome("backchannel", "bc", "s", 1, onset_ns=1000, speech_end_ns=1400,
                            audible=spans, pause_threshold_ns=600)  # fmt: skip
    assert paused.pause_ns == 700 and paused.false_barge_in is True and paused.talk_over_ns == 0
    never = OverlayOutcome("interrupt", "i", "s", 1, onset_ns=1000, speech_end_ns=2000,
                           audible=((0, 5000),), last_audible_ns=5000)  # fmt: skip
    assert never.never_stopped and never.stop_ns is None and never.talk_over_ns == 1000
    late = OverlayOutcome("interrupt", "i", "s", 1, reply_ended_before=True)
    assert not late.measured and not late.never_stopped
    assert OverlayOutcome.from_json(paused.to_json()) == paused


def _stopped(stop: int) -> OverlayOutcome:
    return OverlayOutcome("interrupt", "i", "s", 1, onset_ns=1000, speech_end_ns=3000,
                          detected_ns=1000 + stop // 2, cancel_ns=1000 + stop // 2,
                          last_audible_ns=1000 + stop, stopped=True,
                          audible=((0, 1000 + stop),))  # fmt: skip


def test_the_section_and_the_budget_lines() -> None:
    never = OverlayOutcome("interrupt", "i", "s", 1, onset_ns=0, speech_end_ns=10,
                           audible=((0, 50),), last_audible_ns=50)  # fmt: skip
    bc = OverlayOutcome("backchannel", "bc", "s", 2, onset_ns=0, speech_end_ns=10,
                        stopped=True, audible=((0, 5),))  # fmt: skip
    section = barge_in_section([_stopped(200_000_000), _stopped(400_000_000), never, bc], [900])
    assert section["interrupts"] == 3 and section["stopped"] == 2 and section["never_stopped"] == 1
    assert section["stop"]["max"] == 400_000_000 and section["false_barge_in_rate"] == 1.0
    assert section["interruption_e2e"]["n"] == 1
    calls = CallsSummary(n=1, barge_in=BargeInSummary.from_json(section))
    summary = RunSummary(calls=calls)
    budget = parse_budget({"barge_in_stop": {"p90_ms": 500}, "false_barge_in_rate": 0.5,
                           "min_turns": 1})  # fmt: skip
    checks = {c.name: c for c in evaluate_budget(budget, summary)}
    # An interruption that was never stopped fails the stop line, whatever the percentile.
    assert not checks["barge_in_stop P90"].passed
    assert "never stopped" in checks["barge_in_stop P90"].message
    assert not checks["false barge-in rate"].passed
    ok = CallsSummary(n=1, barge_in=BargeInSummary.from_json(
        barge_in_section([_stopped(200_000_000), _stopped(300_000_000)])))  # fmt: skip
    checks = {c.name: c for c in evaluate_budget(budget, RunSummary(calls=ok))}
    assert checks["barge_in_stop P90"].passed
    # No backchannel step: the rate is unmeasured, and an unmeasured rate never passes.
    assert (
        not checks["false barge-in rate"].passed
        and "no value" in checks["false barge-in rate"].message
    )
    with pytest.raises(ConfigError, match="false_barge_in_rate must be a fraction"):
        parse_budget({"false_barge_in_rate": 2})


def test_overlay_steps_are_read_and_their_mistakes_named(tmp_path: Path) -> None:
    path = scenario(tmp_path, "ok", '[[step]]\nsay = "short_01_weather"\n'
                    '[[step]]\ninterrupt = "int_01_wait"\nafter_ms = 700\n'
                    '[[step]]\nbackchannel = "bc_yeah"\npause_ms = 500\n')  # fmt: skip
    sc = load_scenario(path).scenario
    assert [s.kind for s in sc.steps] == ["say", "interrupt", "backchannel"]
    assert [s.fixture for s in sc.says] == ["short_01_weather", "int_01_wait"]
    assert sc.steps[1].after_ms == 700 and sc.steps[2].pause_ms == 500
    bad = {
        "first": ('[[step]]\nbackchannel = "bc_yeah"\n[[step]]\nsay = "short_01_weather"\n',
                  "plays during the previous step's reply"),
        "pause": ('[[step]]\nsay = "short_01_weather"\n[[step]]\ninterrupt = "int_01_wait"\n'
                  'pause_ms = 3\n', "pause_ms judges a backchannel"),
        "after": ('[[step]]\nsay = "short_01_weather"\nafter_ms = 3\n', "after_ms and pause_ms"),
        "missing": ('[[step]]\nsay = "short_01_weather"\n[[step]]\nnoise = "nope"\n',
                    "no fixture 'nope'"),
    }  # fmt: skip
    for name, (steps, message) in bad.items():
        with pytest.raises(ConfigError, match=message):
            load_scenario(scenario(tmp_path, name, steps))


def test_overlays_a_pipeline_cannot_hear_and_fixtures_without_speech_are_refused(
    tmp_path: Path,
) -> None:
    import json
    import shutil

    from tests.calls.calls_helpers import CALLS
    from voicelat.files.pipeline import parse_pipeline
    from voicelat.files.scenario import check_overlays

    sc = load_scenario(scenario(tmp_path, "i", '[[step]]\nsay = "short_01_weather"\n'
                                '[[step]]\ninterrupt = "int_01_wait"\n')).scenario  # fmt: skip
    manual = parse_pipeline({"s2s": {"stage": "openai-realtime", "turn_detection": "none"}})
    with pytest.raises(ConfigError, match='turn_detection = "server_vad"'):
        check_overlays(sc, manual)
    check_overlays(sc, parse_pipeline({"s2s": {"stage": "openai-realtime"}}))
    gemini = {"stage": "gemini-live", "activity_detection": "manual"}
    with pytest.raises(ConfigError, match='activity_detection = "automatic"'):
        check_overlays(sc, parse_pipeline({"s2s": gemini}))
    check_overlays(sc, parse_pipeline({"s2s": gemini | {"activity_detection": "automatic"}}))
    # A backchannel fixture whose manifest has no speech bounds: named, before anything runs.
    folder = tmp_path / "fx"
    folder.mkdir()
    manifest = json.loads((CALLS / "manifest.json").read_text())
    for entry in manifest["fixtures"]:
        shutil.copy(CALLS / entry["file"], folder / entry["file"])
        if entry["id"] == "bc_yeah":
            entry["speech_start_ms"] = entry["speech_end_ms"] = None
    (folder / "manifest.json").write_text(json.dumps(manifest))
    path = tmp_path / "bc.toml"
    path.write_text(f'fixtures = "{folder}"\n[[step]]\nsay = "short_01_weather"\n'
                    '[[step]]\nbackchannel = "bc_yeah"\n')  # fmt: skip
    with pytest.raises(ConfigError, match="'bc_yeah' has no speech bounds"):
        load_scenario(path)


def test_the_timelines_mark_the_overlays_and_the_stop() -> None:
    import xml.etree.ElementTree as ET

    from voicelat.core.base.turn import Turn
    from voicelat.core.calls.bargein import BARGE_IN, barge_in_extra
    from voicelat.core.calls.call import CALL_CONNECTED, CALL_ID, CALL_TURN, CallRecord
    from voicelat.report.call_svg import call_lanes, call_timeline_svg
    from voicelat.tui.calls import call_timeline_text

    ms = 1_000_000
    # Onset at 1000 ns, stopped 240 ms later; detected at 120 ms, the VAD's trigger at 80 ms
    # of it (ignore_words: the words took the other 40).
    cut = dataclasses.replace(_stopped(240 * ms), vad_ns=1000 + 80 * ms)
    t0 = 0
    turn = Turn(index=0, fixture="f", t0_ns=t0,
                milestones={"speech_start": 0, "speech_end": 10, "output_first_audible": 500},
                segments={}, e2e_ns=490,
                extra={CALL_ID: "c", CALL_TURN: 1, CALL_CONNECTED: 0,
                                   BARGE_IN: barge_in_extra(cut, t0)})  # fmt: skip
    record = CallRecord("c", "s", 0, 3_000 * ms, 2, 2, overlays=(cut,))
    for lanes in (
        call_lanes(record, [turn]),
        call_lanes(CallRecord("c", "s", 0, 3_000 * ms, 2, 2), [turn]),
    ):
        (ov,) = lanes.overlays
        assert ov.kind == "interrupt" and ov.stop_ns == 240 * ms
        # The reply played until the interruption stopped it.
        (reply,) = lanes.agent
        assert reply.end_ns == cut.last_audible_ns
        svg = ET.fromstring(call_timeline_svg(lanes))
        stops = [e for e in svg.iter() if e.get("class") == "stop"]
        assert [s.get("data-ns") for s in stops] == [str(240 * ms)]
        assert "stop 240" in call_timeline_text(lanes).plain
        # Each stop's waterfall, the detection split into its VAD and words parts, in both.
        fall = "stop 240 ms = detection 120 (vad 80 + words 40) + cancel 0 + drain+flush 120"
        assert f"turn 1 {fall}" in call_timeline_text(lanes, width=120).plain
        titles = [e.text or "" for e in svg.iter() if e.tag.endswith("title")]
        assert any(fall in title for title in titles), titles
