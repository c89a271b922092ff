"""Per-region percentiles: the summary's ``regions`` section (pure).

A turn carries the region it was measured from (``extra["region"]``: ``--region``, or its Ray
node's label). When a run's turns come from more than one region (two runs' turns read
together, Ray nodes with different labels), the summary gets a ``regions`` section, sorted by
label::

    "regions": {"eu-west": {"turns": 12, "failed": 0, "e2e": {n, p50, p90, p99, ...},
                            "segments_p50_ns": {"stt": ..., "llm": ...}}, ...}

``e2e`` is over the region's headline turns (as the run's own ``e2e``), ``turns`` and
``failed`` over all of its turns. Turns without a label, beside labelled ones, count under
:data:`~voicelat.core.base.region.NO_REGION`. One region (or none) gives no section: the
run's ``run.region`` says it.

:class:`RegionTally` streams (one :class:`~voicelat.core.summaries.sketch.ValueStream` per
region and segment, at most :data:`MAX_REGIONS` regions) and merges, so the streaming summary
and the list summary (:func:`regions_section`) give the same section for the same turns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from voicelat.core.base.contract import segment_names
from voicelat.core.base.region import NO_REGION, REGION
from voicelat.core.base.turn import Turn
from voicelat.core.summaries.sketch import ValueStream

__all__ = ["MAX_REGIONS", "OTHER_REGIONS", "RegionTally", "regions_section", "turn_region"]

#: Regions kept apart; the turns of any later one count under :data:`OTHER_REGIONS` (a
#: label per turn would otherwise grow the summary with the run).
MAX_REGIONS = 32
OTHER_REGIONS = "(other)"


def turn_region(turn: Turn) -> str | None:
    """The region a turn records (None: it records none)."""
    region = turn.extra.get(REGION)
    return region if isinstance(region, str) and region else None


class _Region:
    """One region's counts and streams."""

    __slots__ = ("e2e", "failed", "segments", "turns")

    def __init__(self, new: Callable[[], ValueStream]) -> None:
        self.turns = 0
        self.failed = 0
        self.e2e = new()
        self.segments: dict[str, ValueStream] = {}


class RegionTally:
    """Turns counted by region (see the module); ``new`` makes each distribution's stream."""

    def __init__(self, new: Callable[[], ValueStream] = lambda: ValueStream(None)) -> None:
        self._new = new
        self.regions: dict[str | None, _Region] = {}

    def _of(self, region: str | None) -> _Region:
        if region not in self.regions and len(self.regions) >= MAX_REGIONS:
            region = OTHER_REGIONS
        r = self.regions.get(region)
        if r is None:
            r = self.regions[region] = _Region(self._new)
        return r

    def add(self, turn: Turn) -> None:
        r = self._of(turn_region(turn))
        r.turns += 1
        r.failed += turn.failed
        if turn.headline and turn.e2e_ns is not None:
            r.e2e.add(float(turn.e2e_ns))
            for s, v in turn.segments.items():
                stream = r.segments.get(s)
                if stream is None:
                    stream = r.segments[s] = self._new()
                stream.add(float(v))

    def merge(self, other: RegionTally) -> None:
        """Add ``other``'s turns to this tally's."""
        for region, theirs in other.regions.items():
            mine = self._of(region)
            mine.turns += theirs.turns
            mine.failed += theirs.failed
            mine.e2e.merge(theirs.e2e)
            for s, stream in theirs.segments.items():
                if s not in mine.segments:
                    mine.segments[s] = self._new()
                mine.segments[s].merge(stream)

    def section(self) -> dict[str, Any] | None:
        """The ``regions`` section, or None when the turns come from one region (or none)."""
        labelled = [k for k in self.regions if k is not None]
        if len(self.regions) < 2 or not labelled:
            return None
        out: dict[str, Any] = {}
        for region in sorted(self.regions, key=lambda k: (k is None, k or "")):
            r = self.regions[region]
            names = segment_names(frozenset(r.segments))
            out[region if region is not None else NO_REGION] = {
                "turns": r.turns,
                "failed": r.failed,
                "e2e": r.e2e.distribution().to_json(),
                "segments_p50_ns": {
                    s: round(r.segments[s].quantile(50)) for s in names if s in r.segments
                },
            }
        return out


def regions_section(turns: Iterable[Turn]) -> dict[str, Any] | None:
    """The ``regions`` section of ``turns`` (exact percentiles), or None (one region)."""
    tally = RegionTally()
    for t in turns:
        tally.add(t)
    return tally.section()
