"""Scoring endpointers on annotated audio: latency after the true speech end vs cut-offs.

Pure: times are integer nanoseconds from the first sample of a fixture, frames are indexes.

* :func:`hangover_endpoints` is the silence-hangover rule of ``audio/vad.Endpointer`` over a
  sequence of per-frame voiced decisions, so any frame classifier (energy, Silero, WebRTC) is
  endpointed exactly as the pipeline endpoints with its energy VAD (the equivalence is tested).
* :func:`score_fixture` judges one fixture's endpoints against its annotation: an endpoint
  before the true speech end is a **cut-off** (the pipeline would answer mid-sentence), counted
  apart when it falls inside an annotated pause; the first endpoint at or after the end gives the
  **endpointing latency**; no endpoint after the end is a **missed** endpoint.
* :func:`score_config` aggregates one configuration, :func:`pareto_front` keeps the ones no other
  configuration beats on both latency (P50) and cut-off rate, :func:`pick_for_budget` names the
  fastest configuration within a cut-off budget.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from voicelat.core.base.stats import percentile

NS_PER_MS = 1_000_000


def frames_for(ms: int, frame_ms: int) -> int:
    """Whole frames covering ``ms`` (at least one), as the energy endpointer rounds them."""
    return max(1, math.ceil(ms / frame_ms))


def hangover_endpoints(
    voiced: Sequence[bool], *, hangover_frames: int, min_speech_frames: int
) -> list[int]:
    """Indexes of the frames on which an endpoint is emitted, for contiguous frames 0..n-1.

    The rules of ``Endpointer``: a turn starts once ``min_speech_frames`` voiced frames came
    with no silent run of ``min_speech_frames`` between them; inside a turn the endpoint comes on
    the frame where ``hangover_frames`` silent frames follow the last voiced one; then a new turn
    can start (on that same frame if it is voiced).
    """
    if hangover_frames < 1 or min_speech_frames < 1:
        raise ValueError("hangover_frames and min_speech_frames must be at least 1")
    out: list[int] = []
    in_speech = pending = False
    run_len = 0
    last = -1  # the last voiced frame (-1: none yet)
    for k, v in enumerate(voiced):
        if in_speech:
            if k - last - (1 if v else 0) >= hangover_frames:
                out.append(k)
                in_speech = False
            elif v:
                last = k
        if in_speech:
            continue
        if v:
            run_len = run_len + 1 if pending and k - last - 1 < min_speech_frames else 1
            pending, last = True, k
            if run_len >= min_speech_frames:
                in_speech, pending = True, False
        elif pending and k - last >= min_speech_frames:
            pending = False
    return out


@dataclass(frozen=True, slots=True)
class Truth:
    """A fixture's annotation: speech bounds and pauses (ns from its first sample)."""

    fixture_id: str
    speech_start_ns: int
    speech_end_ns: int
    pauses: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class FixtureScore:
    """One fixture under one configuration."""

    fixture_id: str
    latency_ns: int | None  # first endpoint at/after the true end, minus the end; None: none
    cutoffs: int  # endpoints before the true speech end (after its start)
    cutoffs_in_pause: int  # of those, the ones inside an annotated pause
    #: False for a recorded turn: the pipeline stopped listening at its (first) endpoint, so
    #: after a cut-off no later endpoint could come, and the missing latency is not a miss.
    listened_after_cut: bool = True

    @property
    def missed(self) -> bool:
        """No endpoint came after the true speech end (and none came before it to stop a
        recorded turn)."""
        if self.latency_ns is not None:
            return False
        return self.listened_after_cut or not self.cutoffs


def score_fixture(truth: Truth, endpoints_ns: Sequence[int]) -> FixtureScore:
    """Judge one fixture's endpoint times (ns from its first sample) against its annotation."""
    early = [t for t in endpoints_ns if truth.speech_start_ns < t < truth.speech_end_ns]
    in_pause = sum(1 for t in early if any(a <= t < b for a, b in truth.pauses))
    after = [t for t in endpoints_ns if t >= truth.speech_end_ns]
    latency = min(after) - truth.speech_end_ns if after else None
    return FixtureScore(truth.fixture_id, latency, len(early), in_pause)


def score_turn(truth: Truth, endpoint_ns: int | None) -> FixtureScore:
    """Judge a recorded turn, whose pipeline stopped listening at its one endpoint.

    The same rules as :func:`score_fixture` on that single endpoint; an endpoint before the
    speech end is a cut-off (the pipeline answered mid-sentence) with no latency, not a miss.
    """
    score = score_fixture(truth, [] if endpoint_ns is None else [endpoint_ns])
    return replace(score, listened_after_cut=False)


def pause_at(truth: Truth, t_ns: int) -> tuple[int, int] | None:
    """The annotated pause ``t_ns`` falls in (half-open), None when it falls in none."""
    return next(((a, b) for a, b in truth.pauses if a <= t_ns < b), None)


@dataclass(frozen=True, slots=True)
class Config:
    """One endpointer setting: which endpointer, its threshold and its hangover."""

    endpointer: str
    threshold: float
    hangover_ms: int
    #: A recorded run's point: the provider's endpointing options as the run recorded them
    #: (``(("endpointing", "300"),)``); empty for the offline grid.
    options: tuple[tuple[str, str], ...] = ()
    #: ``offline`` (replayed here from the audio) or ``wire`` (the provider's end-of-turn as a
    #: recorded run received it: network and the provider's processing included).
    source: str = "offline"

    @property
    def measured_on_wire(self) -> bool:
        """The point comes from a recorded run, not from the offline replay."""
        return self.source == "wire"

    @property
    def options_text(self) -> str:
        """``endpointing=300 utterance_end_ms=1000`` (``defaults`` when the run set none)."""
        return " ".join(f"{k}={v}" for k, v in self.options) or "defaults"

    @property
    def label(self) -> str:
        """``energy thr=-40 hang=500ms`` (offline) or ``deepgram endpointing=300 (wire)``: the
        name used in tables and on the curve."""
        if self.measured_on_wire:
            return f"{self.endpointer} {self.options_text} (wire)"
        thr = f"{self.threshold:g}"
        return f"{self.endpointer} thr={thr} hang={self.hangover_ms}ms"


@dataclass(frozen=True, slots=True)
class ConfigScore:
    """One configuration over a fixture set; ``n`` fixtures, latency over the non-missed."""

    config: Config
    n: int
    p50_ns: int | None
    p90_ns: int | None
    cut_fixtures: int  # fixtures with at least one cut-off
    cutoffs: int
    cutoffs_in_pause: int
    missed: int

    @property
    def cutoff_rate(self) -> float:
        """Share of fixtures the endpointer cut off at least once (0..1)."""
        return self.cut_fixtures / self.n if self.n else 0.0


def score_config(config: Config, scores: Sequence[FixtureScore]) -> ConfigScore:
    """Aggregate the fixtures' scores of one configuration."""
    lat = [s.latency_ns for s in scores if s.latency_ns is not None]
    return ConfigScore(
        config=config,
        n=len(scores),
        p50_ns=round(percentile(lat, 50)) if lat else None,
        p90_ns=round(percentile(lat, 90)) if lat else None,
        cut_fixtures=sum(1 for s in scores if s.cutoffs),
        cutoffs=sum(s.cutoffs for s in scores),
        cutoffs_in_pause=sum(s.cutoffs_in_pause for s in scores),
        missed=sum(1 for s in scores if s.missed),
    )


def _key(s: ConfigScore) -> tuple[float, float]:
    # A configuration that misses an endpoint never answers that turn: it ranks last on latency.
    # Rates, not counts: a recorded run's point may cover another number of turns.
    lat = float(s.p50_ns) if s.p50_ns is not None and not s.missed else math.inf
    return (lat, s.cutoff_rate)


def pareto_front(scores: Sequence[ConfigScore]) -> list[ConfigScore]:
    """The configurations no other one beats on both P50 latency and cut-off rate, fastest first.

    Configurations that miss an endpoint are left out; among equal points the first is kept.
    """
    usable = sorted((s for s in scores if not s.missed and s.p50_ns is not None), key=_key)
    front: list[ConfigScore] = []
    for s in usable:
        if not front or s.cutoff_rate < front[-1].cutoff_rate - 1e-12:
            front.append(s)
    return front


def pick_for_budget(scores: Sequence[ConfigScore], max_cutoff_rate: float) -> ConfigScore | None:
    """The fastest configuration (P50, then P90) whose cut-off rate is within the budget."""
    ok = [
        s
        for s in scores
        if not s.missed and s.p50_ns is not None and s.cutoff_rate <= max_cutoff_rate + 1e-12
    ]
    if not ok:
        return None
    return min(ok, key=lambda s: (s.p50_ns or 0, s.p90_ns or 0, s.cutoff_rate))
