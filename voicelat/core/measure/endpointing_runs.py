"""Recorded runs as points of the endpointing trade-off: the provider's own end-of-turn.

Pure: a run's ``summary.json`` document and its turns in, one point out. A run whose pipeline
ends turns on the provider's end-of-turn (``[endpointing] mode = "provider"``: Deepgram's
``speech_final`` / ``UtteranceEnd``, AssemblyAI's ``end_of_turn``) recorded that message's
arrival as each turn's ``endpoint`` milestone, relative to the turn's first sample, which is
where the fixtures' annotations are measured from. Each warm turn is judged by
:func:`voicelat.core.measure.endpointing.score_turn` (the offline rules on that one endpoint) against
the annotation the run itself recorded in ``summary.json`` (speech bounds and pauses), and the
turns aggregate with :func:`~voicelat.core.measure.endpointing.score_config`, exactly as a fixture set
under one offline configuration. What differs, and is said wherever the point is shown:

* the point is **measured on the wire**: its latency includes the network and the provider's
  processing (an offline point is the decision alone);
* the pipeline stops listening at that endpoint, so a cut-off turn (the pipeline answered
  mid-sentence) has no latency: P50/P90 are over the turns it did not cut;
* every turn counts (a fixture repeated counts each time); warm-up turns are left out, as
  from the run's own headline, and so are turns that failed before any endpoint (named);
* a **stale** end-of-turn is left out and named too: one that arrived before this turn's
  speech could have produced it (before its speech start plus the provider's silence
  setting). It belongs to the previous turn's audio: the provider's decision came while the
  client was still sending, the frames sent after it (the user speaking on) opened a new
  utterance on the long-lived socket, and the next turn's leading silence ended that one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from voicelat.core.base.errors import ConfigError
from voicelat.core.base.turn import Turn
from voicelat.core.measure.endpointing import (
    NS_PER_MS,
    Config,
    ConfigScore,
    FixtureScore,
    Truth,
    pause_at,
    score_config,
    score_turn,
)

#: The end-of-turn options of each streaming STT stage, in the order a label shows them. The
#: first one present is the silence the provider waits for (its "hangover").
PROVIDER_OPTIONS: dict[str, tuple[str, ...]] = {
    "deepgram-stt": ("endpointing", "utterance_end_ms"),
    "assemblyai-stt": (
        "min_turn_silence",
        "min_end_of_turn_silence_when_confident",
        "max_turn_silence",
        "end_of_turn_confidence_threshold",
    ),
}


@dataclass(frozen=True, slots=True)
class JudgedTurn:
    """One recorded turn against its fixture's annotation."""

    index: int
    fixture: str
    endpoint_ns: int | None  # the provider's end-of-turn, ns from the turn's first sample
    score: FixtureScore
    pause: tuple[int, int] | None  # the annotated pause the endpoint fell in (a cut-off)
    transcript: str | None

    @property
    def cut(self) -> bool:
        """The provider ended the turn before the speech did: the pipeline answered early."""
        return self.score.cutoffs > 0


@dataclass(frozen=True)
class RunPoint:
    """A recorded run as one configuration point, with the turns behind it."""

    run: str  # the run directory, as given
    stage: str  # the STT stage whose end-of-turn ended the turns (``deepgram-stt``)
    score: ConfigScore
    turns: tuple[JudgedTurn, ...]
    left_out: tuple[tuple[int, str, str], ...]  # (turn index, fixture, why)
    warmup: int  # warm-up turns, not scored
    with_pauses: int  # scored fixtures with annotated pauses
    pauses: int
    #: Turns ended by a stale end-of-turn (the previous turn's audio): (index, fixture, ns).
    stale: tuple[tuple[int, str, int], ...] = ()

    @property
    def controls_only(self) -> bool:
        """No scored fixture has annotated pauses: a cut-off can be placed in none."""
        return self.with_pauses == 0

    @property
    def cut_turns(self) -> tuple[JudgedTurn, ...]:
        """The turns the provider cut off (the pipeline answered mid-sentence)."""
        return tuple(t for t in self.turns if t.cut)

    @property
    def fixtures(self) -> tuple[str, ...]:
        """The fixtures scored, in first-seen order."""
        return tuple(dict.fromkeys(t.fixture for t in self.turns))


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def provider_setting(
    summary: Mapping[str, Any], where: str
) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The STT stage that ended the run's turns and its end-of-turn options, as recorded.

    Options come from the pipeline's ``[stt]`` table (its ``query`` table last, as the stage
    sends it last), then from the stage's own description (its defaults). A run whose turns
    ended on the client VAD is refused: it is not the provider's end-of-turn.
    """
    pipeline = summary.get("pipeline")
    pipeline = pipeline if isinstance(pipeline, Mapping) else {}
    ep = pipeline.get("endpointing")
    ep = ep if isinstance(ep, Mapping) else {}
    mode = ep.get("mode", "vad")
    if mode != "provider":
        raise ConfigError(
            f"{where} ended its turns on the client VAD ([endpointing] mode = {mode!r}, "
            f"hangover_ms = {ep.get('hangover_ms')}), not on the provider's end-of-turn: the "
            "offline replay scores that VAD already; give runs of a pipeline with "
            '[endpointing] mode = "provider"'
        )
    table = pipeline.get("stt")
    table = dict(table) if isinstance(table, Mapping) else {}
    stages = summary.get("stages")
    described = stages.get("stt") if isinstance(stages, Mapping) else None
    described = dict(described) if isinstance(described, Mapping) else {}
    stage = str(table.get("stage") or described.get("stage") or "provider")
    query = table.get("query")
    query = dict(query) if isinstance(query, Mapping) else {}
    interim = table.get("interim_results", described.get("interim_results", True))
    options: list[tuple[str, str]] = []
    for key in PROVIDER_OPTIONS.get(stage, ()):
        if key == "utterance_end_ms" and interim is False:
            continue  # the stage sends it only with interim results
        for source in (query, table, described):
            if source.get(key) is not None:
                options.append((key, _value(source[key])))
                break
    return stage, tuple(options)


def _silence_ms(options: tuple[tuple[str, str], ...]) -> int:
    """The provider's silence setting (the first option, in ms), 0 when it is not a number."""
    value = options[0][1] if options else ""
    return int(value) if value.isdigit() else 0


def _truth(entry: Mapping[str, Any], where: str) -> Truth | None:
    fid = str(entry.get("id"))
    start, end = entry.get("speech_start_ms"), entry.get("speech_end_ms")
    if not isinstance(start, int) or not isinstance(end, int) or not entry.get("annotated", True):
        return None
    pauses: list[tuple[int, int]] = []
    for p in entry.get("pauses") or ():
        if not isinstance(p, Mapping) or not all(
            isinstance(p.get(k), int) for k in ("start_ms", "end_ms")
        ):
            raise ConfigError(f"{where}: summary.json's fixture {fid} has a malformed pause {p!r}")
        pauses.append((p["start_ms"] * NS_PER_MS, p["end_ms"] * NS_PER_MS))
    return Truth(fid, start * NS_PER_MS, end * NS_PER_MS, tuple(pauses))


def run_truths(summary: Mapping[str, Any], where: str) -> dict[str, Truth | None]:
    """Each fixture's annotation as the run recorded it (None: not annotated)."""
    entries = summary.get("fixtures")
    if not isinstance(entries, list):
        raise ConfigError(
            f"{where}'s summary.json lists no fixtures: which audio its turns played is unknown"
        )
    return {str(e.get("id")): _truth(e, where) for e in entries if isinstance(e, Mapping)}


def _has_pauses(summary: Mapping[str, Any], fixture: str) -> bool:
    for e in summary.get("fixtures") or ():
        if isinstance(e, Mapping) and e.get("id") == fixture:
            return bool(e.get("pauses"))
    return False


def run_point(where: str, summary: Mapping[str, Any] | None, turns: Sequence[Turn]) -> RunPoint:
    """The run in ``where`` (its summary document and turns) as one trade-off point.

    ``ConfigError`` (one line) for a run that cannot be one: no summary, endpointing that was
    not the provider's, unannotated fixtures, no turn to score.
    """
    if summary is None:
        raise ConfigError(
            f"{where} has no summary.json (stopped before its end?): its endpointing setting "
            "is unknown; rerun it"
        )
    stage, options = provider_setting(summary, where)
    truths = run_truths(summary, where)
    judged: list[JudgedTurn] = []
    left_out: list[tuple[int, str, str]] = []
    stale: list[tuple[int, str, int]] = []
    warmup = 0
    silence_ns = int(_silence_ms(options)) * NS_PER_MS
    for turn in turns:
        if turn.warmup:
            warmup += 1
            continue
        truth = truths.get(turn.fixture)
        if truth is None:
            raise ConfigError(
                f"{where}: fixture {turn.fixture} has no annotated speech_start_ms/"
                "speech_end_ms in summary.json: endpointing needs annotated fixtures (a "
                "manifest.json with speech bounds and pauses)"
            )
        endpoint = turn.milestones.get("endpoint")
        if endpoint is None and turn.failed and turn.failure_stage not in (None, "turn"):
            # It failed before the provider could say anything: not the provider's miss.
            left_out.append(
                (turn.index, turn.fixture, f"{turn.failure_stage}: {turn.failure_reason}")
            )
            continue
        if endpoint is not None and endpoint < truth.speech_start_ns + silence_ns:
            stale.append((turn.index, turn.fixture, endpoint))
            continue
        score = score_turn(truth, endpoint)
        pause = pause_at(truth, endpoint) if endpoint is not None and score.cutoffs else None
        judged.append(JudgedTurn(turn.index, turn.fixture, endpoint, score, pause, turn.transcript))
    if not judged:
        why = f"; left out: {left_out[0][2]}" if left_out else ""
        raise ConfigError(
            f"{where} has no turn to score ({len(turns)} turn(s), {warmup} warm-up, "
            f"{len(left_out)} failed before an endpoint, {len(stale)} ended by a stale "
            f"end-of-turn{why})"
        )
    provider = stage.removesuffix("-stt")
    config = Config(provider, 0.0, _silence_ms(options), options, "wire")
    scored = {t.fixture for t in judged}
    return RunPoint(
        run=where,
        stage=stage,
        score=score_config(config, [t.score for t in judged]),
        turns=tuple(judged),
        left_out=tuple(left_out),
        warmup=warmup,
        stale=tuple(stale),
        with_pauses=sum(1 for f in scored if _has_pauses(summary, f)),
        pauses=sum(len(t.pauses) for f in scored if (t := truths.get(f)) is not None),
    )
