"""Every public latency definition, computed from one run's turns (docs/DEFINITIONS.md).

Published voice latencies disagree by the definition more than by the provider (Deepgram Flux:
0.020 s on Artificial Analysis's streaming-STT board, 1151 ms on LiveKit's eot-bench). Each
:class:`Definition` here is one public benchmark's or vendor's definition written as a formula
in voicelat's milestones (``voicelat.core.base.contract``), one formula per kind of turn (cascade,
realtime speech-to-speech, black-box agent), or the reason it cannot be computed for that kind.
:func:`compute_definitions` evaluates every one over a run's headline turns (warm, measured,
not warm-up, not interrupted: the turns voicelat's own headline uses) and gives P50/P90 and n,
or, when no turn gives a value, why (the missing milestone, named).

Pure: turns in, frozen results out; integer ns throughout.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from voicelat.core.base.contract import AGENT_KIND, AGENT_TRACE_MILESTONES, S2S_KIND, TRACED_KIND
from voicelat.core.base.stats import percentile
from voicelat.core.base.turn import Turn

__all__ = [
    "AGENT",
    "CASCADE",
    "DEFINITIONS",
    "KINDS",
    "S2S",
    "Budget",
    "Definition",
    "DefinitionResult",
    "Formula",
    "Term",
    "compute_definition",
    "compute_definitions",
    "definitions_json",
    "kind_of",
]

CASCADE = "cascade"
S2S = S2S_KIND
AGENT = AGENT_KIND
#: The kinds of turn, in display order.
KINDS: tuple[str, ...] = (CASCADE, S2S, AGENT)
_KIND_WORDS = {CASCADE: "cascade", S2S: "realtime (S2S)", AGENT: "agent"}


def kind_of(turn: Turn) -> str:
    """``cascade``, ``s2s`` or ``agent`` (``Turn.extra["kind"]``; a cascade turn has none).
    A traced turn (``voicelat import``) is an agent's, without voicelat at the ear: the
    definitions that need the ear (``output_first_audible``) say so."""
    kind = turn.extra.get("kind")
    if kind == TRACED_KIND:
        return AGENT
    return kind if kind in (S2S, AGENT) else CASCADE


@dataclass(frozen=True, slots=True)
class Term:
    """``max(end...) - start``: one difference of milestones (the latest of ``end`` when it
    names several: a turn is complete when the last of them has happened)."""

    end: tuple[str, ...]
    start: str

    @property
    def text(self) -> str:
        end = self.end[0] if len(self.end) == 1 else f"max({', '.join(self.end)})"
        return f"{end} − {self.start}"


@dataclass(frozen=True, slots=True)
class Formula:
    """A sum of :class:`Term` s over one turn's milestones (ns relative to its ``t0``)."""

    terms: tuple[Term, ...]

    @property
    def text(self) -> str:
        """The formula as docs/DEFINITIONS.md writes it."""
        if len(self.terms) == 1:
            return self.terms[0].text
        return " + ".join(f"({t.text})" for t in self.terms)

    @property
    def milestones(self) -> tuple[str, ...]:
        """Every milestone it reads, in the order it reads them (no repeats)."""
        names = [n for t in self.terms for n in (*t.end, t.start)]
        return tuple(dict.fromkeys(names))

    def missing(self, milestones: Mapping[str, int]) -> tuple[str, ...]:
        """The milestones it needs that ``milestones`` lacks."""
        return tuple(n for n in self.milestones if n not in milestones)

    def value(self, milestones: Mapping[str, int]) -> int | None:
        """The formula's value (ns), or None when a milestone is missing."""
        if self.missing(milestones):
            return None
        return sum(max(milestones[e] for e in t.end) - milestones[t.start] for t in self.terms)


def diff(end: str, start: str) -> Formula:
    """``end - start``."""
    return Formula((Term((end,), start),))


def total(*terms: tuple[tuple[str, ...] | str, str]) -> Formula:
    """A sum of differences, each ``(end or (ends...), start)``."""
    return Formula(tuple(Term((e,) if isinstance(e, str) else e, s) for e, s in terms))


@dataclass(frozen=True, slots=True)
class Budget:
    """A published budget (not a measurement): a target and an upper bound, in ms. The run's
    P50 is held against the target and its P90 against the upper bound."""

    target_ms: int
    upper_ms: int


@dataclass(frozen=True)
class Definition:
    """One public definition of a latency.

    ``formulas`` maps a kind of turn to its formula, or to the reason it cannot be computed
    for that kind; ``note`` says where voicelat's milestones differ from the source's own
    origin or end (so a reader knows which way the numbers lean). ``sum_of_medians`` marks a
    run-level definition (Vapi's: the medians of the segments, added), which has no per-turn
    value and no P90. ``cutoff_budget`` (a rate) marks a dead-air definition: a negative value
    is a cut-off (the decision came before the user finished), counted apart, not as latency.
    """

    key: str
    who: str
    name: str
    from_to: str
    source: str
    formulas: Mapping[str, Formula | str]
    note: str = ""
    budget: Budget | None = None
    cutoff_budget: float | None = None
    sum_of_medians: bool = False
    #: Turn flags that make this definition's value meaningless, with why.
    exclude_flags: Mapping[str, str] = field(default_factory=dict)

    def formula_text(self, kind: str) -> str:
        """The formula for ``kind``, or ``not computable: <why>``."""
        if self.sum_of_medians:
            return "Σ over the segments of P50(segment)"
        f = self.formulas.get(kind)
        if isinstance(f, Formula):
            return f.text
        return f"not computable: {f or 'no formula for this kind of turn'}"


@dataclass(frozen=True)
class DefinitionResult:
    """One definition over one run. ``reason`` is set when ``n`` is 0 (why nothing could be
    computed); ``excluded`` counts headline turns left out, by reason, when others were used."""

    definition: Definition
    n: int
    p50_ns: int | None
    p90_ns: int | None
    kinds: tuple[str, ...]
    reason: str | None = None
    excluded: Mapping[str, int] = field(default_factory=dict)
    cut_off: int = 0

    @property
    def cutoff_rate(self) -> float | None:
        """The share of judged turns the decision cut off (dead-air definitions only)."""
        judged = self.n + self.cut_off
        if self.definition.cutoff_budget is None or not judged:
            return None
        return self.cut_off / judged

    @property
    def within_cutoff_budget(self) -> bool | None:
        rate, budget = self.cutoff_rate, self.definition.cutoff_budget
        return None if rate is None or budget is None else rate <= budget

    @property
    def p50_within_target(self) -> bool | None:
        b = self.definition.budget
        return None if b is None or self.p50_ns is None else self.p50_ns <= b.target_ms * 1_000_000

    @property
    def p90_within_upper(self) -> bool | None:
        b = self.definition.budget
        return None if b is None or self.p90_ns is None else self.p90_ns <= b.upper_ms * 1_000_000

    @property
    def formula(self) -> str:
        """The formula(s) used, per kind when the run mixes kinds."""
        kinds = self.kinds or KINDS
        texts = {k: self.definition.formula_text(k) for k in kinds}
        if len(set(texts.values())) == 1:
            return next(iter(texts.values()))
        return "; ".join(f"{_KIND_WORDS[k]}: {t}" for k, t in texts.items())


def _turn_value(d: Definition, turn: Turn) -> tuple[int | None, str | None]:
    """The value on one turn, or why there is none."""
    f = d.formulas.get(kind_of(turn))
    if not isinstance(f, Formula):
        return None, f or f"no formula for a {_KIND_WORDS[kind_of(turn)]} turn"
    for flag, why in d.exclude_flags.items():
        if flag in turn.flags:
            return None, why
    missing = f.missing(turn.milestones) + _unobserved(turn, f)
    if missing:
        names = ", ".join(dict.fromkeys(missing))
        where = (
            " (from the agent's traces: point the agent's OTLP traces at voicelat)"
            if any(n.startswith("agent_") for n in missing)
            else ""
        )
        return None, f"needs {names}, absent from the turn{where}"
    return f.value(turn.milestones), None


def _unobserved(turn: Turn, f: Formula) -> tuple[str, ...]:
    """Agent trace milestones the formula reads that the agent's spans did not give: the
    recorder placed them at a neighbouring boundary (``extra["agent_trace_raw_ns"]`` holds
    what the spans gave), so their value is a filler, not an observation."""
    raw = turn.extra.get("agent_trace_raw_ns")
    if kind_of(turn) != AGENT or not isinstance(raw, Mapping):
        return ()
    return tuple(n for n in f.milestones if n in AGENT_TRACE_MILESTONES and n not in raw)


def _pct(values: Sequence[int], p: int) -> int | None:
    return round(percentile(values, p)) if values else None


def _sum_of_medians(d: Definition, turns: Sequence[Turn]) -> DefinitionResult:
    by_segment: dict[str, list[int]] = {}
    for t in turns:
        for name, v in t.segments.items():
            by_segment.setdefault(name, []).append(v)
    kinds = tuple(k for k in KINDS if any(kind_of(t) == k for t in turns))
    if not by_segment:
        return DefinitionResult(d, 0, None, None, kinds, reason="no headline turn has segments")
    p50 = sum(round(percentile(v, 50)) for v in by_segment.values())
    return DefinitionResult(d, len(turns), p50, None, kinds)


def _cut_offs(d: Definition, turns: Sequence[Turn]) -> int:
    """Cut-offs among turns outside the headline: a pipeline that answered mid-sentence
    usually has no e2e (its reply started before speech_end), so the turn failed, yet its
    endpoint is the cut-off the rate must count."""
    return sum(1 for t in turns if (v := _turn_value(d, t)[0]) is not None and v < 0)


def compute_definition(d: Definition, turns: Sequence[Turn]) -> DefinitionResult:
    """``d`` over the headline turns of ``turns``."""
    headline = [t for t in turns if t.headline]
    kinds = tuple(k for k in KINDS if any(kind_of(t) == k for t in headline))
    if not headline:
        why = "no headline turn (warm, measured, not warm-up) in this run"
        return DefinitionResult(d, 0, None, None, kinds, reason=why)
    if d.sum_of_medians:
        return _sum_of_medians(d, headline)
    values: list[int] = []
    excluded: Counter[str] = Counter()
    cut_off = 0
    for t in headline:
        v, left_out = _turn_value(d, t)
        if v is None:
            excluded[left_out or "no value"] += 1
        elif d.cutoff_budget is not None and v < 0:
            cut_off += 1
        else:
            values.append(v)
    if d.cutoff_budget is not None:
        cut_off += _cut_offs(d, [t for t in turns if not t.warmup and not t.headline])
    reason = None
    if not values:
        reason = "; ".join(excluded) if excluded else "every turn was cut off"
    return DefinitionResult(
        d, len(values), _pct(values, 50), _pct(values, 90), kinds, reason, dict(excluded), cut_off
    )


def compute_definitions(
    turns: Sequence[Turn], definitions: Sequence[Definition] | None = None
) -> list[DefinitionResult]:
    """Every definition (default :data:`DEFINITIONS`) over the run's headline turns."""
    return [
        compute_definition(d, turns) for d in (DEFINITIONS if definitions is None else definitions)
    ]


def _result_json(r: DefinitionResult) -> dict[str, Any]:
    d = r.definition
    out: dict[str, Any] = {
        "key": d.key,
        "who": d.who,
        "name": d.name,
        "from_to": d.from_to,
        "source": d.source,
        "formula": r.formula,
        "formulas": {k: d.formula_text(k) for k in KINDS},
        "kinds": list(r.kinds),
        "n": r.n,
        "p50_ns": r.p50_ns,
        "p90_ns": r.p90_ns,
        "reason": r.reason,
        "excluded_turns": dict(r.excluded),
        "note": d.note,
    }
    if d.budget is not None:
        out["budget"] = {
            "target_ns": d.budget.target_ms * 1_000_000,
            "upper_ns": d.budget.upper_ms * 1_000_000,
            "p50_within_target": r.p50_within_target,
            "p90_within_upper": r.p90_within_upper,
        }
    if d.cutoff_budget is not None:
        out["cutoff"] = {
            "budget_rate": d.cutoff_budget,
            "cut_off_turns": r.cut_off,
            "rate": r.cutoff_rate,
            "within_budget": r.within_cutoff_budget,
        }
    return out


def definitions_json(results: Sequence[DefinitionResult]) -> list[dict[str, Any]]:
    """The results as the ``definitions`` section of ``--json`` (keys name their unit)."""
    return [_result_json(r) for r in results]


# -- the definitions ---------------------------------------------------------------------------
_E2E = diff("output_first_audible", "speech_end")
_NO_STT = "a realtime model gives no final transcript of the user's speech (needs stt_final)"
_NO_TTS = "a realtime model speaks without a TTS request (needs tts_request)"
_NO_LLM = "a realtime model has no separate LLM and TTS (needs llm_request, tts_request)"
_AGENT_TTFA = (
    "voicelat hears the agent's audio only after its transport: the agent's first audible "
    "sample on its own TTS is not observed (needs tts_first_audible at the TTS)"
)
_ENDPOINT_UNOBSERVED = {
    "endpoint_unobserved": "the model's end of turn was not observed (endpoint = speech_end)"
}

DEFINITIONS: tuple[Definition, ...] = (
    Definition(
        "voicelat_e2e", "voicelat", "e2e (voice to voice)",
        "the annotated end of the user's speech → the first audible reply sample at the sink",
        "voicelat's metric contract (voicelat/core/base/contract.py, docs/ARCHITECTURE.md)",
        {CASCADE: _E2E, S2S: _E2E, AGENT: _E2E},
        "the reference every other row is read against",
    ),
    Definition(
        "aa_stt_latency", "Artificial Analysis (streaming STT board)", "latency",
        "end of speech as Silero VAD detects it → the first final transcript",
        "Artificial Analysis, AA-WER Streaming article (2026-06)",
        {CASCADE: diff("stt_final", "speech_end"), S2S: _NO_STT,
         AGENT: diff("agent_stt_final", "speech_end")},
        "AA's origin is Silero VAD's end of speech, which fires after the VAD's own silence "
        "hangover; voicelat's speech_end is the annotated end, earlier by that hangover, so "
        "voicelat's figure is AA's plus the hangover. AA's first-partial figure has no voicelat "
        "milestone (stt_first_partial is the turn's first partial, usually before speech_end).",
    ),
    Definition(
        "aa_s2s_ttfa", "Artificial Analysis (speech-to-speech board)", "time to first audio",
        "end of the user's audio → the first audio of the reply (Big Bench Audio)",
        "Artificial Analysis speech-to-speech leaderboard",
        {CASCADE: diff("tts_first_byte", "speech_end"), S2S: diff("first_audio", "speech_end"),
         AGENT: diff("first_audio", "speech_end")},
        "AA's origin is the end of the audio it sends; voicelat's speech_end is the end of the "
        "speech in it (a fixture's trailing silence comes after it), so voicelat's figure can "
        "be larger by that silence. The end is the first reply byte, silent or not.",
    ),
    Definition(
        "eot_bench_dead_air", "LiveKit eot-bench", "dead air (at a 5 % false cut-off budget)",
        "true end of the user's turn → the detector's end of turn, at a chosen false cut-off "
        "rate, the policy swept causally",
        "livekit/eot-bench README",
        {CASCADE: diff("endpoint", "speech_end"), S2S: diff("endpoint", "speech_end"),
         AGENT: diff("agent_endpoint", "speech_end")},
        "one run has one endpointing policy: its dead air is read at the run's own cut-off "
        "rate (a turn whose endpoint came before speech_end is a cut-off, counted apart). "
        "Within the budget, the figure is an upper bound of eot-bench's (a sweep may find a "
        "faster policy); `voicelat endpointing` sweeps the policy offline as eot-bench does.",
        cutoff_budget=0.05,
        exclude_flags=_ENDPOINT_UNOBSERVED,
    ),
    Definition(
        "coval_tts_ttfa", "Coval (TTS benchmark)", "TTFA",
        "TTS request → the first audible sample (TTFB + leading silence), warm connection",
        'gradium.ai "tts-latency-benchmark-2026" (Coval data, 2026-05-04)',
        {CASCADE: diff("tts_first_audible", "tts_request"), S2S: _NO_TTS, AGENT: _AGENT_TTFA},
        "headline turns are warm, as Coval's are; voicelat's tts_request is the first text "
        "sent for the turn (a streamed reply sends more later).",
    ),
    Definition(
        "openbenchmarks_ttfab", "OpenBenchmarks (voice-agent-latency)", "TTFAB",
        "the caller's speech end → the agent's first audio, both read at the caller",
        "openbenchmarks-labs/voice-agent-latency data/latest-voice.json",
        {CASCADE: _E2E, S2S: _E2E, AGENT: _E2E},
        "OpenBenchmarks reads both ends off a dual-channel recording with a VAD; voicelat's "
        "speech_end is annotated and output_first_audible is the onset at its sink (the "
        "caller's ear), so this is voicelat's e2e. Their phone figures include the PSTN legs.",
    ),
    Definition(
        "twilio_mouth_to_ear", "Twilio (cascaded guide)", "mouth-to-ear",
        "the user's mouth → the user's ear, as a budget (target 1,115 ms, upper 1,400 ms)",
        'Twilio blog "A Guide to Core Latency in AI Voice Agents" (Nov 2025)',
        {CASCADE: _E2E, S2S: _E2E, AGENT: _E2E},
        "a budget, not a measurement: voicelat's e2e held against it; a run on loopback has "
        "no phone legs, which the budget includes.",
        budget=Budget(1115, 1400),
    ),
    Definition(
        "twilio_platform_gap", "Twilio (cascaded guide)", "platform turn gap",
        "the platform hearing the end of speech → its first audio out, as a budget "
        "(target 885 ms, upper 1,100 ms)",
        'Twilio blog "A Guide to Core Latency in AI Voice Agents" (Nov 2025)',
        {CASCADE: diff("tts_first_byte", "speech_end"), S2S: diff("first_audio", "speech_end"),
         AGENT: diff("first_audio", "speech_end")},
        "a budget: STT + LLM TTFT + TTS first byte and the orchestration between them; an "
        "agent's figure also holds its transport both ways.",
        budget=Budget(885, 1100),
    ),
    Definition(
        "twilio_stt", "Twilio (cascaded guide)", "STT",
        "end of speech → the final transcript, as a budget (target 350 ms, upper 500 ms)",
        'Twilio blog "A Guide to Core Latency in AI Voice Agents" (Nov 2025)',
        {CASCADE: diff("stt_final", "speech_end"), S2S: _NO_STT,
         AGENT: diff("agent_stt_final", "speech_end")},
        "a budget; it includes endpointing, as voicelat's endpointing + stt segments do.",
        budget=Budget(350, 500),
    ),
    Definition(
        "twilio_llm_ttft", "Twilio (cascaded guide)", "LLM TTFT",
        "LLM request → its first token, as a budget (target 375 ms, upper 750 ms)",
        'Twilio blog "A Guide to Core Latency in AI Voice Agents" (Nov 2025)',
        {CASCADE: diff("llm_first_token", "llm_request"), S2S: _NO_LLM,
         AGENT: diff("agent_llm_first_token", "agent_stt_final")},
        "a budget; an agent's traces have no LLM request, so its TTFT runs from the final "
        "transcript (the traced llm_ttft segment).",
        budget=Budget(375, 750),
    ),
    Definition(
        "twilio_tts_first_byte", "Twilio (cascaded guide)", "TTS first byte",
        "TTS request → its first audio byte, as a budget (target 100 ms, upper 250 ms)",
        'Twilio blog "A Guide to Core Latency in AI Voice Agents" (Nov 2025)',
        {CASCADE: diff("tts_first_byte", "tts_request"), S2S: _NO_TTS,
         AGENT: diff("agent_tts_first_byte", "agent_tts_request")},
        "a budget.",
        budget=Budget(100, 250),
    ),
    Definition(
        "pipecat_voice_to_voice", "Pipecat evals (PR #5714, open)", "voice_to_voice_ms",
        "the end of the played utterance → the harness VAD's onset of bot speech",
        "pipecat-ai/pipecat PR #5714",
        {CASCADE: _E2E, S2S: _E2E, AGENT: _E2E},
        "Pipecat's origin is the end of the played clip (after its trailing silence) and its "
        "end a VAD onset (after the VAD's start window); voicelat's are the annotated speech "
        "end and the RMS onset, so voicelat's figure is larger by the trailing silence and "
        "smaller by the VAD's start window.",
    ),
    Definition(
        "pipecat_bot_ttfb", "Pipecat evals (PR #5714, open)", "bot TTFB (shown beside)",
        "the bot's TTS request → its first audio byte (Pipecat's TTFB metric)",
        "pipecat-ai/pipecat PR #5714",
        {CASCADE: diff("tts_first_byte", "tts_request"), S2S: _NO_TTS,
         AGENT: diff("agent_tts_first_byte", "agent_tts_request")},
        "server-side: shown beside voice_to_voice, never part of it.",
    ),
    Definition(
        "livekit_e2e_sum", "LiveKit agents metrics", '"e2e" as commonly summed',
        "end_of_utterance_delay + LLM ttft + TTS ttfb (additive, server-side)",
        "LiveKit agents metrics docs",
        {
            CASCADE: total((("endpoint", "stt_final"), "speech_end"),
                           ("llm_first_token", "llm_request"), ("tts_first_byte", "tts_request")),
            S2S: _NO_LLM,
            AGENT: total((("agent_endpoint", "agent_stt_final"), "speech_end"),
                         ("agent_llm_first_token", "agent_stt_final"),
                         ("agent_tts_first_byte", "agent_tts_request")),
        },
        "LiveKit's end_of_utterance_delay runs from the VAD's end of speech to the turn being "
        "complete (end of turn and final transcript both in); the sum leaves out the handoff, "
        "the aggregation, the leading silence and the playout, so it is below e2e by them.",
    ),
    Definition(
        "vapi_total", "Vapi", "total (a rough estimate)",
        "the sum of the components' medians",
        "Vapi docs, understanding latency",
        {},
        "run-level: medians do not add, so this is not the P50 of e2e (compare the first row); "
        "it has no per-turn value and no P90.",
        sum_of_medians=True,
    ),
    Definition(
        "retell_latency", "Retell", "latency",
        "the user stops speaking → the agent begins responding",
        "Retell docs",
        {CASCADE: _E2E, S2S: _E2E, AGENT: _E2E},
        "read as heard by the user: voicelat's e2e.",
    ),
)  # fmt: skip
