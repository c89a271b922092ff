"""The one segment colour map every picture uses: the HTML reports' SVG and the TUI (pure).

A segment is the same colour wherever it is drawn, so a reader who learnt "orange is STT" in
the terminal reads the HTML report without a legend. Colours are ``#rrggbb`` strings, which
SVG takes as a fill and rich takes as a style.

Names the map does not know (a segment a newer turn kind adds, such as an agent's) get a colour
from a fallback cycle chosen by a stable hash of the name, so an unknown segment still keeps one
colour across pictures, runs and processes, without anybody editing this file.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

from voicelat.core.base.contract import display_segments

#: Known segments, in critical-path order: the colour-blind-safe Okabe-Ito palette plus a grey,
#: a wine for the speech-to-speech ``model`` segment and two of Paul Tol's muted scheme for an
#: agent's segments; each readable on a white page and on a dark terminal.
SEGMENT_COLOURS: dict[str, str] = {
    "endpointing": "#999999",
    "stt": "#E69F00",
    "handoff": "#56B4E9",
    "llm_ttft": "#009E73",
    "aggregation": "#F0E442",
    "tts_ttfb": "#0072B2",
    "model": "#882255",
    # A voice agent's turn (issue 17): its black-box response and its transport.
    "agent_response": "#CC6677",
    "transport": "#DDCC77",
    "leading_silence": "#D55E00",
    "playout": "#CC79A7",
}

#: Colours for segment names the map does not know (the rest of Paul Tol's muted scheme,
#: distinct from the ones above).
FALLBACK_COLOURS: tuple[str, ...] = (
    "#332288",
    "#117733",
    "#44AA99",
    "#88CCEE",
    "#AA4499",
    "#661100",
)

#: The e2e total bar, percentile markers, the budget line and failed turns.
TOTAL_COLOUR = "#444444"
MARKER_COLOUR = "#000000"
BUDGET_COLOUR = "#D00000"
FAILED_COLOUR = "#D00000"
POINT_COLOUR = "#0072B2"


def segment_colour(name: str) -> str:
    """``name``'s colour: the map's, or a fallback chosen by a stable hash of the name."""
    known = SEGMENT_COLOURS.get(name)
    if known is not None:
        return known
    return FALLBACK_COLOURS[zlib.crc32(name.encode("utf-8")) % len(FALLBACK_COLOURS)]


def ordered_segments(with_data: Iterable[str]) -> tuple[str, ...]:
    """The segments to draw, given those that hold data: the contract's display order
    (:func:`~voicelat.core.base.contract.display_segments`), then any name it does not list, in
    the order first seen, so a picture never drops a segment it was given."""
    seen = list(dict.fromkeys(with_data))
    shown = display_segments(frozenset(seen))
    return (*shown, *(s for s in seen if s not in shown))


__all__ = [
    "BUDGET_COLOUR",
    "FAILED_COLOUR",
    "FALLBACK_COLOURS",
    "MARKER_COLOUR",
    "POINT_COLOUR",
    "SEGMENT_COLOURS",
    "TOTAL_COLOUR",
    "ordered_segments",
    "segment_colour",
]
