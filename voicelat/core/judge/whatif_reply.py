"""What-ifs on a turn's reply: another chunker mode, another TTS from a compare run (pure).

Both move only what comes after the LLM's first token; the caller adds them to the endpoint's
move (:func:`voicelat.core.judge.whatif.predict`).

**Chunker** (``chunker.mode`` / ``chunker.min_chars``): the recorded deltas
(:mod:`voicelat.core.measure.arrivals`) are fed again through the real :class:`Chunker` with the old and
the new setting, giving each piece's send time. When the TTS's first byte can come depends on
how the TTS takes its text (:func:`tts_text_unit`, from the run's stage description):

* ``piece`` (espeak, the cloud websockets): it starts on the first piece it is sent. The first
  byte moves by the first piece's move plus the TTS's time to first byte for the other length:
  ``slope x (new - old characters)``, the slope fitted on the run's own turns (Theil-Sen, TTS
  TTFB against the first piece's length) when there are enough of them, else 0 (said so).
* ``sentence`` (Wyoming streaming, e.g. wyoming-piper): the server splits the text stream into
  sentences itself and starts on the first sentence, once it sees the next sentence's capital
  or the end of the stream. The same sentence is synthesized; only when the server can see its
  end moves (:func:`server_sentence_release`).
* ``whole`` (Wyoming without streaming): the text goes out once, after the LLM is done; the
  chunker changes nothing.

**TTS swap** (``tts=NAME`` with a compare run): each turn keeps its time up to the first
speakable piece; from there to the first audible output it takes the other TTS's, the median
of that fixture's headline turns in the compare cell(s) measuring it.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from voicelat.core.base.turn import Turn
from voicelat.core.measure.arrivals import EXTRA_KEY, Fed, fed_text
from voicelat.core.measure.chunker import Chunker, ChunkMode

TextUnit = Literal["piece", "sentence", "whole"]

#: Fewest turns, and distinct first-piece lengths, to fit TTS TTFB against the length.
MIN_FIT_TURNS = 8
MIN_FIT_LENGTHS = 3

#: wyoming-piper's sentence boundary (sentence_stream): an end mark and closers, then spaces and
#: an upper-case letter or a numbered item; without one the sentence ends with the stream.
_SERVER_SENTENCE = re.compile(r"[.!?…]+['\"\)\]\}’”»]*(?=\s+\d+[.)]{1,2}\s|\s+(\S))")


@dataclass(frozen=True, slots=True)
class ReplyMove:
    """How far one turn's first audible output moves, and the part of e2e that moved.

    ``shift_ns`` None: the turn cannot be predicted (``why``). ``part_ns``: (recorded,
    predicted) of the part of the turn the setting changes.
    """

    shift_ns: int | None
    why: str = ""
    part_ns: tuple[int, int] = (0, 0)


@dataclass(frozen=True, slots=True)
class ChunkerSetting:
    """A chunker configuration (old or new)."""

    mode: str
    min_chars: int


def tts_text_unit(tts: Mapping[str, Any]) -> TextUnit:
    """How a TTS stage takes its text, from the run's ``stages.tts`` description."""
    if tts.get("stage") == "wyoming-tts":
        return "sentence" if tts.get("streaming") else "whole"
    return "piece"


def piece_sends(fed: Fed, setting: ChunkerSetting, done_ns: int | None) -> list[tuple[int, str]]:
    """Each piece the chunker would hand to TTS, with when (ns after llm_first_token): a piece
    goes out at the arrival of the delta that completed it; the rest at the LLM's end
    (``done_ns``), when every delta is recorded."""
    chunker = Chunker(setting.mode, setting.min_chars)  # type: ignore[arg-type]
    out: list[tuple[int, str]] = []
    for t, text in fed.deltas:
        out += [(t, piece) for piece in chunker.feed(text)]
    if fed.complete and done_ns is not None:
        out += [(done_ns, piece) for piece in chunker.flush()]
    return out


def server_sentence_release(
    sends: Sequence[tuple[int, str]], done_ns: int | None, complete: bool
) -> tuple[int, str] | None:
    """When a sentence-splitting server can start, and on what: the first send after which the
    text it holds shows a sentence end followed by the next sentence, else the stream's end."""
    held = ""
    for t, piece in sends:
        held += piece
        for m in _SERVER_SENTENCE.finditer(held):
            nxt = m.group(1)
            if nxt is None or nxt.isupper():
                return t, held[: m.end()].strip()
    if not complete or done_ns is None:
        return None
    return max(done_ns, sends[-1][0] if sends else done_ns), held.strip()


def first_release(
    fed: Fed, setting: ChunkerSetting, unit: TextUnit, done_ns: int | None
) -> tuple[int, int, str] | None:
    """(first piece sent, TTS can start, on what text), ns after llm_first_token; None when the
    recorded deltas end first."""
    sends = piece_sends(fed, setting, done_ns)
    if not sends:
        return None
    first = sends[0][0]
    if unit == "piece":
        return first, first, sends[0][1].strip()
    if unit == "whole":
        if not fed.complete or done_ns is None:
            return None
        return first, done_ns, "".join(p for _, p in sends).strip()
    found = server_sentence_release(sends, done_ns, fed.complete)
    return None if found is None else (first, found[0], found[1])


def theil_sen_slope(points: Sequence[tuple[int, int]]) -> float | None:
    """The median of pairwise slopes (robust to the loaded machine's outliers); None without
    :data:`MIN_FIT_TURNS` points over :data:`MIN_FIT_LENGTHS` distinct x."""
    if len(points) < MIN_FIT_TURNS or len({x for x, _ in points}) < MIN_FIT_LENGTHS:
        return None
    slopes = [
        (y2 - y1) / (x2 - x1)
        for i, (x1, y1) in enumerate(points)
        for x2, y2 in points[i + 1 :]
        if x2 != x1
    ]
    return statistics.median(slopes)


@dataclass(frozen=True)
class ChunkerModel:
    """The chunker what-if's inputs besides the turns (from the run's summary and the setting)."""

    old: ChunkerSetting
    new: ChunkerSetting
    unit: TextUnit


@dataclass(frozen=True)
class ChunkerMoves:
    """Per-turn moves, the fitted slope (ns per character; None: not fitted, 0 used) and the
    largest gap between the replayed and the recorded first speakable piece."""

    moves: tuple[ReplyMove, ...]
    slope_ns_per_char: float | None
    replay_gap_ns: int | None
    #: How far the first piece (``tts_request``) moves, per predicted turn.
    request_shifts_ns: tuple[int, ...] = ()


def _release(
    turn: Turn, model: ChunkerModel, setting: ChunkerSetting
) -> tuple[int, int, str] | str:
    fed = fed_text(turn.extra.get(EXTRA_KEY), turn.reply)
    if fed is None:
        return "no per-delta arrival times in this turn (recorded before they were kept)"
    m = turn.milestones
    first_token = m.get("llm_first_token")
    if first_token is None:
        return "no llm_first_token"
    done = m.get("llm_done")
    found = first_release(fed, setting, model.unit, None if done is None else done - first_token)
    if found is None:
        return "the TTS's first text ends after the recorded deltas"
    return found


def chunker_moves(turns: Sequence[Turn], model: ChunkerModel) -> ChunkerMoves:
    """The first byte's move of each of ``turns`` (headline ones are used) under ``model``."""
    old: list[tuple[int, int, str] | str] = [_release(t, model, model.old) for t in turns]
    new: list[tuple[int, int, str] | str] = [_release(t, model, model.new) for t in turns]
    points: list[tuple[int, int]] = []
    gaps: list[int] = []
    for t, o in zip(turns, old, strict=True):
        m = t.milestones
        if isinstance(o, str) or "tts_first_byte" not in m or "llm_first_token" not in m:
            continue
        points.append((len(o[2]), m["tts_first_byte"] - m["llm_first_token"] - o[1]))
        if "llm_first_speakable" in m:
            gaps.append(abs(m["llm_first_speakable"] - m["llm_first_token"] - o[0]))
    slope = theil_sen_slope(points) if model.unit == "piece" else None
    use = max(0.0, slope or 0.0)
    moves: list[ReplyMove] = []
    requests: list[int] = []
    for t, o, n in zip(turns, old, new, strict=True):
        if isinstance(o, str) or isinstance(n, str):
            moves.append(ReplyMove(None, o if isinstance(o, str) else str(n)))
            continue
        m = t.milestones
        shift = n[1] - o[1] + round(use * (len(n[2]) - len(o[2])))
        part = m.get("tts_first_byte", 0) - m.get("llm_first_token", 0)
        moves.append(ReplyMove(shift, "", (part, part + shift)))
        if t.headline:
            requests.append(n[0] - o[0])
    return ChunkerMoves(tuple(moves), slope, max(gaps) if gaps else None, tuple(requests))


# -- a TTS swap ------------------------------------------------------------------------------
def tts_part_ns(turn: Turn) -> int | None:
    """First speakable piece -> first audible output: what a TTS swap replaces."""
    m = turn.milestones
    a, b = m.get("llm_first_speakable"), m.get("output_first_audible")
    return None if a is None or b is None else b - a


def fixture_medians(cell_turns: Sequence[Turn]) -> dict[str, int]:
    """Per fixture, the median TTS part of the compare cell's headline turns."""
    by: dict[str, list[int]] = {}
    for t in cell_turns:
        part = tts_part_ns(t) if t.headline else None
        if part is not None:
            by.setdefault(t.fixture, []).append(part)
    return {f: round(statistics.median(v)) for f, v in by.items()}


def tts_swap_moves(
    turns: Sequence[Turn], medians: Mapping[str, int], output_delta_ns: int = 0
) -> tuple[ReplyMove, ...]:
    """Each turn's TTS part replaced by its fixture's median in the other TTS's cell;
    ``output_delta_ns`` (this run's output latency minus the cell's) is added back."""
    moves: list[ReplyMove] = []
    for t in turns:
        part = tts_part_ns(t)
        other = medians.get(t.fixture)
        if part is None:
            moves.append(ReplyMove(None, "no llm_first_speakable or output_first_audible"))
        elif other is None:
            moves.append(ReplyMove(None, "no warm turn of this fixture in the compare cell"))
        else:
            new = other + output_delta_ns
            moves.append(ReplyMove(new - part, "", (part, new)))
    return tuple(moves)


def chunk_mode(value: str) -> ChunkMode:
    """A chunker mode name, checked."""
    if value not in ("sentence", "clause", "token"):
        raise ValueError(value)
    return value  # type: ignore[return-value]


# -- what a prediction says about itself --------------------------------------------------------
_UNIT_SAYS = {
    "piece": "starts synthesizing on the first piece it is sent",
    "sentence": (
        "splits the text stream into sentences itself and starts on the first one once it sees "
        "the next sentence begin or the stream end (wyoming-piper's sentence_stream rule, "
        "abbreviations aside): the chunker moves when the text leaves, not what is synthesized "
        "first"
    ),
    "whole": "is sent the whole reply at once after the LLM is done: the chunker changes nothing",
}


def chunker_assumptions(unit: TextUnit, stage: str, slope: float | None) -> tuple[str, ...]:
    """The chunker what-if's assumptions, for the printout."""
    out = [
        "the LLM streams the same deltas at the same times (they are replayed through the "
        "chunker with the new setting from turns.jsonl extra.llm_deltas)",
        f"the TTS ({stage}) {_UNIT_SAYS[unit]}",
    ]
    if unit == "piece":
        if slope is None:
            out.append(
                "TTS time to first byte does not depend on the first piece's length (too few "
                f"turns or lengths to fit it: under {MIN_FIT_TURNS} turns or "
                f"{MIN_FIT_LENGTHS} lengths)"
            )
        else:
            used = max(0.0, slope)
            out.append(
                f"TTS time to first byte grows {used / 1e6:.2f} ms per character of the first "
                f"piece (Theil-Sen fit on this run's turns: {slope / 1e6:+.2f} ms/char"
                f"{', negative, so 0 is used' if slope < 0 else ''})"
            )
    out.append("the TTS and the sink take as long after the first byte as they did")
    return tuple(out)


def chunker_notes(found: ChunkerMoves) -> tuple[str, ...]:
    """The replay's check against the run itself, and how far tts_request moves."""
    out: list[str] = []
    if found.request_shifts_ns:
        med = statistics.median(found.request_shifts_ns) / 1e6
        out.append(f"predicted tts_request move (the first piece leaves): P50 {med:+.0f} ms")
    if found.replay_gap_ns is not None:
        out.append(
            "check: the chunker replayed with the run's setting hands its first piece within "
            f"{found.replay_gap_ns / 1e6:.1f} ms of every recorded llm_first_speakable"
        )
    return tuple(out)


def tts_assumptions(name: str, cells: Sequence[str]) -> tuple[str, ...]:
    """The TTS swap's assumptions, for the printout."""
    return (
        "each turn keeps its time up to the first speakable piece; from there to the first "
        f"audible output it takes the median of TTS {name} for the same fixture in the compare "
        f"cell(s) {', '.join(cells)}",
        "the other TTS gets the same text and runs under the same load as in the compare run",
    )


def tts_notes(common: Sequence[str], differ: Sequence[str]) -> tuple[str, ...]:
    """Which fixtures were matched, and where the compare run's reply text differed."""
    out = [f"matched {len(common)} fixture(s) with the compare run"]
    if differ:
        out.append(
            f"the reply text differs from the compare cell's on {len(differ)} fixture(s) "
            f"({', '.join(differ[:5])}{', ...' if len(differ) > 5 else ''}): the other TTS "
            "spoke other text there"
        )
    return tuple(out)
