"""What-if on a recorded run: the e2e distribution a setting would give, from the milestones.

Pure. A prediction moves each recorded turn's milestones by what the setting changes and keeps
everything else as it was measured:

* ``endpointing.hangover_ms`` / ``threshold_dbfs`` / ``min_speech_ms``: the endpoint moves by
  ``shift`` (per fixture: the pipeline's own endpointer replayed offline on the fixture's audio
  with the old and with the new setting, so a threshold change moves each fixture differently).
  Every later milestone moves with it: the STT finishes, the LLM answers and the TTS speaks the
  same time after the endpoint as they did. A turn whose new endpoint would come before the
  true speech end is a cut-off: its transcript would change, so it is not predicted (named).
* ``output.latency_ms``: the output device buffer; ``output_first_audible`` moves by the change.
* ``chunker.mode`` / ``chunker.min_chars``: the recorded arrival of each LLM delta is fed
  through the chunker again; ``tts_request`` and every later milestone move with the first
  piece (and the TTS's time to first byte for its length); :mod:`voicelat.core.judge.whatif_reply`.
* ``tts=NAME`` with a compare run that measured that TTS on the same fixtures: each turn's
  first speakable piece -> first audible output becomes that fixture's median there.

Keys whose effect is not in the recorded milestones are refused with the reason
(:data:`UNPREDICTABLE`), as are unknown keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from voicelat.core.base.errors import ConfigError
from voicelat.core.base.stats import percentile
from voicelat.core.base.turn import Turn
from voicelat.core.judge.whatif_reply import ReplyMove

#: Keys a prediction can make, and the type of their value.
ENDPOINTING_KEYS = {
    "endpointing.hangover_ms": int,
    "endpointing.threshold_dbfs": float,
    "endpointing.min_speech_ms": int,
}
CHUNKER_KEYS = {"chunker.mode": str, "chunker.min_chars": int}
CHUNKER_MODES = ("sentence", "clause", "token")
#: ``tts=NAME``: another TTS, measured by a compare run (``--compare DIR``).
TTS_KEY = "tts"
PREDICTABLE: dict[str, type] = {
    **ENDPOINTING_KEYS,
    "output.latency_ms": int,
    **CHUNKER_KEYS,
    TTS_KEY: str,
}

#: Keys (or tables) that cannot be predicted from recorded milestones, with why.
UNPREDICTABLE = {
    "endpointing.mode": (
        "a provider's end-of-turn is decided by the provider: no recorded milestone says when "
        "it would have come"
    ),
    "stt": "another STT's latency is not in this run's milestones: measure it (voicelat compare)",
    "llm": (
        "another LLM (or LLM option) writes other text at another pace: measure it "
        "(voicelat compare)"
    ),
    "tts": (
        "a TTS option (voice, speed, streaming) changes its latency in ways this run did not "
        "measure: measure the alternative with voicelat compare, then --set tts=LABEL "
        "--compare DIR"
    ),
}

ASSUMPTIONS = (
    "each stage takes as long after the endpoint as it did in the recorded run (same servers, "
    "same load; the STT gets the same speech with more or less trailing silence)",
    "the endpoint moves as the pipeline's energy VAD, replayed offline on the same fixture "
    "audio at the live 20 ms frame timing, says it moves",
    "warm turns only (the run's headline turns); failed, cold and warm-up turns are left out",
)


@dataclass(frozen=True, slots=True)
class Setting:
    """One ``KEY=VALUE`` of ``--set``."""

    key: str
    value: float | str

    @property
    def text(self) -> str:
        v = self.value
        return f"{self.key}={v}" if isinstance(v, str) else f"{self.key}={v:g}"

    @property
    def number(self) -> float:
        """The value of a numeric key."""
        return float(self.value)


def parse_setting(text: str) -> Setting:
    """``endpointing.hangover_ms=300`` -> Setting; an unpredictable or bad key is one line."""
    key, sep, raw = text.partition("=")
    key, raw = key.strip(), raw.strip()
    if not sep or not key:
        raise ConfigError(f"--set {text!r}: give KEY=VALUE, e.g. endpointing.hangover_ms=300")
    kind = PREDICTABLE.get(key)
    why = UNPREDICTABLE.get(key) or UNPREDICTABLE.get(key.split(".")[0])
    if kind is None and why is not None:
        raise ConfigError(f"--set {key} cannot be predicted from recorded milestones: {why}")
    if kind is None:
        raise ConfigError(
            f"--set {key}: not a setting a what-if knows; choose from {', '.join(PREDICTABLE)}"
        )
    if kind is str:
        return _text_setting(key, raw)
    try:
        value = float(raw) if kind is float else int(raw)
    except ValueError:
        raise ConfigError(f"--set {key}={raw!r}: the value must be {kind.__name__}") from None
    if key == "chunker.min_chars" and not 1 <= value <= 1000:
        raise ConfigError(f"--set {key}={raw}: must be 1..1000 characters")
    if kind is int and not 0 <= value <= 5000:
        raise ConfigError(f"--set {key}={raw}: must be 0..5000 ms")
    return Setting(key, value)


def _text_setting(key: str, raw: str) -> Setting:
    if key == "chunker.mode" and raw not in CHUNKER_MODES:
        raise ConfigError(f"--set {key}={raw!r}: choose from {', '.join(CHUNKER_MODES)}")
    if not raw:
        raise ConfigError(f"--set {key}=: give the TTS's label in the compare run, e.g. tts=espeak")
    return Setting(key, raw)


@dataclass(frozen=True)
class Prediction:
    """Recorded and predicted e2e of the same turns, with what was left out and why."""

    settings: tuple[Setting, ...]
    recorded_ns: tuple[int, ...]
    predicted_ns: tuple[int, ...]
    excluded: tuple[tuple[str, str], ...]  # (fixture, why) of turns that could not be predicted
    assumptions: tuple[str, ...]
    #: The endpointing segment (speech end -> endpoint) of the same turns, recorded and
    #: predicted: the part of e2e a setting moves; the rest is the stages' own variation.
    recorded_endpointing_ns: tuple[int, ...] = ()
    predicted_endpointing_ns: tuple[int, ...] = ()
    #: Which part the two tuples above hold: ``endpointing`` for the endpointer's keys, the
    #: reply's part for a chunker or TTS what-if (see :func:`predict`).
    part: str = "endpointing"
    #: Notes on this prediction (the fitted slope, the replay check), printed with it.
    notes: tuple[str, ...] = ()

    @property
    def n(self) -> int:
        return len(self.predicted_ns)

    def recorded(self, p: float) -> int | None:
        """A percentile of the recorded e2e of the predicted turns (ns)."""
        return round(percentile(self.recorded_ns, p)) if self.recorded_ns else None

    def predicted(self, p: float) -> int | None:
        """A percentile of the predicted e2e (ns)."""
        return round(percentile(self.predicted_ns, p)) if self.predicted_ns else None

    def recorded_part(self, p: float) -> int | None:
        """A percentile of the recorded part the setting moves (ns)."""
        values = self.recorded_endpointing_ns
        return round(percentile(values, p)) if values else None

    def predicted_endpointing(self, p: float) -> int | None:
        """A percentile of the predicted endpointing segment (ns)."""
        values = self.predicted_endpointing_ns
        return round(percentile(values, p)) if values else None


def predict(
    turns: Sequence[Turn],
    settings: Sequence[Setting],
    *,
    endpoint_shift_ns: Mapping[str, int | None],
    new_endpoint_ns: Mapping[str, int | None] | None = None,
    output_latency_delta_ns: int = 0,
    reply_moves: Sequence[ReplyMove] | None = None,
    reply_part: str = "",
    assumptions: Sequence[str] = ASSUMPTIONS,
    notes: Sequence[str] = (),
) -> Prediction:
    """Move each headline turn's e2e by its fixture's endpoint shift plus the output change
    (plus, with ``reply_moves``, aligned with ``turns``, its reply's move).

    ``endpoint_shift_ns[fixture]`` is new minus old endpoint (0 when no endpointing key is set);
    None, or a ``new_endpoint_ns`` (from the first sample) before the turn's speech end, leaves
    the turn out. ``output_latency_delta_ns`` is the change of ``output.latency_ms`` in ns. A
    reply move of None leaves the turn out with its reason; with reply moves the part reported
    is ``reply_part`` (what they move), else the endpointing segment.
    """
    recorded: list[int] = []
    predicted: list[int] = []
    parts: list[tuple[int, int]] = []
    excluded: list[tuple[str, str]] = []
    moves = list(reply_moves) if reply_moves is not None else [ReplyMove(0)] * len(turns)
    for t, move in zip(turns, moves, strict=True):
        if not t.headline or t.e2e_ns is None:
            continue
        shift = endpoint_shift_ns.get(t.fixture)
        if shift is None:
            excluded.append((t.fixture, "no endpoint with the new setting (end of audio first)"))
            continue
        new_ep = (new_endpoint_ns or {}).get(t.fixture)
        end = t.milestones.get("speech_end")
        if new_ep is not None and end is not None and new_ep < end:
            excluded.append((t.fixture, "the new endpoint comes before the speech end (cut-off)"))
            continue
        if move.shift_ns is None:
            excluded.append((t.fixture, move.why))
            continue
        recorded.append(t.e2e_ns)
        predicted.append(t.e2e_ns + shift + output_latency_delta_ns + move.shift_ns)
        seg = t.segments.get("endpointing", 0)
        parts.append(move.part_ns if reply_moves is not None else (seg, max(0, seg + shift)))
    return Prediction(
        tuple(settings),
        tuple(recorded),
        tuple(predicted),
        tuple(excluded),
        tuple(assumptions),
        tuple(a for a, _ in parts),
        tuple(b for _, b in parts),
        reply_part if reply_moves is not None else "endpointing",
        tuple(notes),
    )
