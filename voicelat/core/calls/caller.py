"""A simulated caller, the pure part: its settings, its prompt, its lines and when it hangs up.

A scenario's ``[caller]`` (docs/CALLER.md) is a persona with a goal, spoken by an LLM through
a TTS voice: after each of the agent's replies the caller's LLM writes the next line, its TTS
renders it (once: the clip is cached by :func:`cache_key`), and the line is a measured turn
like a fixture's. Everything here is plain data and string work (no I/O): the settings
(:class:`CallerSpec`), the transcript the caller keeps (:class:`Exchange`), the prompt its
LLM gets (:func:`chat_messages`, :func:`completion_prompt`), cleaning what the LLM wrote
(:func:`clean_line`), the end condition (:func:`end_reason`), the results' lines
(:class:`CallerLine`) and the summary's ``caller`` section (:func:`caller_section`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from voicelat.core.base.stats import Distribution

__all__ = [
    "END_REASONS",
    "CallerLine",
    "CallerSpec",
    "EndReason",
    "Exchange",
    "cache_key",
    "caller_section",
    "chat_messages",
    "clean_line",
    "completion_prompt",
    "end_reason",
    "judge_messages",
    "judge_verdict",
    "said_goodbye",
    "system_prompt",
    "words_differ",
]

#: Why a simulated call ended: the caller reached its goal (its LLM said the goal token), the
#: agent said goodbye, the turn limit, the recorded lines of a ``--frozen`` replay ran out, or
#: the caller could not go on (its LLM or TTS failed: the record says why).
EndReason = Literal["goal", "goodbye", "limit", "frozen_end", "error"]
END_REASONS: tuple[str, ...] = ("goal", "goodbye", "limit", "frozen_end", "error")
Hearing = Literal["auto", "text", "stt", "both"]

#: The longest line a caller speaks (a runaway LLM is cut here, at a word).
MAX_LINE_CHARS = 300
#: Bumped when the rendering changes (trim, padding, rate): every cached clip is then new.
RENDER_VERSION = 1
#: Voice-table keys that say where the voice is, not what it sounds like.
_NOT_THE_VOICE = frozenset({"url", "base_url", "api_key_env"})
#: Words that end a call when the agent says them (whole words, any case).
_GOODBYE = re.compile(r"\b(good\s*-?\s*bye|bye(\s*-?\s*bye)?|farewell)\b", re.IGNORECASE)
#: What an LLM puts before a line it was asked to write as the caller.
_ROLE = re.compile(r"^\s*(caller|customer|user|me|you)\s*:\s*", re.IGNORECASE)


@dataclass(frozen=True)
class CallerSpec:
    """A scenario's ``[caller]`` (files/caller.py reads it; docs/CALLER.md has every key).

    ``llm``/``voice``/``stt``/``judge``: stage tables (an ``openai`` LLM, any TTS, any STT;
    an empty table means the embedded stack's defaults, filled in by the engine). ``hear``:
    how the caller learns what the agent said (``text``: the turn's reply text; ``stt``: the
    reply audio transcribed; ``auto``: the text where the turn has it, else the audio;
    ``both``: the text, and the audio transcribed too: a mismatch is recorded)."""

    persona: str
    goal: str = ""
    llm: Mapping[str, Any] = field(default_factory=dict)
    voice: Mapping[str, Any] = field(default_factory=dict)
    stt: Mapping[str, Any] = field(default_factory=dict)
    judge: Mapping[str, Any] | None = None
    hear: Hearing = "auto"
    max_turns: int = 6
    seed: int = 1
    gap_ms: int = 600
    goal_token: str = "[DONE]"
    end_on_goodbye: bool = True
    #: A fixed first line (rendered like the others); None: the LLM writes it too.
    opening: str | None = None
    #: A results directory whose caller lines this caller replays (``--frozen`` per scenario).
    frozen: str | None = None
    source: str = ""


@dataclass(frozen=True)
class Exchange:
    """One of the caller's turns as the caller knows it: what it said, what it heard back
    (None: nothing, the turn failed) and how it heard it (``text``, ``stt``, or ``none``)."""

    said: str
    heard: str | None = None
    heard_by: str = "none"


@dataclass(frozen=True)
class CallerLine:
    """One caller turn in the results (``conversation.jsonl``, the record's ``caller``).

    ``prep_ns``: how long the caller took to get the line ready before the turn (its LLM,
    its TTS or the cache, reading the clip): never part of the turn's figures, which start at
    the clip's first sample. ``cache_key``: the clip's key in the caller's cache."""

    call_id: str
    scenario: str
    call_turn: int
    text: str
    cache_key: str
    prep_ns: int
    llm_ns: int | None = None
    tts_ns: int | None = None
    cached: bool = False
    speech_start_ms: int | None = None
    speech_end_ms: int | None = None
    turn_index: int | None = None
    e2e_ns: int | None = None
    ok: bool | None = None
    agent_text: str | None = None
    heard_by: str = "none"
    #: The agent's reply text and the transcript of its audio, when both were had and differ.
    mismatch: str | None = None
    #: The sha256 of the clip's WAV (the bytes the turn played).
    sha256: str = ""

    def to_json(self) -> dict[str, Any]:
        """One ``conversation.jsonl`` line."""
        return {
            "call_id": self.call_id,
            "scenario": self.scenario,
            "call_turn": self.call_turn,
            "caller_text": self.text,
            "cache_key": self.cache_key,
            "prep_ns": self.prep_ns,
            "llm_ns": self.llm_ns,
            "tts_ns": self.tts_ns,
            "cached": self.cached,
            "speech_start_ms": self.speech_start_ms,
            "speech_end_ms": self.speech_end_ms,
            "turn_index": self.turn_index,
            "e2e_ns": self.e2e_ns,
            "ok": self.ok,
            "agent_text": self.agent_text,
            "heard_by": self.heard_by,
            "sha256": self.sha256,
            **({"mismatch": self.mismatch} if self.mismatch else {}),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> CallerLine:
        """A line read back from ``conversation.jsonl`` (``--frozen``)."""

        def opt_int(k: str) -> int | None:
            v = d.get(k)
            return v if isinstance(v, int) and not isinstance(v, bool) else None

        return cls(
            call_id=str(d.get("call_id", "")),
            scenario=str(d.get("scenario", "")),
            call_turn=int(d.get("call_turn") or 0),
            text=str(d.get("caller_text", "")),
            cache_key=str(d.get("cache_key", "")),
            prep_ns=int(d.get("prep_ns") or 0),
            llm_ns=opt_int("llm_ns"),
            tts_ns=opt_int("tts_ns"),
            cached=bool(d.get("cached")),
            speech_start_ms=opt_int("speech_start_ms"),
            speech_end_ms=opt_int("speech_end_ms"),
            turn_index=opt_int("turn_index"),
            e2e_ns=opt_int("e2e_ns"),
            ok=d.get("ok") if isinstance(d.get("ok"), bool) else None,
            agent_text=d.get("agent_text") if isinstance(d.get("agent_text"), str) else None,
            heard_by=str(d.get("heard_by", "none")),
            sha256=str(d.get("sha256", "")),
        )


# -- the prompt ----------------------------------------------------------------------------------
def system_prompt(spec: CallerSpec) -> str:
    """What the caller's LLM is told it is: the persona, the goal, how to talk on a phone
    line (one short spoken line, no stage directions) and the goal token."""
    goal = f"\nYour goal: {spec.goal.strip()}" if spec.goal.strip() else ""
    return (
        f"{spec.persona.strip()}{goal}\n"
        "You are the caller on a phone call with a voice agent. Reply with exactly one short "
        "spoken line (one or two sentences), in plain words: no names of speakers, no stage "
        "directions, no lists. "
        f"When your goal is reached, say a short goodbye and end your line with {spec.goal_token}."
    )


def chat_messages(
    spec: CallerSpec, greeting: str | None, exchanges: Sequence[Exchange]
) -> list[dict[str, str]]:
    """The caller LLM's chat messages: the system prompt, then the call so far seen from the
    caller's side (the agent is the ``user``, the caller's own lines are the ``assistant``),
    ending with what the agent said last (or a cue to speak first)."""
    messages = [{"role": "system", "content": system_prompt(spec)}]
    if greeting:
        messages.append({"role": "user", "content": greeting})
    for ex in exchanges:
        messages.append({"role": "assistant", "content": ex.said})
        messages.append({"role": "user", "content": ex.heard or "(silence: no answer)"})
    if len(messages) == 1:
        messages.append({"role": "user", "content": "(The call connects. You speak first.)"})
    return messages


def completion_prompt(spec: CallerSpec, greeting: str | None, exchanges: Sequence[Exchange]) -> str:
    """The same for a base model's completions endpoint: the system prompt, then ``Agent:`` /
    ``Caller:`` lines, ending with ``Caller:`` (stop the completion at the newline)."""
    lines = [system_prompt(spec), ""]
    if greeting:
        lines.append(f"Agent: {greeting}")
    for ex in exchanges:
        lines.append(f"Caller: {ex.said}")
        lines.append(f"Agent: {ex.heard or '(silence)'}")
    lines.append("Caller:")
    return "\n".join(lines)


def clean_line(raw: str, goal_token: str) -> tuple[str, bool]:
    """What the caller says of what its LLM wrote, and whether the goal token was in it: the
    first non-empty line, without a speaker prefix, quotes, bracketed directions or the token,
    whitespace collapsed, at most :data:`MAX_LINE_CHARS` (cut at a word)."""
    reached = bool(goal_token) and goal_token.lower() in raw.lower()
    text = raw
    if goal_token:
        text = re.sub(re.escape(goal_token), " ", text, flags=re.IGNORECASE)
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    first = _ROLE.sub("", first)
    first = re.sub(r"\[[^\]]*\]|\*[^*]*\*|\([^)]*\)", " ", first)  # directions: [laughs] *sighs*
    first = " ".join(first.split()).strip().strip("\"'“”‘’ ").strip()
    if len(first) > MAX_LINE_CHARS:
        cut = first[:MAX_LINE_CHARS]
        first = cut[: cut.rfind(" ")] if " " in cut else cut
    return first, reached


def words_differ(a: str, b: str) -> bool:
    """Whether two renderings of one reply say different words (case and punctuation
    aside): the agent's reply text against the transcript of its audio."""

    def norm(t: str) -> list[str]:
        return re.findall(r"[a-z0-9']+", t.lower())

    return norm(a) != norm(b)


# -- the end -------------------------------------------------------------------------------------
def said_goodbye(text: str | None) -> bool:
    """Whether the agent's words say goodbye (whole words: "bye", "goodbye", "good-bye")."""
    return bool(text) and _GOODBYE.search(text or "") is not None


def end_reason(
    spec: CallerSpec, turns_done: int, last_heard: str | None, goal_reached: bool
) -> EndReason | None:
    """Whether the call is over before the caller's next line: the goal reached (its last
    line carried the goal token), the agent said goodbye (when ``end_on_goodbye``), or the
    hard turn limit; None: the caller speaks again."""
    if goal_reached:
        return "goal"
    if spec.end_on_goodbye and turns_done > 0 and said_goodbye(last_heard):
        return "goodbye"
    if turns_done >= spec.max_turns:
        return "limit"
    return None


# -- the cache key -------------------------------------------------------------------------------
def cache_key(voice: Mapping[str, Any], text: str) -> str:
    """The clip's cache key: sha256 of the voice's settings (its stage table, keys sorted),
    the text and :data:`RENDER_VERSION`. Timeouts, addresses and key names are left out: they
    never change the audio, and a cache must serve the same voice on another host."""
    settings = {
        k: voice[k] for k in sorted(voice) if "timeout" not in k and k not in _NOT_THE_VOICE
    }
    doc = json.dumps(
        {"v": RENDER_VERSION, "voice": settings, "text": text}, sort_keys=True, default=str
    )
    return hashlib.sha256(doc.encode("utf-8")).hexdigest()


# -- the judge -----------------------------------------------------------------------------------
def judge_messages(
    spec: CallerSpec, greeting: str | None, exchanges: Sequence[Exchange]
) -> list[dict[str, str]]:
    """The judge's question: the goal and the call's transcript; answer YES or NO first."""
    lines = [f"Agent: {greeting}"] if greeting else []
    for ex in exchanges:
        lines.append(f"Caller: {ex.said}")
        lines.append(f"Agent: {ex.heard or '(no answer)'}")
    return [
        {
            "role": "system",
            "content": "You judge phone calls between a caller and a voice agent. Answer YES or "
            "NO on the first line (was the caller's goal reached?), then one sentence why.",
        },
        {
            "role": "user",
            "content": f"The caller's goal: {spec.goal or spec.persona}\n\nThe call:\n"
            + "\n".join(lines),
        },
    ]


def judge_verdict(answer: str) -> bool | None:
    """The judge's YES (True) or NO (False) from the start of its answer; None: neither."""
    m = re.match(r"\W*(yes|no)\b", answer, re.IGNORECASE)
    return None if m is None else m.group(1).lower() == "yes"


# -- the summary ---------------------------------------------------------------------------------
def caller_section(records: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The summary's ``caller`` section from the call records' ``extra["caller"]`` parts:
    calls by end reason, the caller's preparation time per turn (never in the turns'
    figures), cache hits, the judge's answers and up to 3 conversations (the text report
    prints them). None when no call had a simulated caller."""
    parts = [r for r in records if isinstance(r, Mapping)]
    if not parts:
        return None
    reasons = {k: 0 for k in END_REASONS}
    prep: list[int] = []
    cached = lines_n = mismatches = 0
    judged = {"yes": 0, "no": 0, "unclear": 0}
    for p in parts:
        reason = p.get("end_reason")
        if isinstance(reason, str):
            reasons[reason] = reasons.get(reason, 0) + 1
        for line in p.get("lines") or ():
            lines_n += 1
            if isinstance(line.get("prep_ns"), int):
                prep.append(line["prep_ns"])
            cached += bool(line.get("cached"))
            mismatches += bool(line.get("mismatch"))
        judge = p.get("judge")
        if isinstance(judge, Mapping):
            v = judge.get("goal_reached")
            judged["yes" if v is True else "no" if v is False else "unclear"] += 1
    return {
        "calls": len(parts),
        "end_reasons": {k: v for k, v in reasons.items() if v},
        "lines": lines_n,
        "cached": cached,
        "mismatches": mismatches,
        "prep": Distribution.of(prep).to_json(),
        **({"judge": judged} if sum(judged.values()) else {}),
        "conversations": [
            {
                "call_id": p.get("call_id"),
                "end_reason": p.get("end_reason"),
                "reason": p.get("reason"),
                "greeting": p.get("greeting"),
                "lines": [
                    {
                        k: line.get(k)
                        for k in ("call_turn", "caller_text", "agent_text", "e2e_ns", "prep_ns")
                    }
                    for line in p.get("lines") or ()
                ],
            }
            for p in parts[:3]
        ],
    }
