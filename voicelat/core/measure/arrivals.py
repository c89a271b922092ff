"""When each piece of the LLM's reply arrived: the record a chunker what-if replays (pure).

A turn keeps ``extra["llm_deltas"]``: for the first :data:`MAX_DELTAS` content deltas, the
arrival time (ns after ``llm_first_token``) and the character count of each, plus how many
whitespace characters the reply's text lost at its start (``Turn.reply`` is stripped). With the
reply text that rebuilds exactly what the chunker was fed and when, so any chunker mode or
``min_chars`` can be replayed on it (:func:`fed_text`). Deltas rather than candidate cut points:
the same record serves every mode and ``min_chars`` and the chunker's own rules (abbreviations,
"3." before "3.5") apply unchanged, at two integers per token.

It is built in :meth:`TurnRecorder.finish` from the events the recorder already holds, after
the turn: nothing is added to the stamping path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from voicelat.core.measure.events import Delta

#: Deltas kept per turn: the first clause and the first sentence end well within it on every
#: reply measured here; a longer first sentence is left out of a prediction, named.
MAX_DELTAS = 64
EXTRA_KEY = "llm_deltas"


def delta_record(deltas: Sequence[Delta]) -> dict[str, Any] | None:
    """The compact per-turn record of ``deltas`` (None: no content arrived)."""
    content = [d for d in deltas if d.content]
    if not content:
        return None
    t0 = content[0].t_ns
    raw = "".join(d.content for d in content)
    return {
        "lead_ws": len(raw) - len(raw.lstrip()),
        "d": [[d.t_ns - t0, len(d.content)] for d in content[:MAX_DELTAS]],
        "more": len(content) > MAX_DELTAS,
    }


@dataclass(frozen=True, slots=True)
class Fed:
    """What the chunker was fed: ``(ns after llm_first_token, text)`` per delta, in order."""

    deltas: tuple[tuple[int, str], ...]
    #: Every delta of the reply is here (not cut at :data:`MAX_DELTAS`).
    complete: bool


def fed_text(record: Mapping[str, Any] | None, reply: str | None) -> Fed | None:
    """Rebuild the deltas from a turn's record and its (stripped) reply; None when the turn has
    no record or the two disagree (a record from another version)."""
    if not record or reply is None:
        return None
    try:
        lead = int(record["lead_ws"])
        pairs = [(int(t), int(n)) for t, n in record["d"]]
        more = bool(record.get("more", False))
    except (KeyError, TypeError, ValueError):
        return None
    # Whitespace the strip removed is whitespace to the chunker whatever it was.
    text = " " * lead + reply
    total = sum(n for _, n in pairs)
    if not more and total < len(text):
        return None
    if total > len(text):
        text += " " * (total - len(text))
    out: list[tuple[int, str]] = []
    at = 0
    for t, n in pairs:
        out.append((t, text[at : at + n]))
        at += n
    return Fed(tuple(out), complete=not more)
