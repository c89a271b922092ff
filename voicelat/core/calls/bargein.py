"""Interruptions at the ear: barge-in stop latency and its waterfall, backchannels, talk-over.

A call's scenario may speak *during* a reply (an overlay step, ``core/calls/call.py``):

* ``interrupt``: the user cuts in; the agent should stop. Its **stop latency** runs from the
  interrupting speech's ground-truth onset to the last audible agent sample at the sink (the
  agent is silent from then on). Its segments, as far as the kind exposes them, sum exactly to
  it (:func:`stop_segments`):

  - ``detection``: onset -> the interruption is detected (voicelat's VAD for its cascade; the
    provider's ``speech_started`` / ``interrupted``; an agent's ``clear`` or interruption frame);
  - ``cancel``: detected -> the cancel went out (voicelat's own, cascade and realtime);
  - ``drain``: -> the provider or agent stopped streaming (its last audio byte arrived);
  - ``flush``: -> the audio already queued (transport, jitter buffer, sink) played out.

  With ``[turn_taking] ignore_words`` the cascade's detection is two parts
  (:attr:`OverlayOutcome.detection_parts`, summing exactly to it): ``vad`` (onset -> the VAD
  triggered) and ``words`` (-> the STT's words of the overlay held one outside the list).

  A mark the kind does not expose folds its segment into the next one (an agent without
  traces has ``detection+cancel+drain`` as one). A reply that never stops is a first-class
  outcome (``never_stopped``) with its talk-over, not a failure of the run.
* ``backchannel`` ("mm-hmm") and ``noise`` (a cough): the agent should keep talking. A
  **false barge-in** is the agent stopping, or pausing longer than a threshold, on one.

Pure: :class:`OverlayOutcome` (what one overlay step left, from its raw stamps) and
:func:`barge_in_section`, the ``calls.barge_in`` section of ``summary.json``. Times are
integer ns on the run's clock; tested with plain integers.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from voicelat.core.base.stats import Distribution

__all__ = [
    "BARGE_IN",
    "OVERLAY_KINDS",
    "PAUSE_THRESHOLD_NS",
    "STOP_SEGMENTS",
    "OverlayKind",
    "OverlayOutcome",
    "barge_in_extra",
    "barge_in_section",
    "longest_gap_ns",
    "stop_segments",
    "words_interrupt",
    "words_of",
]

OverlayKind = Literal["interrupt", "backchannel", "noise"]
OVERLAY_KINDS: tuple[OverlayKind, ...] = ("interrupt", "backchannel", "noise")
#: The stop waterfall's segments, in order.
STOP_SEGMENTS = ("detection", "cancel", "drain", "flush")
#: A pause in the agent's speech longer than this, starting during a backchannel or a noise
#: (or within this long after it), is a false barge-in: longer than the pauses between a
#: TTS's sentences (piper: ~0.2-0.35 s), short enough that a listener hears the agent stop.
PAUSE_THRESHOLD_NS = 600_000_000

Span = tuple[int, int]
#: The ``extra`` key of a turn an overlay played into: its outcome's figures (exporters).
BARGE_IN = "barge_in"


#: A word of a transcript: letters and digits, with inner hyphens or apostrophes ("mm-hmm",
#: "don't"); everything else (punctuation, spaces) separates words.
_WORD = re.compile(r"[^\W_]+(?:['\u2019-][^\W_]+)*")


def words_of(text: str) -> list[str]:
    """``text``'s words, normalised: lowercase, punctuation stripped ("Mm-hmm." -> mm-hmm)."""
    return _WORD.findall(text.lower().replace("\u2019", "'"))


def words_interrupt(text: str, ignore: Iterable[str]) -> bool:
    """Whether a transcript holds a word outside ``ignore`` (normalised words): the words
    that make a VAD trigger during the reply a barge-in (``[turn_taking] ignore_words``)."""
    kept = set(ignore)
    return any(w not in kept for w in words_of(text))


def longest_gap_ns(spans: Sequence[Span], start_ns: int, end_ns: int) -> int:
    """The longest silence between the audible ``spans`` (sorted ``(start, end)`` play times)
    that begins in ``[start_ns, end_ns]`` and ends at a later audible span (a pause, not the
    reply's end); 0 when none."""
    worst = 0
    for (_, a_end), (b_start, _) in itertools.pairwise(spans):
        if a_end <= end_ns and b_start > start_ns:  # the pause overlaps the window
            worst = max(worst, b_start - max(a_end, start_ns))
    return worst


def stop_segments(
    onset_ns: int, marks: Mapping[str, int | None], stopped_ns: int
) -> dict[str, int]:
    """The stop waterfall: ``marks`` (``detected``, ``cancel``, ``last_byte``) between the
    onset and ``stopped_ns``, each clamped into order, as consecutive segments whose sum is
    exactly ``stopped_ns - onset_ns``. A missing mark folds its segment into the next (its
    name joins the next one's with ``+``); a mark before the previous one gives 0."""
    names = ("detected", "cancel", "last_byte")
    out: dict[str, int] = {}
    prev, pending = onset_ns, []
    for seg, mark in zip(STOP_SEGMENTS, names, strict=False):
        pending.append(seg)
        t = marks.get(mark)
        if t is None:
            continue
        t = min(max(t, prev), max(stopped_ns, prev))
        out["+".join(pending)] = t - prev
        prev, pending = t, []
    pending.append("flush")
    out["+".join(pending)] = max(stopped_ns, prev) - prev
    return out


@dataclass(frozen=True)
class OverlayOutcome:
    """What one overlay step left (``calls.jsonl`` ``overlays``), times on the run's clock.

    ``onset_ns``/``speech_end_ns``: the overlay's ground-truth speech bounds. ``detected_ns``,
    ``cancel_ns``, ``last_byte_ns``: the stop's marks as the kind exposes them.
    ``last_audible_ns``: the end of the agent's last audible sample at the sink once the reply
    was over (stopped or finished). ``audible``: the reply's audible spans at the sink from
    the onset on (play times; what a pause is found in). ``stopped``: the agent stopped for
    this overlay (it cancelled or went silent within the window). ``reply_ended_before``: the
    reply had ended before the overlay was due (nothing to interrupt; not an error).
    ``refused``: what the provider answered when it refused or ignored the cancel.
    ``vad_ns``/``words``/``words_verdict``/``words_fallback``: the cascade with
    ``ignore_words``: when its VAD triggered, the STT's words of the overlay, what they
    decided (``interrupt``: a word outside the list; ``ignored``: only listed words or none,
    the reply went on; ``fallback``: no words in time or the STT failed, the reply stopped
    anyway) and why it fell back."""

    kind: OverlayKind
    fixture: str
    line: str
    call_turn: int
    onset_ns: int | None = None
    speech_end_ns: int | None = None
    detected_ns: int | None = None
    cancel_ns: int | None = None
    last_byte_ns: int | None = None
    last_audible_ns: int | None = None
    stopped: bool = False
    reply_ended_before: bool = False
    refused: str | None = None
    audible: tuple[Span, ...] = ()
    pause_threshold_ns: int = PAUSE_THRESHOLD_NS
    vad_ns: int | None = None
    words: str | None = None
    words_verdict: str | None = None
    words_fallback: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def measured(self) -> bool:
        """The overlay played during an audible reply (there was something to stop)."""
        return not self.reply_ended_before and self.onset_ns is not None

    @property
    def stop_ns(self) -> int | None:
        """Interrupt: onset -> the last audible agent sample (None: never stopped)."""
        if self.kind != "interrupt" or not self.measured or not self.stopped:
            return None
        if self.last_audible_ns is None or self.onset_ns is None:
            return None
        return max(0, self.last_audible_ns - self.onset_ns)

    @property
    def never_stopped(self) -> bool:
        """An interrupt the agent talked through to the end of its reply."""
        return self.kind == "interrupt" and self.measured and not self.stopped

    @property
    def segments(self) -> dict[str, int]:
        """The stop's waterfall (see :func:`stop_segments`); empty when it never stopped."""
        if self.stop_ns is None or self.onset_ns is None or self.last_audible_ns is None:
            return {}
        marks = {"detected": self.detected_ns, "cancel": self.cancel_ns}
        marks["last_byte"] = self.last_byte_ns
        return stop_segments(self.onset_ns, marks, self.last_audible_ns)

    @property
    def detection_parts(self) -> dict[str, int]:
        """The detection segment split at the VAD trigger (``vad`` + ``words``, summing
        exactly to ``segments["detection"]``); empty without a words wait or a stop."""
        seg = self.segments
        if self.vad_ns is None or "detection" not in seg or self.onset_ns is None:
            return {}
        vad = min(max(self.vad_ns - self.onset_ns, 0), seg["detection"])
        return {"vad": vad, "words": seg["detection"] - vad}

    @property
    def provider_drain_ns(self) -> int | None:
        """How long the provider or agent kept streaming after the interruption was
        detected (its last audio byte's arrival), whatever the ear heard of it: a client that
        flushes its playback at the detection does not hear this drain, but it is the
        provider's stop (None: no detection, or no audio after it)."""
        if self.detected_ns is None or self.last_byte_ns is None:
            return None
        return max(0, self.last_byte_ns - self.detected_ns)

    @property
    def talk_over_ns(self) -> int | None:
        """Both sides audible: the overlay's speech against the agent's audible spans."""
        if not self.measured or self.onset_ns is None:
            return None
        end = self.speech_end_ns if self.speech_end_ns is not None else self.onset_ns
        return sum(max(0, min(b, end) - max(a, self.onset_ns)) for a, b in self.audible)

    @property
    def pause_ns(self) -> int | None:
        """Backchannel/noise: the agent's longest pause that began during the overlay or
        within the threshold after it (None for an interrupt or an unmeasured overlay)."""
        if self.kind == "interrupt" or not self.measured or self.onset_ns is None:
            return None
        end = (self.speech_end_ns or self.onset_ns) + self.pause_threshold_ns
        return longest_gap_ns(self.audible, self.onset_ns, end)

    @property
    def false_barge_in(self) -> bool | None:
        """Backchannel/noise: the agent stopped, or paused past the threshold, on it."""
        if self.kind == "interrupt" or not self.measured:
            return None
        pause = self.pause_ns or 0
        return self.stopped or pause > self.pause_threshold_ns

    def to_json(self) -> dict[str, Any]:
        """One ``overlays`` entry of a ``calls.jsonl`` line (raw stamps and derived figures)."""
        return {
            "kind": self.kind,
            "fixture": self.fixture,
            "line": self.line,
            "call_turn": self.call_turn,
            "onset_ns": self.onset_ns,
            "speech_end_ns": self.speech_end_ns,
            "detected_ns": self.detected_ns,
            "cancel_ns": self.cancel_ns,
            "last_byte_ns": self.last_byte_ns,
            "last_audible_ns": self.last_audible_ns,
            "stopped": self.stopped,
            "reply_ended_before": self.reply_ended_before,
            "refused": self.refused,
            "audible": [list(s) for s in self.audible],
            "pause_threshold_ns": self.pause_threshold_ns,
            "vad_ns": self.vad_ns,
            "words": self.words,
            "words_verdict": self.words_verdict,
            "words_fallback": self.words_fallback,
            # Derived (read back, they are recomputed from the stamps above).
            "stop_ns": self.stop_ns,
            "never_stopped": self.never_stopped,
            "segments": self.segments,
            "detection_parts": self.detection_parts,
            "provider_drain_ns": self.provider_drain_ns,
            "talk_over_ns": self.talk_over_ns,
            "pause_ns": self.pause_ns,
            "false_barge_in": self.false_barge_in,
            **({"extra": self.extra} if self.extra else {}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OverlayOutcome:
        """An outcome read back from ``calls.jsonl``."""
        kind = data.get("kind")
        spans = tuple(
            (int(s[0]), int(s[1]))
            for s in data.get("audible") or ()
            if isinstance(s, list | tuple) and len(s) == 2
        )
        return cls(
            kind=kind if kind in OVERLAY_KINDS else "interrupt",
            fixture=str(data.get("fixture", "")),
            line=str(data.get("line", "")),
            call_turn=int(data.get("call_turn") or 0),
            onset_ns=_int(data.get("onset_ns")),
            speech_end_ns=_int(data.get("speech_end_ns")),
            detected_ns=_int(data.get("detected_ns")),
            cancel_ns=_int(data.get("cancel_ns")),
            last_byte_ns=_int(data.get("last_byte_ns")),
            last_audible_ns=_int(data.get("last_audible_ns")),
            stopped=bool(data.get("stopped")),
            reply_ended_before=bool(data.get("reply_ended_before")),
            refused=data.get("refused"),
            audible=spans,
            pause_threshold_ns=int(data.get("pause_threshold_ns") or PAUSE_THRESHOLD_NS),
            vad_ns=_int(data.get("vad_ns")),
            words=_str(data.get("words")),
            words_verdict=_str(data.get("words_verdict")),
            words_fallback=_str(data.get("words_fallback")),
            extra=dict(data.get("extra") or {}),
        )


def barge_in_extra(o: OverlayOutcome, t0_ns: int) -> dict[str, Any]:
    """The figures of ``o`` a turn carries (``extra.barge_in``; the OTLP event on its span,
    the Prometheus histograms): times relative to the turn's ``t0_ns``."""

    def rel(t: int | None) -> int | None:
        return None if t is None else t - t0_ns

    return {
        "kind": o.kind,
        "fixture": o.fixture,
        "onset_ns": rel(o.onset_ns),
        "speech_end_ns": rel(o.speech_end_ns),
        "last_audible_ns": rel(o.last_audible_ns),
        "stop_ns": o.stop_ns,
        "segments": o.segments,
        **({"detection_parts": o.detection_parts} if o.detection_parts else {}),
        **({"words_verdict": o.words_verdict} if o.words_verdict else {}),
        "never_stopped": o.never_stopped,
        "reply_ended_before": o.reply_ended_before,
        "false_barge_in": o.false_barge_in,
        "pause_ns": o.pause_ns,
        "talk_over_ns": o.talk_over_ns,
        "provider_drain_ns": o.provider_drain_ns,
    }


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def barge_in_section(
    overlays: Iterable[OverlayOutcome], interrupting_e2e: Iterable[int] = ()
) -> dict[str, Any]:
    """The ``calls.barge_in`` section: stop latency and its segments (P50/P90...), never
    stopped, false barge-ins (rate and pauses), talk-over, and the e2e of the interrupting
    utterances (the response to an interruption, from its speech end)."""
    items = list(overlays)
    interrupts = [o for o in items if o.kind == "interrupt"]
    measured = [o for o in interrupts if o.measured]
    stops = [o.stop_ns for o in measured if o.stop_ns is not None]
    drains = [o.provider_drain_ns for o in measured if o.provider_drain_ns is not None]
    seg_values: dict[str, list[int]] = {}
    parts: dict[str, list[int]] = {}
    for o in measured:
        for name, value in o.segments.items():
            seg_values.setdefault(name, []).append(value)
        for name, value in o.detection_parts.items():
            parts.setdefault(name, []).append(value)
    others = [o for o in items if o.kind != "interrupt" and o.measured]
    false = [o for o in others if o.false_barge_in]
    pauses = [o.pause_ns for o in others if o.pause_ns]
    talk = [o.talk_over_ns for o in items if o.talk_over_ns is not None]
    by_kind = {
        k: {
            "n": sum(1 for o in others if o.kind == k),
            "false": sum(1 for o in false if o.kind == k),
        }
        for k in ("backchannel", "noise")
    }
    return {
        "interrupts": len(interrupts),
        "interrupts_measured": len(measured),
        "reply_ended_before": sum(1 for o in items if o.reply_ended_before),
        "stopped": len(stops),
        "never_stopped": sum(1 for o in measured if o.never_stopped),
        "refused": sum(1 for o in items if o.refused),
        "stop": Distribution.of(stops).to_json(),
        "segments": {k: Distribution.of(v).to_json() for k, v in seg_values.items()},
        # The cascade with ignore_words (only then): its detection's vad and words parts, the
        # overlays its words kept from stopping the reply, and the stops that fell back.
        **(
            {
                "detection_parts": {k: Distribution.of(v).to_json() for k, v in parts.items()},
                "words_ignored": sum(1 for o in items if o.words_verdict == "ignored"),
                "words_fallbacks": sum(1 for o in items if o.words_verdict == "fallback"),
            }
            if any(o.words_verdict for o in items)
            else {}
        ),
        "provider_drain": Distribution.of(drains).to_json(),
        "never_stopped_talk_over": Distribution.of(
            [o.talk_over_ns or 0 for o in measured if o.never_stopped]
        ).to_json(),
        "backchannels": len(others),
        "false_barge_ins": len(false),
        "false_barge_in_rate": (len(false) / len(others)) if others else None,
        "by_kind": by_kind,
        "pause": Distribution.of(pauses).to_json(),
        "talk_over": Distribution.of(talk).to_json(),
        "interruption_e2e": Distribution.of(list(interrupting_e2e)).to_json(),
    }
