"""Every public definition's formula on literal turns (integer ms, by hand)."""

from __future__ import annotations

from typing import Any

import pytest

from voicelat.core.base.turn import Turn
from voicelat.core.judge.definitions import (
    DEFINITIONS,
    KINDS,
    Formula,
    compute_definition,
    compute_definitions,
    definitions_json,
    kind_of,
)

MS = 1_000_000
BY_KEY = {d.key: d for d in DEFINITIONS}

#: A cascade turn, ms from t0: each value is distinct so a wrong milestone changes the answer.
CASCADE_MS = {
    "speech_start": 100, "speech_end": 1000, "endpoint": 1200, "stt_first_partial": 400,
    "stt_final": 1250, "llm_request": 1260, "llm_first_delta": 1400, "llm_first_token": 1450,
    "llm_first_speakable": 1500, "llm_done": 1900, "tts_request": 1510, "tts_first_byte": 1600,
    "tts_first_audible": 1640, "tts_done": 2500, "output_first_audible": 1670,
}  # fmt: skip
S2S_MS = {
    "speech_start": 100, "speech_end": 1000, "server_speech_start": 150, "endpoint": 1300,
    "response_start": 1320, "first_text": 1450, "first_audio": 1500, "first_audible": 1530,
    "response_done": 2400, "output_first_audible": 1560,
}  # fmt: skip
AGENT_MS = {
    "speech_start": 100, "speech_end": 1000, "agent_endpoint": 1150, "agent_stt_final": 1220,
    "agent_llm_first_token": 1500, "agent_tts_request": 1530, "agent_tts_first_byte": 1610,
    "first_audio": 1700, "first_audible": 1760, "response_done": 2600,
    "output_first_audible": 1790,
}  # fmt: skip
RAW = {m: v * MS for m, v in AGENT_MS.items() if m.startswith("agent_")}

#: key -> (cascade, s2s, agent) in ms; None: not computable for that kind.
EXPECTED: dict[str, tuple[int | None, int | None, int | None]] = {
    "voicelat_e2e": (670, 560, 790),
    "aa_stt_latency": (250, None, 220),
    "aa_s2s_ttfa": (600, 500, 700),
    "eot_bench_dead_air": (200, 300, 150),
    "coval_tts_ttfa": (130, None, None),
    "openbenchmarks_ttfab": (670, 560, 790),
    "twilio_mouth_to_ear": (670, 560, 790),
    "twilio_platform_gap": (600, 500, 700),
    "twilio_stt": (250, None, 220),
    "twilio_llm_ttft": (190, None, 280),
    "twilio_tts_first_byte": (90, None, 80),
    "pipecat_voice_to_voice": (670, 560, 790),
    "pipecat_bot_ttfb": (90, None, 80),
    # max(endpoint 1200, stt_final 1250) - 1000 + (1450 - 1260) + (1600 - 1510)
    "livekit_e2e_sum": (250 + 190 + 90, None, 220 + 280 + 80),
    "retell_latency": (670, 560, 790),
}


def turn(ms: dict[str, int], *, kind: str | None = None, index: int = 0, shift: int = 0,
         **kw: Any) -> Turn:  # fmt: skip
    """A headline turn from ms milestones; ``shift`` ms moves every milestone after speech_end."""
    milestones = {k: (v + (shift if v > 1000 else 0)) * MS for k, v in ms.items()}
    extra: dict[str, Any] = {} if kind is None else {"kind": kind}
    if kind == "agent":
        extra["agent_trace_raw_ns"] = {k: v for k, v in milestones.items() if k in RAW}
    extra.update(kw.pop("extra", {}))
    e2e = milestones["output_first_audible"] - milestones["speech_end"]
    return Turn(index, "fx", 0, milestones, {}, e2e, extra=extra, **kw)


KIND_TURNS = {"cascade": (CASCADE_MS, None), "s2s": (S2S_MS, "s2s"), "agent": (AGENT_MS, "agent")}


def test_the_table_covers_every_definition_and_every_kind() -> None:
    assert set(EXPECTED) | {"vapi_total"} == set(BY_KEY)
    for d in DEFINITIONS:
        if not d.sum_of_medians:
            assert set(d.formulas) == set(KINDS), d.key
        assert d.source and d.from_to and d.who


@pytest.mark.parametrize("key", sorted(EXPECTED))
@pytest.mark.parametrize("kind", KINDS)
def test_each_formula_on_a_literal_turn(key: str, kind: str) -> None:
    ms, marker = KIND_TURNS[kind]
    want = EXPECTED[key][KINDS.index(kind)]
    r = compute_definition(BY_KEY[key], [turn(ms, kind=marker)])
    if want is None:
        assert r.n == 0 and r.p50_ns is None
        reason = r.reason or ""
        assert reason.startswith("a realtime model") or "voicelat hears" in reason, reason
    else:
        assert (r.n, r.p50_ns, r.p90_ns) == (1, want * MS, want * MS), r


def test_p50_p90_interpolate_over_the_headline_turns_only() -> None:
    turns = [turn(CASCADE_MS, index=i, shift=10 * i) for i in range(11)]  # e2e 670 .. 770
    turns.append(turn(CASCADE_MS, index=11, shift=5000, cold=True))  # not in the headline
    turns.append(turn(CASCADE_MS, index=12, shift=5000, warmup=True))
    r = compute_definition(BY_KEY["openbenchmarks_ttfab"], turns)
    assert (r.n, r.p50_ns, r.p90_ns) == (11, 720 * MS, 760 * MS)
    # Only tts_* moves with the shift too: the TTS TTFA stays 130 ms on every turn.
    assert compute_definition(BY_KEY["coval_tts_ttfa"], turns).p90_ns == 130 * MS


def test_a_missing_milestone_is_named() -> None:
    ms = {k: v for k, v in CASCADE_MS.items() if k != "stt_final"}
    r = compute_definition(BY_KEY["aa_stt_latency"], [turn(ms)])
    assert r.n == 0 and r.reason == "needs stt_final, absent from the turn"
    # Others still computed; this one is excluded and counted.
    both = [turn(ms, index=0), turn(CASCADE_MS, index=1)]
    r = compute_definition(BY_KEY["livekit_e2e_sum"], both)
    assert r.n == 1 and r.excluded == {"needs stt_final, absent from the turn": 1}


def test_an_untraced_agent_turn_says_where_its_milestones_come_from() -> None:
    ms = {k: v for k, v in AGENT_MS.items() if not k.startswith("agent_")}
    r = compute_definition(BY_KEY["twilio_stt"], [turn(ms, kind="agent")])
    assert r.reason is not None and "needs agent_stt_final" in r.reason
    assert "agent's traces" in r.reason
    # e2e needs no trace.
    assert compute_definition(BY_KEY["voicelat_e2e"], [turn(ms, kind="agent")]).n == 1


def test_an_agent_milestone_the_spans_did_not_give_is_not_used() -> None:
    # The recorder placed agent_tts_request at the previous boundary: a filler, not observed.
    raw = {k: v for k, v in RAW.items() if k != "agent_tts_request"}
    t = turn(AGENT_MS, kind="agent", extra={"agent_trace_raw_ns": raw})
    r = compute_definition(BY_KEY["pipecat_bot_ttfb"], [t])
    assert r.n == 0 and r.reason is not None and "agent_tts_request" in r.reason
    assert compute_definition(BY_KEY["twilio_stt"], [t]).p50_ns == 220 * MS


def test_dead_air_counts_cut_offs_apart_against_the_budget() -> None:
    d = BY_KEY["eot_bench_dead_air"]
    cut = dict(CASCADE_MS, endpoint=700)  # the endpoint fired in a pause, before speech_end
    turns = [turn(CASCADE_MS, index=i) for i in range(19)] + [turn(cut, index=19)]
    r = compute_definition(d, turns)
    assert (r.n, r.cut_off, r.p50_ns) == (19, 1, 200 * MS)
    assert r.cutoff_rate == pytest.approx(0.05) and r.within_cutoff_budget is True
    r = compute_definition(d, [*turns[:9], turns[19]])
    assert r.cutoff_rate == pytest.approx(0.1) and r.within_cutoff_budget is False
    # A cut-off turn usually fails (the reply began before speech_end: no e2e): still counted.
    failed_cut = Turn(20, "fx", 0, {k: v * MS for k, v in cut.items()}, {}, None, failed=True)
    r = compute_definition(d, [*turns[:19], failed_cut])
    assert (r.n, r.cut_off) == (19, 1) and r.within_cutoff_budget is True
    warm_up_cut = Turn(21, "fx", 0, {k: v * MS for k, v in cut.items()}, {}, None, warmup=True)
    assert compute_definition(d, [*turns[:19], warm_up_cut]).cut_off == 0
    # A realtime turn whose end of turn was not observed has no dead air (it would read 0).
    blind = turn(dict(S2S_MS, endpoint=1000), kind="s2s", flags=("endpoint_unobserved",))
    r = compute_definition(d, [blind])
    assert r.n == 0 and r.reason is not None and "not observed" in r.reason


def test_twilio_budgets_judge_p50_against_target_and_p90_against_upper() -> None:
    slow = [turn(CASCADE_MS, index=i, shift=500 * (i >= 8)) for i in range(10)]
    r = compute_definition(BY_KEY["twilio_mouth_to_ear"], slow)  # 8 x 670, 2 x 1170
    assert r.p50_ns == 670 * MS and r.p50_within_target is True
    assert r.p90_ns == 1170 * MS and r.p90_within_upper is True
    r = compute_definition(BY_KEY["twilio_tts_first_byte"], slow)  # 90 ms: within 100/250
    assert r.p50_within_target is True
    r = compute_definition(
        BY_KEY["twilio_llm_ttft"], [turn(dict(CASCADE_MS, llm_first_token=2100))]
    )
    assert r.p50_ns == 840 * MS and r.p50_within_target is False and r.p90_within_upper is False


def test_vapi_adds_the_segments_medians() -> None:
    turns = [
        Turn(i, "fx", 0, {}, {"stt": s, "llm_ttft": m}, s + m)
        for i, (s, m) in enumerate([(100, 900), (200, 200), (900, 100)])
    ]
    r = compute_definition(BY_KEY["vapi_total"], turns)
    # medians 200 + 200 = 400, while the e2e values are 1000, 400, 1000: P50 1000.
    assert (r.n, r.p50_ns, r.p90_ns) == (3, 400, None)
    assert compute_definition(BY_KEY["voicelat_e2e"], turns).p50_ns is None  # no milestones


def test_mixed_run_states_the_formula_per_kind_and_json_keys_name_units() -> None:
    turns = [turn(CASCADE_MS, index=0), turn(S2S_MS, kind="s2s", index=1)]
    results = {r.definition.key: r for r in compute_definitions(turns)}
    ttfa = results["aa_s2s_ttfa"]
    assert ttfa.n == 2 and ttfa.kinds == ("cascade", "s2s")
    assert ttfa.formula == (
        "cascade: tts_first_byte − speech_end; realtime (S2S): first_audio − speech_end"
    )
    stt = results["aa_stt_latency"]
    assert stt.n == 1 and stt.excluded and "realtime" in next(iter(stt.excluded))
    doc = {d["key"]: d for d in definitions_json(list(results.values()))}
    assert doc["aa_s2s_ttfa"]["p50_ns"] == 550 * MS and doc["aa_s2s_ttfa"]["n"] == 2
    assert doc["twilio_stt"]["budget"]["target_ns"] == 350 * MS
    assert doc["eot_bench_dead_air"]["cutoff"]["budget_rate"] == 0.05
    for d in doc.values():
        timed = [k for k in d if k.startswith(("p50", "p90"))]
        assert timed == ["p50_ns", "p90_ns"]


def test_no_headline_turn_says_so() -> None:
    r = compute_definition(BY_KEY["voicelat_e2e"], [turn(CASCADE_MS, failed=True)])
    assert r.n == 0 and r.reason is not None and "no headline turn" in r.reason


def test_formula_text_and_kind() -> None:
    f = BY_KEY["livekit_e2e_sum"].formulas["cascade"]
    assert isinstance(f, Formula)
    assert f.text == (
        "(max(endpoint, stt_final) − speech_end) + (llm_first_token − llm_request) + "
        "(tts_first_byte − tts_request)"
    )
    assert kind_of(turn(S2S_MS, kind="s2s")) == "s2s" and kind_of(turn(CASCADE_MS)) == "cascade"
    assert BY_KEY["coval_tts_ttfa"].formula_text("s2s").startswith("not computable: ")


def test_a_traced_agent_turn_from_the_recorder() -> None:
    from tests.core.test_core_agent import agent_turn, at
    from voicelat.core.traces.agent_trace import TraceSplit

    split = TraceSplit(
        milestones={"agent_endpoint": at(1800), "agent_stt_final": at(1850),
                    "agent_llm_first_token": at(1950), "agent_tts_first_byte": at(2040)},
        reported={}, flags=(),
    )  # fmt: skip
    t = agent_turn(split).finish()  # speech_end 1500, first byte 2100, heard 2170
    results = {r.definition.key: r for r in compute_definitions([t])}
    assert results["twilio_stt"].p50_ns == 350 * MS
    assert results["twilio_llm_ttft"].p50_ns == 100 * MS
    assert results["eot_bench_dead_air"].p50_ns == 300 * MS
    assert results["voicelat_e2e"].p50_ns == 670 * MS
    # The mapping saw no TTS request: the recorder filled it in, so the TTFB is not computed.
    ttfb = results["pipecat_bot_ttfb"]
    assert ttfb.n == 0 and ttfb.reason is not None and "agent_tts_request" in ttfb.reason


def test_docs_definitions_names_every_key_and_formula() -> None:
    from tests.helpers import ROOT

    doc = (ROOT / "docs" / "DEFINITIONS.md").read_text()
    for d in DEFINITIONS:
        assert f"`{d.key}`" in doc, d.key
        for kind in KINDS:
            text = d.formula_text(kind)
            shown = text.removeprefix("not computable: ")
            assert shown in doc, (d.key, kind, shown)
