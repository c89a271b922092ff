"""A call's timeline in the terminal (pure renderables; the run view's pictures show them).

The same lanes as report.html's picture (``report/call_svg.py``): the caller's speech and the
agent's audio at the ear on the call's clock, one character per step of time, each turn's
wait (its e2e) as a dotted run with its milliseconds under it. Speech during a reply
(``core/calls/bargein.py``) marks the caller's lane in its own colour (``▓``), and an
interruption's stop at the ear ("stop 240" or "never stopped") is written under it. Under the
lanes, the words turn by turn (``call_words_text``): what the caller said (a fixture's
transcript or a simulated caller's line) and what the agent answered where the turn has it.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group
from rich.text import Text

from voicelat.core.base.display import fmt_ms
from voicelat.core.base.turn import Turn
from voicelat.core.calls.call import CALL_ID, CALL_TURN
from voicelat.report.call_svg import CallLanes, call_lanes, calls_from_turns

__all__ = ["call_timeline_text", "call_words_text", "calls_view"]

USER_STYLE = "bold blue"
AGENT_STYLE = "bold green"
FAILED_STYLE = "bold red"
OVERLAY_STYLES = {"interrupt": "bold magenta", "backchannel": "magenta", "noise": "yellow"}
_LABEL = 8


def _row(width: int) -> list[tuple[str, str]]:
    return [(" ", "")] * width


def call_timeline_text(lanes: CallLanes, width: int = 72) -> Text:
    """Three lines: the caller's lane, the agent's lane, each wait's milliseconds."""
    cols = max(10, width - _LABEL)
    total = max(lanes.duration_ns, 1)

    def col(ns: int) -> int:
        return min(cols - 1, max(0, ns * cols // total))

    user, agent = _row(cols), _row(cols)
    for spans, row, style in ((lanes.user, user, USER_STYLE), (lanes.agent, agent, AGENT_STYLE)):
        for s in spans:
            mark = FAILED_STYLE if s.turn in lanes.failed else style
            for c in range(col(s.start_ns), col(s.end_ns) + 1):
                row[c] = ("█", mark)
    labels = [" "] * cols
    for o in lanes.overlays:
        for c in range(col(o.start_ns), col(o.end_ns) + 1):
            user[c] = ("▓", OVERLAY_STYLES.get(o.kind, "magenta"))
    for w in lanes.waits:
        a, b = col(w.start_ns), col(w.end_ns)
        for c in range(a, b + 1):
            if agent[c][0] == " ":
                agent[c] = ("·", "yellow")
        text = fmt_ms(w.end_ns - w.start_ns)
        for i, ch in enumerate(text[: max(1, cols - a)]):
            labels[a + i] = ch
    out = Text()
    for name, row in (("caller", user), ("agent", agent)):
        out.append(f"{name:<{_LABEL}}", style="dim")
        for ch, style in row:
            out.append(ch, style=style or None)
        out.append("\n")
    out.append(" " * _LABEL + "".join(labels), style="yellow")
    stops = [" "] * cols
    for o in lanes.overlays:
        if o.kind != "interrupt" or (o.stop_ns is None and not o.never_stopped):
            continue
        text = f"stop {fmt_ms(o.stop_ns)}" if o.stop_ns is not None else "never stopped"
        a = col(o.start_ns)
        for i, ch in enumerate(text[: max(1, cols - a)]):
            stops[a + i] = ch
    if any(ch != " " for ch in stops):
        out.append("\n" + " " * _LABEL + "".join(stops), style="bold magenta")
    for o in lanes.overlays:  # each stop's waterfall, under the timeline
        if o.kind == "interrupt" and o.waterfall():
            line = f"turn {o.turn} stop {fmt_ms(o.stop_ns)} ms = {o.waterfall()}"
            out.append("\n" + " " * _LABEL + _clip(line, cols), style="magenta")
    return out


def _clip(text: str, most: int) -> str:
    one = " ".join(text.split())
    return one if len(one) <= most else one[: max(0, most - 1)] + "…"


def call_words_text(call_id: str, turns: Sequence[Turn], width: int = 72) -> Text:
    """One line per turn of ``call_id``, in call order: its index, the caller's words, the
    agent's (where the turn carries the reply text: an agent's turns do not) and its e2e, each
    line cut to ``width``. Empty when no turn has words (nothing to say)."""
    mine = sorted(
        (t for t in turns if t.extra.get(CALL_ID) == call_id),
        key=lambda t: int(t.extra.get(CALL_TURN) or 0),
    )
    out = Text()
    for t in mine:
        if not t.expected and not t.reply:
            continue
        head = f"{int(t.extra.get(CALL_TURN) or 0):>3}. "
        wait = f"  {fmt_ms(t.e2e_ns)} ms" if t.ok and t.e2e_ns is not None else "  failed"
        room = max(10, width - len(head) - len(wait))
        said_words = " ".join((t.expected or "").split())
        reply_words = " ".join((t.reply or "").split())
        quotes = 2 + (5 if reply_words else 0)  # “…” and, with a reply, “ → “…”
        if len(said_words) + len(reply_words) + quotes > room:  # each gets a share, both kept
            text_room = max(2, room - quotes)
            keep = max(text_room // 2, text_room - len(reply_words)) if reply_words else text_room
            said_words = _clip(said_words, keep)
            reply_words = _clip(reply_words, text_room - len(said_words))
        said = f"“{said_words}”" if said_words else "(no words)"
        answer = f" → “{reply_words}”" if reply_words else ""
        if out:
            out.append("\n")
        out.append(head, style="dim")
        out.append(said, style=USER_STYLE)
        out.append(answer, style=AGENT_STYLE)
        out.append(wait, style="yellow" if t.ok else FAILED_STYLE)
    return out


def calls_view(turns: Sequence[Turn], width: int = 72, most: int = 6) -> Group | None:
    """Each call's timeline (the first ``most``), or None for a run of single turns."""
    records = calls_from_turns(turns)
    if not records:
        return None
    parts: list[Text] = []
    for r in records[:most]:
        head = f"{r.call_id} ({r.scenario}): {r.turns_completed}/{r.turns_planned} turns ok"
        if r.greeting_ns is not None:
            head += f", greeting after {fmt_ms(r.greeting_ns)} ms"
        parts += [Text(head, style="bold"), call_timeline_text(call_lanes(r, turns), width)]
        words = call_words_text(r.call_id, turns, width)
        if words:
            parts.append(words)
    if len(records) > most:
        parts.append(Text(f"{len(records) - most} more call(s): voicelat view --html", style="dim"))
    return Group(*parts)
