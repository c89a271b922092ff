"""The call timeline: a picture of each call of a run (pure: records and turns in, SVG out).

Two lanes on the call's clock (0 = connected): the caller's speech (each turn's ground-truth
``speech_start`` -> ``speech_end``) and the agent's audio at the ear (the greeting, and each
reply from its first audible sample for as long as it played). Between them, each turn's wait
(``speech_end`` -> ``output_first_audible``, its e2e) is a dashed line with its milliseconds.
Speech during a reply (``core/calls/bargein.py``) sits on the caller's lane in its own colour
(interruption, backchannel, noise); an interruption's stop (its onset -> the agent's last
audible sample) is a bar under the agent's lane with its milliseconds, or "never stopped".
Every mark carries ``data-*`` attributes (call, turn, start and end ns from connected), so a
test reads the picture back with an XML parser.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

from voicelat.core.base.display import fmt_ms
from voicelat.core.base.palette import FAILED_COLOUR, MARKER_COLOUR
from voicelat.core.base.turn import Turn
from voicelat.core.calls.bargein import BARGE_IN
from voicelat.core.calls.call import (
    CALL_CONNECTED,
    CALL_GREETING,
    CALL_ID,
    CALL_TURN,
    INTERRUPTING,
    CallRecord,
)

__all__ = ["CallLanes", "call_lanes", "call_timeline_svg", "calls_from_turns", "calls_html"]

SVG_NS = "http://www.w3.org/2000/svg"
_USER_COLOUR = "#4c78a8"
_AGENT_COLOUR = "#59a14f"
_W, _H, _LEFT, _RIGHT = 760.0, 110.0, 92.0, 14.0
_USER_Y, _AGENT_Y, _LANE_H = 18.0, 52.0, 16.0
_OVERLAY_COLOURS = {"interrupt": "#e15759", "backchannel": "#b07aa1", "noise": "#9c755f"}


@dataclass(frozen=True)
class Span:
    """One bar of a lane: ns from the call's connection; ``turn`` 0 is the greeting."""

    turn: int
    start_ns: int
    end_ns: int
    label: str = ""


@dataclass(frozen=True)
class Wait:
    """A turn's wait for the reply (its e2e), from ``speech_end`` to the first audible sample."""

    turn: int
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class Overlay:
    """Speech during a reply: its kind, its speech (ns from connected), and for an
    interruption its stop at the ear (None: never stopped, or nothing to stop)."""

    kind: str
    turn: int
    start_ns: int
    end_ns: int
    stop_ns: int | None = None
    never_stopped: bool = False
    false_barge_in: bool = False
    #: The stop's waterfall (segment, ns), summing to ``stop_ns``; with ``ignore_words`` the
    #: detection's ``vad``/``words`` split in ``detection_parts``.
    segments: tuple[tuple[str, int], ...] = ()
    detection_parts: tuple[tuple[str, int], ...] = ()

    def waterfall(self) -> str:
        """``detection 290 (vad 205 + words 85) + cancel 0 + drain 0 + flush 8`` (ms), or ""
        when there is no stop to split."""
        parts = dict(self.detection_parts)
        out = []
        for name, ns in self.segments:
            text = f"{name} {fmt_ms(ns)}"
            if name == "detection" and parts:
                text += " (" + " + ".join(f"{k} {fmt_ms(v)}" for k, v in parts.items()) + ")"
            out.append(text)
        return " + ".join(out)


@dataclass(frozen=True)
class CallLanes:
    """What the timeline of one call draws (ns from connected)."""

    call_id: str
    duration_ns: int
    user: tuple[Span, ...]
    agent: tuple[Span, ...]
    waits: tuple[Wait, ...]
    failed: tuple[int, ...]
    overlays: tuple[Overlay, ...] = ()


def call_lanes(record: CallRecord, turns: Sequence[Turn]) -> CallLanes:
    """The lanes of ``record``'s call from its turns (those carrying its call id)."""
    zero = record.connected_ns
    user: list[Span] = []
    agent: list[Span] = []
    waits: list[Wait] = []
    failed: list[int] = []
    if record.greeting_first_audible_ns is not None:
        start = record.greeting_first_audible_ns - zero
        played = record.extra.get("greeting_audio_ns")
        length = int(played) if isinstance(played, int | float) and played > 0 else 1
        label = f"greeting after {fmt_ms(record.greeting_ns)} ms"
        agent.append(Span(0, start, start + length, label))
    mine = sorted(
        (t for t in turns if t.extra.get(CALL_ID) == record.call_id),
        key=lambda t: int(t.extra.get(CALL_TURN) or 0),
    )
    cut = {o.call_turn: o.last_audible_ns for o in record.overlays if o.stopped}
    for t in mine:  # where only turns are at hand, their own record of it
        b = t.extra.get(BARGE_IN)
        if isinstance(b, dict) and isinstance(b.get("stop_ns"), int):
            cut.setdefault(int(t.extra.get(CALL_TURN) or 0), t.t0_ns + b["last_audible_ns"])
    for t in mine:
        k, m, base = int(t.extra.get(CALL_TURN) or 0), t.milestones, t.t0_ns - zero
        # The words as each bar's tooltip: what the caller said (the fixture's or the simulated
        # caller's line) and what the agent replied, where the turn knows them.
        said = f"turn {k}" + (f": {_words(t.expected)}" if t.expected else "")
        if "speech_start" in m and "speech_end" in m and not t.extra.get(INTERRUPTING):
            user.append(Span(k, base + m["speech_start"], base + m["speech_end"], said))
        heard = m.get("output_first_audible")
        if heard is not None:
            played = t.figures.get("reply_audio_ns")
            length = int(played) if isinstance(played, int | float) and played > 0 else 1
            stopped_at = cut.get(k)
            if stopped_at is not None:  # an interruption cut it: it played to there
                length = max(1, stopped_at - zero - (base + heard))
            answer = f"turn {k}: {_words(t.reply)}" if t.reply else ""
            agent.append(Span(k, base + heard, base + heard + length, answer))
        if t.ok and t.e2e_ns is not None and "speech_end" in m and heard is not None:
            waits.append(Wait(k, base + m["speech_end"], base + heard))
        if not t.ok:
            failed.append(k)
    overlays = _overlays(record, mine)
    ends = [s.end_ns for s in (*user, *agent)] + [o.end_ns for o in overlays]
    end = max([record.duration_ns, *ends], default=1)
    return CallLanes(
        record.call_id, end, tuple(user), tuple(agent), tuple(waits), tuple(failed), overlays
    )


def _overlays(record: CallRecord, turns: Sequence[Turn]) -> tuple[Overlay, ...]:
    """The call's overlays from ``calls.jsonl``, or where only turns are at hand (the TUI)
    from what each turn an overlay played into carries (``extra.barge_in``)."""
    zero = record.connected_ns
    if record.overlays:
        return tuple(
            Overlay(
                o.kind,
                o.call_turn,
                o.onset_ns - zero,
                (o.speech_end_ns or o.onset_ns) - zero,
                o.stop_ns,
                o.never_stopped,
                bool(o.false_barge_in),
                tuple(o.segments.items()),
                tuple(o.detection_parts.items()),
            )
            for o in record.overlays
            if o.onset_ns is not None
        )
    out = []
    for t in turns:
        b = t.extra.get(BARGE_IN)
        if not isinstance(b, dict) or not isinstance(b.get("onset_ns"), int):
            continue
        base = t.t0_ns - zero
        end = b.get("speech_end_ns")
        stop = b.get("stop_ns")
        out.append(
            Overlay(
                str(b.get("kind", "")),
                int(t.extra.get(CALL_TURN) or 0),
                base + b["onset_ns"],
                base + (end if isinstance(end, int) else b["onset_ns"]),
                stop if isinstance(stop, int) else None,
                bool(b.get("never_stopped")),
                bool(b.get("false_barge_in")),
                _ns_items(b.get("segments")),
                _ns_items(b.get("detection_parts")),
            )
        )
    return tuple(out)


def _ns_items(value: object) -> tuple[tuple[str, int], ...]:
    """A saved ``{segment: ns}`` mapping, in its order (anything else: none)."""
    if not isinstance(value, dict):
        return ()
    return tuple((str(k), v) for k, v in value.items() if isinstance(v, int))


def _words(text: str, most: int = 120) -> str:
    one = " ".join(text.split())
    return one if len(one) <= most else one[: most - 1] + "…"


def calls_from_turns(turns: Sequence[Turn]) -> list[CallRecord]:
    """The calls a run's turns belong to, rebuilt from what each turn carries (its call's
    connection, the greeting on its first turn): enough to draw them where ``calls.jsonl`` is
    not at hand (the TUI reads turns). Counts and ends are the turns' own."""
    by_call: dict[str, list[Turn]] = {}
    for t in turns:
        if isinstance(t.extra.get(CALL_ID), str) and isinstance(t.extra.get(CALL_CONNECTED), int):
            by_call.setdefault(str(t.extra[CALL_ID]), []).append(t)
    out = []
    for call_id, mine in by_call.items():
        connected = int(mine[0].extra[CALL_CONNECTED])
        first = next((t for t in mine if CALL_GREETING in t.extra), None)
        greeting = first.extra[CALL_GREETING] if first is not None else None
        played = first.extra.get("call_greeting_audio_ns") if first is not None else None
        end = max(t.t0_ns + max(t.milestones.values(), default=0) for t in mine)
        out.append(
            CallRecord(
                call_id=call_id,
                scenario=str(mine[0].extra.get("scenario") or ""),
                connected_ns=connected,
                ended_ns=end,
                turns_planned=len(mine),
                turns_completed=sum(t.ok for t in mine),
                greeting_ns=greeting if isinstance(greeting, int) else None,
                greeting_expected=isinstance(greeting, int),
                greeting_first_audible_ns=connected + greeting
                if isinstance(greeting, int)
                else None,
                extra={"greeting_audio_ns": played} if isinstance(played, int) else {},
            )
        )
    return out


def call_timeline_svg(lanes: CallLanes) -> str:
    """One call's two lanes (see the module docstring)."""
    plot = _W - _LEFT - _RIGHT
    total = max(lanes.duration_ns, 1)

    def x(ns: int) -> float:
        return _LEFT + ns / total * plot

    cid = escape(lanes.call_id)
    parts = [
        f'<svg xmlns="{SVG_NS}" class="call-timeline" data-call="{cid}" width="{_W:.0f}" '
        f'height="{_H:.0f}" viewBox="0 0 {_W:.0f} {_H:.0f}" role="img" '
        f'aria-label="call {cid}"><title>call {cid}</title>',
        f'<text class="lane" x="4" y="{_USER_Y + 12:.0f}">caller</text>',
        f'<text class="lane" x="4" y="{_AGENT_Y + 12:.0f}">agent at ear</text>',
    ]
    for lane, spans, y, colour in (
        ("user", lanes.user, _USER_Y, _USER_COLOUR),
        ("agent", lanes.agent, _AGENT_Y, _AGENT_COLOUR),
    ):
        for s in spans:
            colour_s = FAILED_COLOUR if s.turn in lanes.failed else colour
            tip = s.label or f"turn {s.turn}"
            parts.append(
                f'<rect class="{lane}" data-turn="{s.turn}" data-start-ns="{s.start_ns}" '
                f'data-end-ns="{s.end_ns}" x="{x(s.start_ns):.2f}" y="{y:.1f}" '
                f'width="{max(1.0, x(s.end_ns) - x(s.start_ns)):.2f}" height="{_LANE_H:.0f}" '
                f'fill="{colour_s}"><title>{escape(tip)}</title></rect>'
            )
    for w in lanes.waits:
        mid = (x(w.start_ns) + x(w.end_ns)) / 2
        ms = fmt_ms(w.end_ns - w.start_ns)
        parts.append(
            f'<line class="wait" data-turn="{w.turn}" data-ns="{w.end_ns - w.start_ns}" '
            f'x1="{x(w.start_ns):.2f}" x2="{x(w.end_ns):.2f}" y1="{_AGENT_Y - 6:.1f}" '
            f'y2="{_AGENT_Y - 6:.1f}" stroke="{MARKER_COLOUR}" stroke-dasharray="3 2"/>'
            f'<text class="mark" x="{mid:.1f}" y="{_AGENT_Y - 9:.1f}" text-anchor="middle" '
            f'fill="{MARKER_COLOUR}">{ms}</text>'
        )
    parts += [_overlay_svg(o, x, lanes.duration_ns) for o in lanes.overlays]
    parts.append(
        f'<line x1="{_LEFT:.1f}" x2="{_LEFT + plot:.1f}" y1="{_H - 18:.1f}" y2="{_H - 18:.1f}" '
        f'stroke="#888"/><text class="tick" x="{_LEFT:.1f}" y="{_H - 5:.1f}">0 s (connected)'
        f'</text><text class="tick" x="{_LEFT + plot:.1f}" y="{_H - 5:.1f}" text-anchor="end">'
        f"{total / 1e9:.1f} s</text></svg>"
    )
    return "".join(parts)


def _overlay_svg(o: Overlay, x: Callable[[int], float], duration_ns: int) -> str:
    """Speech during a reply on the caller's lane; an interruption's stop under the agent's."""
    colour = _OVERLAY_COLOURS.get(o.kind, MARKER_COLOUR)
    tip = f"{o.kind} during turn {o.turn}'s reply"
    if o.false_barge_in:
        tip += ": a false barge-in (the agent stopped or paused)"
    if o.waterfall():
        tip += f"; stop {fmt_ms(o.stop_ns)} ms = {o.waterfall()}"
    out = (
        f'<rect class="overlay {o.kind}" data-turn="{o.turn}" data-start-ns="{o.start_ns}" '
        f'data-end-ns="{o.end_ns}" x="{x(o.start_ns):.2f}" y="{_USER_Y:.1f}" '
        f'width="{max(1.0, x(o.end_ns) - x(o.start_ns)):.2f}" height="{_LANE_H:.0f}" '
        f'fill="{colour}"><title>{escape(tip)}</title></rect>'
    )
    if o.kind != "interrupt" or (o.stop_ns is None and not o.never_stopped):
        return out
    y = _AGENT_Y + _LANE_H + 4
    stop = o.stop_ns if o.stop_ns is not None else duration_ns - o.start_ns
    label = f"stop {fmt_ms(o.stop_ns)} ms" if o.stop_ns is not None else "never stopped"
    return out + (
        f'<line class="stop" data-turn="{o.turn}" data-ns="{o.stop_ns or ""}" '
        f'x1="{x(o.start_ns):.2f}" x2="{x(o.start_ns + stop):.2f}" y1="{y:.1f}" '
        f'y2="{y:.1f}" stroke="{colour}" stroke-width="2"/>'
        f'<text class="mark" x="{x(o.start_ns):.1f}" y="{y + 10:.1f}" fill="{colour}">'
        f"{label}</text>"
    )


def calls_html(records: Sequence[CallRecord], turns: Sequence[Turn], *, most: int = 12) -> str:
    """The report's calls section: a timeline per call (the first ``most``)."""
    if not records:
        return ""
    shown = records[:most]
    more = (
        f"<p><small>{len(records) - most} more call(s) in calls.jsonl.</small></p>"
        if len(records) > most
        else ""
    )
    body = "".join(
        f"<h3>{escape(r.call_id)} ({escape(r.scenario)}): {r.turns_completed}/"
        f"{r.turns_planned} turns</h3>" + call_timeline_svg(call_lanes(r, turns))
        for r in shown
    )
    return (
        "<h2>Calls</h2><p><small>Each call on its own clock (0 = connected): the caller's "
        f'speech (<span style="color:{_USER_COLOUR}">blue</span>), the agent\'s audio at the '
        f'ear (<span style="color:{_AGENT_COLOUR}">green</span>), '
        f'<span style="color:{_OVERLAY_COLOURS["interrupt"]}">interruptions</span> (with their '
        "stop at the ear under the agent's lane), backchannels and noise on the caller's lane, "
        "each turn's wait (dashed, "
        f'its e2e in ms); <span style="color:{FAILED_COLOUR}">red</span>: a failed turn.'
        "</small></p>" + body + more
    )
