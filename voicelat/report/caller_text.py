"""The simulated caller in the text report: how its calls ended, how long it took to get each
line ready (never part of a turn) and the first conversations, both sides, turn by turn."""

from __future__ import annotations

from collections.abc import Mapping

from voicelat.core.base.display import fmt_ms

__all__ = ["caller_lines"]

#: The longest a quoted line gets in the report (the full text is in conversation.jsonl).
_QUOTE = 70


def _quote(text: object) -> str:
    s = " ".join(str(text or "").split())
    return f'"{s[: _QUOTE - 1]}…"' if len(s) > _QUOTE else f'"{s}"'


def caller_lines(section: object) -> list[str]:
    """The summary's ``caller`` section (core/calls/caller.py ``caller_section``) as lines; none
    for a run without a simulated caller."""
    if not isinstance(section, Mapping):
        return []
    reasons = section.get("end_reasons") or {}
    ended = ", ".join(f"{k} {v}" for k, v in reasons.items()) or "none"
    prep = section.get("prep") or {}
    n_calls = section.get("calls", 0)
    lines = [
        f"caller: {n_calls} call{'s' if n_calls != 1 else ''} ended by {ended}; "
        f"{section.get('lines', 0)} lines ({section.get('cached', 0)} from the cache); "
        f"preparation P50 {fmt_ms(prep.get('p50'))} ms  max {fmt_ms(prep.get('max'))} ms "
        "(before each turn, never in its figures)"
    ]
    if section.get("mismatches"):
        lines.append(
            f"  {section['mismatches']} transcript mismatches: the agent's reply text and its "
            "audio's transcript differ (conversation.jsonl `mismatch`)"
        )
    judge = section.get("judge")
    if isinstance(judge, Mapping):
        lines.append(
            f"  judge: goal reached {judge.get('yes', 0)}, not {judge.get('no', 0)}, "
            f"unclear {judge.get('unclear', 0)}"
        )
    for conv in section.get("conversations") or ():
        if not isinstance(conv, Mapping):
            continue
        why = f": {conv['reason']}" if conv.get("reason") else ""
        lines.append(f"  {conv.get('call_id')} (ended: {conv.get('end_reason')}{why})")
        if conv.get("greeting"):
            lines.append(f"    agent  {_quote(conv['greeting'])}")
        for ln in conv.get("lines") or ():
            lines.append(
                f"    {ln.get('call_turn')}. caller {_quote(ln.get('caller_text'))}  "
                f"(prep {fmt_ms(ln.get('prep_ns'))} ms)"
            )
            agent = _quote(ln.get("agent_text")) if ln.get("agent_text") else "(nothing heard)"
            lines.append(f"       agent  {agent}  e2e {fmt_ms(ln.get('e2e_ns'))} ms")
    return lines
