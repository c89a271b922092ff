"""What a turn cost: unit prices per stage, the usage a turn recorded, cost per turn, per call
and per minute of conversation (pure; no I/O).

Prices are the user's (a ``[cost]`` table in the pipeline, or a prices file it names):
voicelat ships none it cannot source. A price is per unit of one *measure* of one stage::

    [cost]
    currency = "USD"
    source = "provider price pages, 2026-11"     # optional: where the prices come from
    [cost.stt]
    per_audio_minute = 0.0043
    [cost.llm]
    per_million_input_tokens = 0.15
    per_million_cached_input_tokens = 0.075
    per_million_output_tokens = 0.60
    [cost.tts."cartesia-tts"]                    # a stage name: that stage's price only
    per_million_characters = 50.0

A stage table holds unit keys (the price of that stage whatever it is), or tables named after a
stage (``stage = "..."`` in the pipeline), so one prices file serves a compare matrix.

Usage comes from what the provider reported (``reported``: token counts in the LLM's and the
realtime model's ``usage``; the STT's and TTS's ``usage`` as their stages record it, figures
``stt_usage_*``/``tts_usage_*``: audio seconds, characters, tokens) and, where a provider reports
nothing, from what voicelat sent or received (``sent``: the characters of the reply text sent to
the TTS, the input audio streamed to the STT; ``received``: the reply audio; ``measured``: the
turn's span on the clock), labelled so. A reported figure always wins over voicelat's count.
A measure with a price and no usage leaves the turn's cost empty with the reason: never a guess.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from voicelat.core.base.errors import ConfigError
from voicelat.core.base.turn import Turn

NS_PER_S = 1_000_000_000
#: The ``extra`` key a call's turns share (the calls' ``core/calls/call.py`` ``CALL_ID``).
CALL_ID = "call_id"

#: The measures each stage kind is priced by (the base unit of each: a token, a second, a character).
MEASURES: dict[str, tuple[str, ...]] = {
    # gpt-4o-transcribe bills tokens (audio in, text out), whisper-1 and the others seconds.
    "stt": ("audio_second", "input_token", "input_audio_token", "input_text_token", "output_token"),
    "llm": ("input_token", "cached_input_token", "output_token"),
    # gpt-4o-mini-tts bills tokens (text in, audio out), the others characters or seconds.
    "tts": ("character", "audio_second", "input_token", "output_token"),
    "s2s": (
        "input_token",
        "output_token",
        "input_audio_token",
        "input_text_token",
        "cached_input_token",
        "output_audio_token",
        "output_text_token",
    ),
    "agent": ("second",),
}
STAGE_KINDS: tuple[str, ...] = tuple(MEASURES)
_TOP_KEYS = ("currency", "source", "prices", *STAGE_KINDS)
_CURRENCY = re.compile(r"^[A-Z]{3}$")


def _unit_keys(measure: str) -> dict[str, float]:
    """The keys a price of ``measure`` may be written with, and how many base units each is."""
    if measure.endswith("token"):
        return {
            f"per_{measure}": 1.0,
            f"per_million_{measure}s": 1e6,
            f"per_thousand_{measure}s": 1e3,
        }
    if measure == "character":
        return {"per_character": 1.0, "per_thousand_characters": 1e3, "per_million_characters": 1e6}
    prefix = "" if measure == "second" else measure.removesuffix("second")
    return {f"per_{prefix}second": 1.0, f"per_{prefix}minute": 60.0, f"per_{prefix}hour": 3600.0}


def unit_keys(kind: str) -> dict[str, tuple[str, float]]:
    """Every key ``[cost.<kind>]`` accepts: key -> (measure, base units per key unit)."""
    return {k: (m, scale) for m in MEASURES[kind] for k, scale in _unit_keys(m).items()}


@dataclass(frozen=True, slots=True)
class StagePrice:
    """One stage's prices: currency units per base unit of each measure it is priced by."""

    per_unit: Mapping[str, float]

    def to_json(self) -> dict[str, float]:
        return dict(self.per_unit)


@dataclass(frozen=True, slots=True)
class Prices:
    """A parsed ``[cost]`` table: the currency and each stage kind's prices.

    ``stages[kind]`` maps a stage name to its price; ``"*"`` is the price of that kind of stage
    whatever its name.
    """

    currency: str
    stages: Mapping[str, Mapping[str, StagePrice]] = field(default_factory=dict)
    source: str = ""

    def price_of(self, kind: str, stage_name: str | None) -> StagePrice | None:
        """The price of stage ``stage_name`` of ``kind``: its own, else the kind's, else None."""
        table = self.stages.get(kind, {})
        if stage_name is not None and stage_name in table:
            return table[stage_name]
        return table.get("*")

    def to_json(self) -> dict[str, Any]:
        return {
            "currency": self.currency,
            "source": self.source,
            "stages": {
                kind: {name: p.to_json() for name, p in table.items()}
                for kind, table in self.stages.items()
            },
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Prices:
        """The prices a summary saved (``to_json``), trusted as written."""
        stages = {
            str(kind): {
                str(name): StagePrice({str(m): float(v) for m, v in per.items()})
                for name, per in table.items()
            }
            for kind, table in dict(data.get("stages") or {}).items()
        }
        return cls(str(data.get("currency", "")), stages, str(data.get("source", "")))


def _price_value(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{where} must be a number (a price in the currency), not {value!r}")
    if value < 0:
        raise ConfigError(f"{where} is negative ({value}): a price is 0 or more")
    return float(value)


def _stage_price(table: Mapping[str, Any], kind: str, where: str) -> StagePrice:
    keys = unit_keys(kind)
    per: dict[str, float] = {}
    for key, value in table.items():
        if key not in keys:
            close = difflib.get_close_matches(key, list(keys), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(
                f"{where} {key} is not a known price unit{hint}; valid: {', '.join(keys)}"
            )
        measure, scale = keys[key]
        if measure in per:
            raise ConfigError(f"{where} {key} prices {measure} a second time: give one unit")
        per[measure] = _price_value(value, f"{where} {key}") / scale
    if not per:
        raise ConfigError(f"{where} is empty: give at least one of {', '.join(keys)}")
    for side in ("input", "output"):
        split = [m for m in per if m.startswith(f"{side}_") and m != f"{side}_token"]
        if f"{side}_token" in per and split:
            raise ConfigError(
                f"{where} prices {side} tokens in total and by modality ({', '.join(split)}): "
                "give one or the other, a token would be billed twice"
            )
    return StagePrice(per)


def _kind_prices(table: object, kind: str, where: str) -> dict[str, StagePrice]:
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where} must be a table of prices")
    units = {k: v for k, v in table.items() if not isinstance(v, Mapping)}
    out = {"*": _stage_price(units, kind, where)} if units else {}
    for name, sub in table.items():
        if isinstance(sub, Mapping):
            out[str(name)] = _stage_price(sub, kind, f"{where[:-1]}.{name}]")
    if not out:
        raise ConfigError(f"{where} is empty: give unit prices or a table per stage name")
    return out


def parse_prices(
    table: Mapping[str, Any], *, source: str = "cost", base: Prices | None = None
) -> Prices:
    """Validate a ``[cost]`` table (errors: one line naming ``source`` and the key).

    ``base`` is a prices file's content the table extends (the table's prices win); its
    currency must be the table's.
    """
    for key in table:
        if key not in _TOP_KEYS:
            raise ConfigError(
                f"{source}: [cost] {key} is not a known key; valid keys: {', '.join(_TOP_KEYS)}"
            )
    currency = table.get("currency", base.currency if base else None)
    if not isinstance(currency, str) or not _CURRENCY.match(currency):
        raise ConfigError(
            f'{source}: [cost] currency must be a three-letter code such as "USD", not {currency!r}'
        )
    if base is not None and base.currency != currency:
        raise ConfigError(
            f"{source}: [cost] currency {currency} mixes with the prices file's {base.currency}: "
            "one run is priced in one currency"
        )
    note = table.get("source", base.source if base else "")
    if not isinstance(note, str):
        raise ConfigError(f"{source}: [cost] source must be a string (where the prices come from)")
    stages: dict[str, dict[str, StagePrice]] = {
        k: dict(v) for k, v in (base.stages.items() if base else ())
    }
    for kind in STAGE_KINDS:
        if kind in table:
            stages.setdefault(kind, {}).update(
                _kind_prices(table[kind], kind, f"{source}: [cost.{kind}]")
            )
    return Prices(currency, stages, note)


# -- usage -----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Usage:
    """How much of one measure a turn used, and who said so (reported/sent/received/measured)."""

    measure: str
    quantity: float
    source: str


def _fig(turn: Turn, name: str) -> float | None:
    v = turn.figures.get(name)
    return None if v is None or isinstance(v, bool) else float(v)


def reply_audio_ns(turn: Turn) -> float | None:
    """The length of the reply audio the turn received (a cascade's TTS, an S2S model's or an
    agent's reply)."""
    for name in ("reply_audio_ns", "tts_audio_ns", "s2s_audio_ns", "agent_audio_ns"):
        value = _fig(turn, name)
        if value is not None:
            return value
    return None


def conversation_ns(turn: Turn) -> int | None:
    """The turn's span of conversation: its first input sample to the end of the reply audio
    (the played reply's start plus its length), None when the reply never played."""
    audio = reply_audio_ns(turn)
    start = turn.extra.get("playout_started_ns")
    if not isinstance(start, int):
        start = turn.milestones.get("output_first_audible")
    if start is None or audio is None:
        return None
    return int(start + audio)


def _stt_audio_s(turn: Turn) -> float | None:
    # The engine streams the input in real time from the turn's first sample (t0) until the
    # STT is done with it: the later of the endpoint and the final transcript.
    ends = [turn.milestones[m] for m in ("endpoint", "stt_final") if m in turn.milestones]
    return max(ends) / NS_PER_S if ends else None


_S2S_FIGURES = {
    "input_token": "s2s_usage_input_tokens",
    "output_token": "s2s_usage_output_tokens",
    "input_audio_token": "s2s_usage_input_audio_tokens",
    "input_text_token": "s2s_usage_input_text_tokens",
    "cached_input_token": "s2s_usage_cached_tokens",
    "output_audio_token": "s2s_usage_output_audio_tokens",
    "output_text_token": "s2s_usage_output_text_tokens",
}


#: An STT's or TTS's reported token counts: measure -> the ``Done.usage`` key its stage records.
_TOKEN_FIGURES = {
    "input_token": "input_tokens",
    "input_audio_token": "input_audio_tokens",
    "input_text_token": "input_text_tokens",
    "output_token": "output_tokens",
}


def turn_usage(turn: Turn, kind: str) -> dict[str, Usage]:
    """What a turn used of each measure of stage ``kind`` (absent: nobody knows)."""
    out: dict[str, Usage] = {}

    def put(measure: str, value: float | None, source: str) -> None:
        if value is not None:
            out[measure] = Usage(measure, value, source)

    if kind == "stt":
        billed_ms = _fig(turn, "stt_usage_audio_ms")
        if billed_ms is not None:
            put("audio_second", billed_ms / 1000, "reported")
        else:
            put("audio_second", _stt_audio_s(turn), "sent")
        for measure, name in _TOKEN_FIGURES.items():
            put(measure, _fig(turn, f"stt_usage_{name}"), "reported")
    elif kind == "llm":
        # Cached input tokens are counted inside the prompt's: stage_cost takes them out when
        # they have a price of their own.
        put("input_token", _fig(turn, "llm_prompt_tokens"), "reported")
        put("cached_input_token", _fig(turn, "llm_cached_tokens"), "reported")
        tokens = _fig(turn, "llm_tokens")
        if tokens is not None:
            put("output_token", tokens, "reported")
        else:
            # A stream that reports no usage (llama.cpp's server ignores stream_options): its
            # content deltas counted, one token each as llama.cpp and OpenAI stream them.
            put("output_token", _fig(turn, "llm_chunks"), "received")
    elif kind == "tts":
        chars = _fig(turn, "tts_usage_characters")
        if chars is not None:
            put("character", chars, "reported")
        else:
            put("character", None if turn.reply is None else float(len(turn.reply)), "sent")
        billed_ms = _fig(turn, "tts_usage_audio_ms")
        audio = _fig(turn, "tts_audio_ns")
        if billed_ms is not None:
            put("audio_second", billed_ms / 1000, "reported")
        else:
            put("audio_second", None if audio is None else audio / NS_PER_S, "received")
        for measure, name in _TOKEN_FIGURES.items():
            put(measure, _fig(turn, f"tts_usage_{name}"), "reported")
    elif kind == "s2s":
        for measure, name in _S2S_FIGURES.items():
            put(measure, _fig(turn, name), "reported")
    elif kind == "agent":
        span = conversation_ns(turn)
        put("second", None if span is None else span / NS_PER_S, "measured")
    return out


# -- cost ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class StageCost:
    """One stage's cost in one turn; ``amount`` None with ``missing`` naming what is unknown."""

    kind: str
    stage: str | None
    amount: float | None
    usage: tuple[Usage, ...] = ()
    missing: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TurnCost:
    """A turn's cost: its stages' and the total (None when any priced stage is unknown)."""

    index: int
    stages: tuple[StageCost, ...]
    conversation_ns: int | None

    @property
    def total(self) -> float | None:
        if any(s.amount is None for s in self.stages) or not self.stages:
            return None
        return math.fsum(s.amount for s in self.stages if s.amount is not None)

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "total": self.total,
            "conversation_ns": self.conversation_ns,
            "stages": {
                s.kind: {
                    "stage": s.stage,
                    "amount": s.amount,
                    "usage": {
                        u.measure: {"quantity": u.quantity, "source": u.source} for u in s.usage
                    },
                    **({"missing": list(s.missing)} if s.missing else {}),
                }
                for s in self.stages
            },
        }


#: Where a turn's cached input tokens are counted (the first of these it reports).
_CACHED_WITHIN = ("input_token", "input_text_token", "input_audio_token")


def _billable(usage: dict[str, Usage], price: StagePrice) -> dict[str, Usage]:
    """Usage as the prices bill it: cached input tokens, counted inside the input counts by
    every provider, come out of them when they have a price of their own (else they stay
    billed as input)."""
    cached = usage.get("cached_input_token")
    if cached is None or "cached_input_token" not in price.per_unit:
        return {k: v for k, v in usage.items() if k != "cached_input_token" or k in price.per_unit}
    out = dict(usage)
    left = cached.quantity
    for measure in _CACHED_WITHIN:
        u = out.get(measure)
        if u is None or measure not in price.per_unit or left <= 0:
            continue
        taken = min(left, u.quantity)
        out[measure] = Usage(measure, u.quantity - taken, u.source)
        left -= taken
    return out


def stage_cost(turn: Turn, kind: str, stage_name: str | None, price: StagePrice) -> StageCost:
    """Price one stage of one turn; a priced measure without usage leaves the amount empty."""
    usage = _billable(turn_usage(turn, kind), price)
    used: list[Usage] = []
    missing: list[str] = []
    parts: list[float] = []
    for measure, unit_price in price.per_unit.items():
        u = usage.get(measure)
        if u is None and measure == "cached_input_token":
            # No cache count reported: every input token was billed at the input price (the
            # upper bound, not a guess).
            continue
        if u is None:
            missing.append(f"{kind} {measure}: not reported by the provider nor seen by voicelat")
            continue
        used.append(u)
        parts.append(u.quantity * unit_price)
    amount = None if missing else math.fsum(parts)
    return StageCost(kind, stage_name, amount, tuple(used), tuple(missing))


def turn_cost(turn: Turn, prices: Prices, stage_names: Mapping[str, str]) -> TurnCost:
    """The cost of ``turn`` for a pipeline whose stages are ``stage_names`` (kind -> name)."""
    stages = []
    for kind, name in stage_names.items():
        price = prices.price_of(kind, name)
        if price is not None:
            stages.append(stage_cost(turn, kind, name, price))
    return TurnCost(turn.index, tuple(stages), conversation_ns(turn))


def unpriced_stages(prices: Prices, stage_names: Mapping[str, str]) -> list[str]:
    """The pipeline's stages the prices say nothing about (``kind (name)``)."""
    return [f"{k} ({n})" for k, n in stage_names.items() if prices.price_of(k, n) is None]


def _quantile(ordered: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (the project's percentile rule)."""
    pos = (len(ordered) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def cost_section(
    turns: Sequence[Turn], prices: Prices, stage_names: Mapping[str, str]
) -> dict[str, Any]:
    """The summary's ``cost`` section: per turn (ok turns), per call and per minute.

    Every turn that ran costs money, warm-up and failed ones too, so the spend (``total``) is
    over every turn whose cost is known; ``per_turn`` is over the turns that completed; a call
    is the turns sharing ``extra["call_id"]`` (a turn without one is its own call).
    ``per_minute`` is the spend over the conversation time of the priced turns.
    """
    costs = [turn_cost(t, prices, stage_names) for t in turns]
    known = [(t, c) for t, c in zip(turns, costs, strict=True) if c.total is not None]
    ok = sorted(c.total for t, c in known if t.ok and c.total is not None)
    spend = math.fsum(c.total for _, c in known if c.total is not None)
    calls: dict[object, float] = {}
    for t, c in known:
        key = t.extra.get(CALL_ID, ("turn", t.index))
        calls[key] = calls.get(key, 0.0) + (c.total or 0.0)
    talk_ns = sum(c.conversation_ns for _, c in known if c.conversation_ns is not None)
    missing = sorted({m for c in costs for s in c.stages for m in s.missing})
    by_stage: dict[str, Any] = {}
    for kind in stage_names:
        amounts = [
            s.amount for c in costs for s in c.stages if s.kind == kind and s.amount is not None
        ]
        sources = sorted(
            {
                f"{u.measure}: {u.source}"
                for c in costs
                for s in c.stages
                if s.kind == kind
                for u in s.usage
            }
        )
        if amounts:
            by_stage[kind] = {"mean": math.fsum(amounts) / len(amounts), "usage": sources}
    return {
        "currency": prices.currency,
        "source": prices.source,
        "turns": len(turns),
        "priced_turns": len(known),
        "total": spend if known else None,
        "per_turn": _dist(ok),
        "per_call": math.fsum(calls.values()) / len(calls) if calls else None,
        "calls": len(calls),
        "per_minute": spend * 60 * NS_PER_S / talk_ns if known and talk_ns > 0 else None,
        "conversation_s": talk_ns / NS_PER_S,
        "stages": by_stage,
        "unpriced": unpriced_stages(prices, stage_names),
        "missing": missing,
    }


def _dist(ordered: Sequence[float]) -> dict[str, Any]:
    if not ordered:
        return {"n": 0, "mean": None, "p50": None, "p90": None, "max": None}
    return {
        "n": len(ordered),
        "mean": math.fsum(ordered) / len(ordered),
        "p50": _quantile(ordered, 0.5),
        "p90": _quantile(ordered, 0.9),
        "max": ordered[-1],
    }


def stage_names_of(pipeline: Mapping[str, Any]) -> dict[str, str]:
    """kind -> stage name of a pipeline as ``summary.json`` saves it (``Pipeline.to_json``)."""
    out: dict[str, str] = {}
    for kind in STAGE_KINDS:
        table = pipeline.get(kind)
        if isinstance(table, Mapping) and isinstance(table.get("stage"), str):
            out[kind] = str(table["stage"])
    return out


def fmt_money(amount: float | None, currency: str) -> str:
    """A cost for people: enough significant digits for fractions of a cent."""
    if amount is None:
        return "–"
    if amount == 0:
        return f"0 {currency}"
    return f"{amount:.4g} {currency}" if abs(amount) < 1 else f"{amount:,.2f} {currency}"


__all__ = [
    "MEASURES",
    "Prices",
    "StageCost",
    "StagePrice",
    "TurnCost",
    "Usage",
    "conversation_ns",
    "cost_section",
    "fmt_money",
    "parse_prices",
    "stage_cost",
    "stage_names_of",
    "turn_cost",
    "turn_usage",
    "unit_keys",
]
