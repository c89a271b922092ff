"""core/judge/cost.py on literal turns: prices parsed strictly, usage by source, cost per turn, per
call and per minute computed by hand."""

from __future__ import annotations

from typing import Any

import pytest

from voicelat.core.base.errors import ConfigError
from voicelat.core.base.turn import Turn
from voicelat.core.judge.cost import (
    Prices,
    cost_section,
    parse_prices,
    turn_cost,
    turn_usage,
)

S = 1_000_000_000
CASCADE = {"stt": "openai-stt", "llm": "openai", "tts": "openai-tts"}


def _turn(index: int = 0, **kw: Any) -> Turn:
    figures = {
        "llm_prompt_tokens": 1000,
        "llm_tokens": 200,
        "tts_audio_ns": 4 * S,
        **kw.pop("figures", {}),
    }
    return Turn(
        index=index,
        fixture="f",
        t0_ns=0,
        # 3 s of input streamed to the STT (its final comes after the endpoint), reply plays at 5 s.
        milestones=kw.pop(
            "milestones", {"endpoint": 2 * S, "stt_final": 3 * S, "output_first_audible": 5 * S}
        ),
        segments={},
        e2e_ns=kw.pop("e2e_ns", 1 * S),
        figures=figures,
        reply=kw.pop("reply", "x" * 100),
        **kw,
    )


PRICES = {
    "currency": "USD",
    "stt": {"per_audio_minute": 0.6},  # 0.01 a second
    "llm": {
        "per_million_input_tokens": 1.0,
        "per_million_cached_input_tokens": 0.5,
        "per_million_output_tokens": 4.0,
    },
    "tts": {"openai-tts": {"per_thousand_characters": 0.02}, "per_character": 1.0},
}


def test_a_cascade_turn_costs_what_the_prices_say() -> None:
    prices = parse_prices(PRICES)
    cost = turn_cost(_turn(), prices, CASCADE)
    by = {s.kind: s for s in cost.stages}
    assert by["stt"].amount == pytest.approx(3 * 0.01)  # t0 -> stt_final, as sent
    assert by["llm"].amount == pytest.approx(1000 * 1e-6 + 200 * 4e-6)
    # The stage's own table wins over the kind's flat price (per_character = 1.0).
    assert by["tts"].amount == pytest.approx(100 * 0.02 / 1000)
    assert cost.total == pytest.approx(0.03 + 0.0018 + 0.002)
    # The reply's span of conversation: t0 -> playout start (output_first_audible) + 4 s of audio.
    assert cost.conversation_ns == 9 * S
    sources = {u.measure: u.source for s in cost.stages for u in s.usage}
    assert sources == {
        "audio_second": "sent",
        "input_token": "reported",
        "output_token": "reported",
        "character": "sent",
    }


def test_cached_tokens_come_out_of_the_input_only_when_they_have_a_price() -> None:
    turn = _turn(figures={"llm_cached_tokens": 600})
    priced = parse_prices(PRICES)
    (llm,) = [s for s in turn_cost(turn, priced, {"llm": "openai"}).stages]
    assert llm.amount == pytest.approx(400 * 1e-6 + 600 * 0.5e-6 + 200 * 4e-6)
    plain = parse_prices({"currency": "USD", "llm": {"per_million_input_tokens": 1.0}})
    (llm,) = turn_cost(turn, plain, {"llm": "openai"}).stages
    assert llm.amount == pytest.approx(1000 * 1e-6)  # every prompt token at the input price


def test_a_priced_measure_nobody_reported_leaves_the_cost_empty_with_the_reason() -> None:
    turn = _turn(figures={"llm_tokens": None})
    cost = turn_cost(turn, parse_prices(PRICES), CASCADE)
    (llm,) = [s for s in cost.stages if s.kind == "llm"]
    assert llm.amount is None and cost.total is None
    assert llm.missing == ("llm output_token: not reported by the provider nor seen by voicelat",)


def test_a_stream_without_usage_is_priced_by_its_counted_deltas_labelled_received() -> None:
    # llama.cpp's server streams no usage: its content deltas (one token each) are counted.
    turn = _turn(figures={"llm_tokens": None, "llm_chunks": 150})
    usage = turn_usage(turn, "llm")
    assert usage["output_token"].quantity == 150 and usage["output_token"].source == "received"
    assert usage["input_token"].source == "reported"  # what was reported stays reported
    (llm,) = [s for s in turn_cost(turn, parse_prices(PRICES), CASCADE).stages if s.kind == "llm"]
    assert llm.amount == pytest.approx(1000 * 1e-6 + 150 * 4e-6)


def test_realtime_usage_is_billed_by_modality_with_cached_tokens_apart() -> None:
    turn = _turn(
        figures={
            "s2s_usage_input_audio_tokens": 100,
            "s2s_usage_input_text_tokens": 50,
            "s2s_usage_cached_tokens": 30,
            "s2s_usage_output_audio_tokens": 200,
            "s2s_usage_output_text_tokens": 40,
        }
    )
    prices = parse_prices(
        {
            "currency": "USD",
            "s2s": {
                "per_million_input_audio_tokens": 32.0,
                "per_million_input_text_tokens": 4.0,
                "per_million_cached_input_tokens": 0.4,
                "per_million_output_audio_tokens": 64.0,
                "per_million_output_text_tokens": 16.0,
            },
        }
    )
    (s2s,) = turn_cost(turn, prices, {"s2s": "openai-realtime"}).stages
    expected = (100 * 32 + (50 - 30) * 4 + 30 * 0.4 + 200 * 64 + 40 * 16) / 1e6
    assert s2s.amount == pytest.approx(expected)


def test_an_agent_is_priced_per_minute_of_its_turns() -> None:
    prices = parse_prices({"currency": "EUR", "agent": {"per_minute": 0.12}})
    (agent,) = turn_cost(_turn(), prices, {"agent": "twilio"}).stages
    assert agent.amount == pytest.approx(9 * 0.002)
    assert agent.usage[0].source == "measured"


def test_cost_section_per_turn_per_call_and_per_minute() -> None:
    prices = parse_prices({"currency": "USD", "tts": {"per_character": 0.001}})
    turns = [
        _turn(0, reply="a" * 100, extra={"call_id": "c1"}),
        _turn(1, reply="a" * 200, extra={"call_id": "c1"}),
        _turn(2, reply="a" * 300, extra={"call_id": "c2"}),
        # A failed turn was billed too: in the spend, not in the per-turn statistics.
        _turn(3, reply="a" * 400, failed=True, e2e_ns=None, extra={"call_id": "c2"}),
    ]
    section = cost_section(turns, prices, {"tts": "openai-tts"})
    assert section["total"] == pytest.approx(1.0)
    assert section["per_turn"]["n"] == 3
    assert section["per_turn"]["mean"] == pytest.approx(0.2)
    assert section["per_turn"]["p50"] == pytest.approx(0.2)
    assert section["per_turn"]["p90"] == pytest.approx(0.28)  # rank 1.8 of 0..2: 0.2 + 0.8 * 0.1
    assert section["calls"] == 2 and section["per_call"] == pytest.approx(0.5)
    # 4 turns of 9 s each: 1.0 USD over 36 s of conversation.
    assert section["per_minute"] == pytest.approx(1.0 * 60 / 36)
    assert section["unpriced"] == [] and section["missing"] == []


def test_a_stage_without_a_price_is_named_not_guessed() -> None:
    prices = parse_prices({"currency": "USD", "tts": {"per_character": 0.001}})
    section = cost_section([_turn()], prices, CASCADE)
    assert section["unpriced"] == ["stt (openai-stt)", "llm (openai)"]
    assert section["stages"].keys() == {"tts"}


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"currency": "USD", "tts": {"per_word": 1.0}}, "per_word is not a known price unit"),
        ({"currency": "USD", "llm": {"per_million_input_tokens": -1}}, "is negative (-1)"),
        ({"currency": "usd", "tts": {"per_character": 1}}, "three-letter code"),
        ({"tts": {"per_character": 1}}, "currency must be"),
        ({"currency": "USD", "cpu": {}}, "[cost] cpu is not a known key"),
        ({"currency": "USD", "tts": {"per_character": "1"}}, "must be a number"),
        ({"currency": "USD", "tts": {}}, "is empty"),
        (
            {"currency": "USD", "stt": {"per_audio_second": 1, "per_audio_minute": 60}},
            "prices audio_second a second time",
        ),
        (
            {
                "currency": "USD",
                "s2s": {"per_million_input_tokens": 1, "per_million_input_audio_tokens": 2},
            },
            "in total and by modality",
        ),
        (
            {"currency": "USD", "tts": {"cartesia-tts": {"per_char": 1}}},
            "[cost.tts.cartesia-tts] per_char",
        ),
    ],
)
def test_bad_prices_are_one_line_naming_the_key(table: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_prices(table, source="p.toml")
    text = str(exc.value)
    assert message in text and text.startswith("p.toml") and "\n" not in text
    assert exc.value.exit_code == 2


def test_a_currency_mix_with_the_prices_file_is_refused() -> None:
    base = parse_prices({"currency": "EUR", "tts": {"per_character": 1}}, source="prices.toml")
    with pytest.raises(ConfigError, match="currency USD mixes with the prices file's EUR"):
        parse_prices({"currency": "USD", "llm": {"per_input_token": 1}}, base=base)
    merged = parse_prices({"llm": {"per_input_token": 1}}, base=base)
    assert merged.currency == "EUR" and merged.stages.keys() == {"tts", "llm"}


def test_prices_travel_through_the_summary_unchanged() -> None:
    prices = parse_prices(PRICES, source="x")
    assert Prices.from_json(prices.to_json()) == prices


def test_usage_of_a_turn_that_reported_nothing_is_empty() -> None:
    bare = Turn(index=0, fixture="f", t0_ns=0, milestones={}, segments={}, e2e_ns=None)
    assert turn_usage(bare, "llm") == {} and turn_usage(bare, "stt") == {}


def test_a_cost_per_turn_budget_passes_fails_and_never_passes_an_unknown_cost() -> None:
    from voicelat.core.judge.budget import evaluate_budget, parse_budget

    budget = parse_budget({"cost_per_turn": 0.01, "min_turns": 1})
    base = {"counts": {"turns": 1, "headline": 1}}
    priced = {"currency": "USD", "per_turn": {"n": 3, "mean": 0.008}}

    def check(cost: Any) -> Any:
        summary = base | ({"cost": cost} if cost is not None else {})
        return next(c for c in evaluate_budget(budget, summary) if c.name == "cost per turn")

    ok = check(priced)
    assert (
        ok.passed and ok.message == "cost per turn 0.008 USD <= limit 0.01 USD (mean of n=3 turns)"
    )
    over = check({**priced, "per_turn": {"n": 3, "mean": 0.0125}})
    assert not over.passed and over.measured == 0.0125
    unknown = check(None)
    assert not unknown.passed and "the pipeline has no [cost] prices" in unknown.message
    empty = check({"currency": "USD", "per_turn": {"n": 0, "mean": None}, "missing": ["llm x"]})
    assert not empty.passed and "(llm x)" in empty.message
    with pytest.raises(ConfigError, match="cost_per_turn must be a cost of 0 or more"):
        parse_budget({"cost_per_turn": -1})
