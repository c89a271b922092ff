"""The simulated caller, the I/O part: an LLM persona that talks to the agent in a rendered voice.

A scenario with a ``[caller]`` (docs/CALLER.md) runs as a call whose steps come from a
:class:`SimulatedCaller` (the call engine's :class:`~voicelat.engine.call.StepSource`): the
scenario's scripted steps first (an ``expect_greeting``, fixed ``say`` lines), then one line
at a time. Between turns, outside every turn's timed window (the engine awaits
:meth:`SimulatedCaller.next_step` before the next turn's input starts, and that input's first
sample is the turn's ``t0``), the caller

1. hears the agent's last reply: the turn's reply text where the turn has it (a cascade's
   LLM, a realtime model's transcript), else the reply audio the run saved, transcribed by
   its STT stage;
2. decides whether the call is over (:func:`voicelat.core.calls.caller.end_reason`: its goal
   token, the agent's goodbye, the hard turn limit);
3. writes its next line with its LLM (an ``openai``-compatible stage; temperature 0 and a
   seed unless told otherwise), or takes it from a recorded conversation (``--frozen``);
4. renders it once through its TTS, shaped like a fixture (:mod:`voicelat.audio.clip`) and
   cached by (voice, text) hash (:mod:`voicelat.engine.caller_cache`), so a rerun plays the
   same bytes; the clip's speech bounds are the turn's ground truth, as a fixture's are.

How long 1-4 took is the line's ``prep_ns`` (the call record's ``caller`` part and
``conversation.jsonl``), never part of a turn. File work runs on threads; the caller's
network I/O shares the loop with other calls' turns only under ``--concurrency``.
:class:`SimulatedCallers` holds the run's caller stages, makes one source per call and
writes ``conversation.jsonl``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from voicelat.audio import PCM, frames, load_for_stage
from voicelat.audio.clip import shape_clip
from voicelat.core.base.errors import InfraError, VoicelatError
from voicelat.core.base.secrets import scrub_secrets
from voicelat.core.base.turn import Turn
from voicelat.core.calls.call import CallRecord, Step
from voicelat.core.calls.caller import (
    CallerLine,
    CallerSpec,
    EndReason,
    Exchange,
    cache_key,
    chat_messages,
    clean_line,
    completion_prompt,
    end_reason,
    judge_messages,
    judge_verdict,
    words_differ,
)
from voicelat.core.calls.conversation import Conversation, Message
from voicelat.core.measure.clock import Clock, MonotonicClock
from voicelat.core.measure.events import Audio, Delta, Failed, Final, Partial
from voicelat.engine.call import CallView, PlannedCall, SourcedStep
from voicelat.engine.caller_cache import CachedClip, ClipCache, CorruptEntry
from voicelat.engine.turn_input import FRAME_MS, TurnInput
from voicelat.files.fixtures import Fixture

__all__ = [
    "CONVERSATION_FILE",
    "CallerError",
    "CallerOptions",
    "SimulatedCaller",
    "SimulatedCallers",
    "caller_tables",
    "callers_for_run",
    "default_caller_cache",
    "read_conversation",
]

#: The conversation of every simulated call, one caller line a line (``--frozen`` reads it).
CONVERSATION_FILE = "conversation.jsonl"
#: The default caller voice: espeak-ng (the ``local`` extra), never the reply voice (piper's
#: joe), as the bundled call fixtures (fixtures/calls/) are.
DEFAULT_VOICE: Mapping[str, Any] = {"stage": "espeak-tts", "voice": "en-us+m3"}
#: The longest the caller's LLM, TTS or STT may take for one line before the call ends.
_STEP_TIMEOUT_S = 120.0


class CallerError(Exception):
    """The caller cannot go on (its LLM or TTS failed, an empty line, a silent render);
    ``str()`` is the call's one-line reason."""


@dataclass(frozen=True)
class CallerOptions:
    """What the run tells its callers: where results go (``conversation.jsonl``, and the
    saved reply audio the STT hears), the clip cache, a recorded run to replay, and where a
    warning line goes."""

    out_dir: Path
    cache_dir: Path | None = None
    frozen: Path | None = None
    warn: Callable[[str], None] = field(default=lambda _msg: None)
    #: Whether ``hear = "auto"`` may need the STT (an agent's turns carry no reply text).
    auto_hears_audio: bool = False
    #: Replay the lines another caller spoke, handed over call by call (:meth:`SimulatedCallers.
    #: replay`; compare's other combinations): the LLM is never asked, as with ``frozen``.
    follow: bool = False


def default_caller_cache() -> Path:
    """``$VOICELAT_CACHE/caller`` (default ``~/.cache/voicelat/caller``)."""
    from voicelat.stack.config import default_cache_dir

    return default_cache_dir() / "caller"


def caller_tables(spec: CallerSpec) -> dict[str, dict[str, Any]]:
    """The caller's stage tables with the defaults filled in: its LLM (the embedded stack's
    llama.cpp model, a base model prompted by completions, unless a ``base_url`` is given:
    then chat), its voice (espeak-ng), its STT (the stack's Whisper) and its judge (the
    caller's LLM unless it names its own)."""
    from voicelat.stack import StackConfig

    cfg = StackConfig()
    llm: dict[str, Any] = {"stage": "openai", "temperature": 0.0, "seed": spec.seed}
    if "base_url" not in spec.llm:
        llm |= {"base_url": f"{cfg.llm_url}/v1", "endpoint": "completions"}
        llm |= {"model": "gemma-3-270m", "stop": ["\n"], "max_tokens": 48}
    else:
        llm |= {"endpoint": "chat", "max_tokens": 80}
    llm |= dict(spec.llm)
    llm["stream"] = True
    voice = dict(spec.voice) if spec.voice else dict(DEFAULT_VOICE)
    voice.setdefault("stage", "espeak-tts")
    stt = {"stage": "wyoming-stt", **dict(spec.stt)}
    judge = None if spec.judge is None else {**llm, **dict(spec.judge)}
    urls = {"tts": cfg.tts_url, "stt": cfg.stt_url}
    for kind, table in (("tts", voice), ("stt", stt)):
        _stack_url(kind, table, urls[kind])
    llm.pop("stream")
    if judge is not None:
        judge.pop("stream", None)
    return {"llm": llm, "voice": voice, "stt": stt, **({"judge": judge} if judge else {})}


def _stack_url(kind: str, table: dict[str, Any], url: str) -> None:
    from voicelat.stages.base import load_stage_class

    cls = load_stage_class(str(table["stage"]), kind)  # type: ignore[arg-type]
    key = getattr(cls, "stack_url_option", None)
    if key:
        table.setdefault(key, url)


def read_conversation(run_dir: Path) -> list[CallerLine]:
    """The caller lines a run recorded (its ``conversation.jsonl``); ConfigError when there
    is none. Blocking: call it from a thread."""
    from voicelat.core.base.errors import ConfigError

    path = run_dir / CONVERSATION_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        raise ConfigError(
            f"--frozen {run_dir}: no {CONVERSATION_FILE} there (a run with a simulated "
            "caller writes one)"
        ) from None
    out = []
    for line in text.splitlines():
        with contextlib.suppress(ValueError, TypeError):
            doc = json.loads(line)
            if isinstance(doc, dict):
                out.append(CallerLine.from_json(doc))
    return out


# -- one spec's stages ---------------------------------------------------------------------------
class _Stages:
    """One caller spec's stages: its LLM (None when every call replays a recording), its TTS
    its STT and judge (entered with the others when the calls need them). One STT transcription and (unless it is an
    HTTP stage) one TTS render at a time: the wait is the caller's, in its preparation time."""

    def __init__(self, spec: CallerSpec, tables: dict[str, dict[str, Any]], clock: Clock) -> None:
        self.spec, self.tables, self.clock = spec, tables, clock
        self.llm: Any = None
        self.tts: Any = None
        self._stt: Any = None
        self._judge: Any = None
        self.tts_lock = asyncio.Lock()
        self.stt_lock = asyncio.Lock()
        self._stack = contextlib.AsyncExitStack()

    def _build(self, kind: str, key: str, table: Mapping[str, Any], **extra: Any) -> Any:
        from voicelat.stages.base import load_stage_class, use_clock

        cls = load_stage_class(str(table["stage"]), kind)  # type: ignore[arg-type]
        stage = cls({**table, **extra}, table=f"caller.{key}")
        use_clock(stage, self.clock)
        return stage

    async def _enter(self, what: str, stage: Any) -> Any:
        try:
            async with asyncio.timeout(_STEP_TIMEOUT_S):
                return await self._stack.enter_async_context(stage)
        except (VoicelatError, OSError, TimeoutError) as exc:
            raise InfraError(
                f"the simulated caller's {what} ({_where(stage)}) cannot be used: "
                f"{_one_line(exc) or 'no answer'} ({self.spec.source})"
            ) from None

    def _llm_extra(self, table: Mapping[str, Any], system: str | None) -> dict[str, Any]:
        if table.get("endpoint", "chat") == "completions":
            return {"prompt_template": "{text}"}
        return {} if system is None else {"system": system}

    async def open(self, *, need_llm: bool, need_stt: bool) -> None:
        """Enter the stages the calls will use, before any turn: a client's set-up (an SSL
        context is ~40 ms of CPU) never stalls the loop while another call's turn is timed."""
        from voicelat.core.calls.caller import system_prompt

        t = self.tables
        if need_llm:
            extra = self._llm_extra(t["llm"], system_prompt(self.spec))
            self.llm = await self._enter("LLM", self._build("llm", "llm", t["llm"], **extra))
        self.tts = await self._enter("TTS", self._build("tts", "voice", t["voice"]))
        if need_stt:
            await self.stt()
        if "judge" in t:
            await self.judge()

    def tts_turn(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """One render at a time on a TTS that holds one engine or connection (a worker, a
        socket); an HTTP one takes concurrent requests (its client pools connections)."""
        from voicelat.stages.http import HttpStage

        return contextlib.nullcontext() if isinstance(self.tts, HttpStage) else self.tts_lock

    async def stt(self) -> Any:
        async with self.stt_lock:
            if self._stt is None:
                self._stt = await self._enter("STT", self._build("stt", "stt", self.tables["stt"]))
        return self._stt

    async def judge(self) -> Any:
        if self._judge is None:
            table = self.tables["judge"]
            system = judge_messages(self.spec, None, ())[0]["content"]
            stage = self._build("llm", "judge", table, **self._llm_extra(table, system))
            self._judge = await self._enter("judge", stage)
        return self._judge

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._stack.aclose()


def _where(stage: Any) -> str:
    url = getattr(stage, "base_url", None) or getattr(stage, "url", None)
    return str(url) if url else type(stage).__name__


def _one_line(exc: BaseException) -> str:
    return scrub_secrets(" ".join(str(exc).split()))


# -- the run's callers -----------------------------------------------------------------------------
class SimulatedCallers:
    """The run's simulated callers: the stages of each caller spec (entered with ``async
    with``, before any turn), one :class:`SimulatedCaller` a call (:meth:`source`), each
    call's results on its record (:meth:`finished`), the judge (:meth:`settle`) and
    ``conversation.jsonl`` (written on exit, whatever happened: every finished line kept)."""

    def __init__(
        self, options: CallerOptions, calls: Sequence[PlannedCall], clock: Clock | None = None
    ) -> None:
        self.options = options
        self.clock: Clock = clock if clock is not None else MonotonicClock()
        self.cache = ClipCache(options.cache_dir or default_caller_cache())
        self._calls = [c for c in calls if c.scenario.caller is not None]
        self._stages: dict[int, _Stages] = {}
        self._frozen: dict[str, list[CallerLine]] = {}
        self._frozen_by_scenario: dict[str, list[CallerLine]] = {}
        self.lines: list[CallerLine] = []
        self._warned: set[str] = set()
        self._key_locks: dict[str, asyncio.Lock] = {}
        self._running: list[SimulatedCaller] = []
        for c in self._calls:
            spec = c.scenario.caller
            assert spec is not None
            if id(spec) not in self._stages:
                self._stages[id(spec)] = _Stages(spec, caller_tables(spec), self.clock)

    def key_lock(self, key: str) -> asyncio.Lock:
        """The lock of one clip's rendering."""
        return self._key_locks.setdefault(key, asyncio.Lock())

    def warn(self, msg: str) -> None:
        """One warning line per distinct message."""
        if msg not in self._warned:
            self._warned.add(msg)
            self.options.warn(f"warning: {msg}")

    def _frozen_dir(self, spec: CallerSpec) -> Path | None:
        return self.options.frozen or (Path(spec.frozen) if spec.frozen else None)

    async def __aenter__(self) -> SimulatedCallers:
        try:
            for stages in self._stages.values():
                folder = self._frozen_dir(stages.spec)
                if folder is not None:
                    await self._read_frozen(folder)
                hear = stages.spec.hear
                need_stt = hear in ("stt", "both") or (
                    hear == "auto" and self.options.auto_hears_audio
                )
                live = folder is None and not self.options.follow
                await stages.open(need_llm=live, need_stt=need_stt)
        except BaseException:
            await self._close_stages()
            raise
        return self

    async def _read_frozen(self, folder: Path) -> None:
        for line in await asyncio.to_thread(read_conversation, folder):
            self._frozen.setdefault(line.call_id, []).append(line)
        for call_id, lines in self._frozen.items():
            lines.sort(key=lambda ln: ln.call_turn)
            if lines:
                self._frozen_by_scenario.setdefault(lines[0].scenario, lines)
            del call_id

    async def __aexit__(self, *exc: object) -> None:
        # Calls cut short (Ctrl-C, a failure elsewhere): their lines so far are kept too.
        for source in self._running:
            self.lines.extend(source.lines)
        self._running.clear()
        await self._close_stages()
        try:
            await asyncio.to_thread(self._write_conversation)
        except OSError as err:
            self.warn(f"{CONVERSATION_FILE} could not be written: {err.strerror or err}")

    async def _close_stages(self) -> None:
        for stages in self._stages.values():
            await stages.close()

    def _write_conversation(self) -> None:
        self.options.out_dir.mkdir(parents=True, exist_ok=True)
        path = self.options.out_dir / CONVERSATION_FILE
        tmp = path.with_suffix(".jsonl.tmp")
        body = "".join(json.dumps(ln.to_json()) + "\n" for ln in self.lines)
        tmp.write_text(scrub_secrets(body), encoding="utf-8")
        os.replace(tmp, path)

    def source(self, planned: PlannedCall, rate: int) -> SimulatedCaller | None:
        """The step source of ``planned`` (None: its scenario has no caller); ``rate``: the
        hearing stage's input rate (the clips are prepared at it)."""
        spec = planned.scenario.caller
        if spec is None:
            return None
        frozen = None
        if self.options.follow:  # what the first combination's caller said on this call
            frozen = self._frozen.get(planned.call_id, [])
        elif self._frozen_dir(spec) is not None:
            frozen = self._frozen.get(planned.call_id) or self._frozen_by_scenario.get(
                planned.scenario.name, []
            )
        made = SimulatedCaller(self, self._stages[id(spec)], planned, rate, frozen)
        self._running.append(made)
        return made

    def replay(self, call_id: str, lines: Sequence[CallerLine]) -> None:
        """``lines`` (another caller's, on the same call) are what this run's caller says on
        ``call_id``, in order, whatever its agent answers (``follow``: compare --scenario)."""
        self._frozen[call_id] = sorted(lines, key=lambda ln: ln.call_turn)

    def finished(self, source: SimulatedCaller, record: CallRecord) -> CallRecord:
        """``record`` with the caller's part: the end reason, its lines (each with the turn's
        e2e and the caller's preparation time) and the turns it planned."""
        if source in self._running:
            self._running.remove(source)
        self.lines.extend(source.lines)
        planned = len(source.planned.scenario.says) + len(source.lines)
        return replace(
            record, turns_planned=planned, extra=record.extra | {"caller": source.part()}
        )

    async def settle(self, records: Sequence[CallRecord]) -> list[CallRecord]:
        """After every call: the judge's answer on each simulated call whose caller has a
        judge (never part of any latency: no turn is running)."""
        out = []
        for record in records:
            part = record.extra.get("caller")
            spec = _spec_of(self._calls, record.call_id)
            if not isinstance(part, dict) or spec is None or spec.judge is None:
                out.append(record)
                continue
            verdict = await self._judge(self._stages[id(spec)], spec, part)
            out.append(replace(record, extra=record.extra | {"caller": part | {"judge": verdict}}))
        return out

    async def _judge(
        self, stages: _Stages, spec: CallerSpec, part: dict[str, Any]
    ) -> dict[str, Any]:
        exchanges = [
            Exchange(str(ln.get("caller_text", "")), ln.get("agent_text"))
            for ln in part.get("lines") or ()
        ]
        messages = judge_messages(spec, part.get("greeting"), exchanges)
        try:
            judge = await stages.judge()
            table = stages.tables["judge"]
            if table.get("endpoint", "chat") == "completions":
                prompt: str | Conversation = "\n".join(m["content"] for m in messages) + "\nAnswer:"
            else:
                prompt = Conversation((), messages[-1]["content"])
            answer = await _complete(judge, prompt, "judge")
        except (CallerError, VoicelatError) as exc:
            self.warn(f"the caller's judge: {_one_line(exc)}")
            return {"goal_reached": None, "answer": None, "error": _one_line(exc)}
        return {"goal_reached": judge_verdict(answer), "answer": answer.strip()[:500]}


def _spec_of(calls: Sequence[PlannedCall], call_id: str) -> CallerSpec | None:
    return next((c.scenario.caller for c in calls if c.call_id == call_id), None)


async def _complete(llm: Any, prompt: str | Conversation, what: str) -> str:
    """The whole text of one completion; CallerError when the stage fails."""
    parts: list[str] = []
    async with asyncio.timeout(_STEP_TIMEOUT_S):
        async for ev in llm.complete(prompt):
            if isinstance(ev, Delta):
                parts.append(ev.content)
            elif isinstance(ev, Failed):
                raise CallerError(f"the caller's {what} failed: {ev.reason}")
    return "".join(parts)


async def _once(text: str) -> AsyncIterator[str]:
    yield text


# -- one call's caller -----------------------------------------------------------------------------
class SimulatedCaller:
    """One call's caller (a :class:`~voicelat.engine.call.StepSource`): the scenario's
    scripted steps, then its lines until the call is over."""

    def __init__(
        self,
        run: SimulatedCallers,
        stages: _Stages,
        planned: PlannedCall,
        rate: int,
        frozen: list[CallerLine] | None,
    ) -> None:
        spec = planned.scenario.caller
        assert spec is not None
        self.run, self.stages, self.spec, self.planned, self.rate = run, stages, spec, planned, rate
        self.frozen = frozen
        self._scripted = list(planned.scenario.steps)
        self.exchanges: list[Exchange] = []
        self.lines: list[CallerLine] = []
        self._pending: int | None = None  # len(view.turns) when our last line was handed over
        self._goal = False
        self.end: EndReason | None = None
        self.reason: str | None = None
        self.greeting: str | None = None

    def part(self) -> dict[str, Any]:
        """The call record's ``caller`` part."""
        return {
            "call_id": self.planned.call_id,
            "end_reason": self.end or "error",
            "reason": self.reason if self.end in (None, "error") else None,
            "frozen": self.frozen is not None,
            "greeting": self.greeting,
            "lines": [ln.to_json() for ln in self.lines],
        }

    async def next_step(self, view: CallView) -> SourcedStep | None:
        """The next scripted step, else the caller's next line (None: the call is over)."""
        if self._scripted:
            return SourcedStep(self._scripted.pop(0))
        clock = self.run.clock
        t0 = clock.now_ns()
        try:
            self.greeting = view.greeting
            await self._hear(view)
            if self.end is not None:
                return None
            turns_done = len(self.lines)
            last = self.exchanges[-1].heard if self.exchanges else None
            if self.frozen is not None:
                ended: EndReason | None = "limit" if turns_done >= self.spec.max_turns else None
                if ended is None and turns_done >= len(self.frozen):
                    ended = "frozen_end"
            else:
                ended = end_reason(self.spec, turns_done, last, self._goal)
            if ended is not None:
                self.end = ended
                return None
            return await self._line(view, t0)
        except asyncio.CancelledError:
            raise
        except _GoalWithoutWords:
            self.end = "goal"
            return None
        except (CallerError, VoicelatError, OSError, TimeoutError) as exc:
            reason = _one_line(exc) or type(exc).__name__
            if isinstance(exc, TimeoutError):
                reason = f"the caller took more than {_STEP_TIMEOUT_S:g} s to get its line ready"
            self.end, self.reason = "error", reason
            self.run.warn(f"{self.planned.call_id}: the simulated caller stopped: {reason}")
            return None

    # -- hearing the agent ---------------------------------------------------------------------
    async def _hear(self, view: CallView) -> None:
        """Fill in the turn our last line became: its index, e2e and what the agent said."""
        if self._pending is None or len(view.turns) <= self._pending:
            return
        turn = view.turns[self._pending]
        self._pending = None
        heard, by, mismatch = await self._heard(turn)
        line = self.lines[-1]
        self.lines[-1] = replace(
            line,
            turn_index=turn.index,
            e2e_ns=turn.e2e_ns,
            ok=turn.ok,
            agent_text=heard,
            heard_by=by,
            mismatch=mismatch,
        )
        self.exchanges[-1] = replace(self.exchanges[-1], heard=heard, heard_by=by)

    async def _heard(self, turn: Turn) -> tuple[str | None, str, str | None]:
        """What the agent said in ``turn``, how it was heard, and (``both``) how its text and
        its audio's transcript differ."""
        hear = self.spec.hear
        if hear in ("auto", "text") and turn.reply:
            return turn.reply, "text", None
        if hear == "text":
            return None, "none", None
        path = self.run.options.out_dir / "audio" / f"turn-{turn.index:04d}-{turn.fixture}.wav"
        if not await asyncio.to_thread(path.is_file):
            if hear in ("stt", "both"):
                self.run.warn(f"the caller hears by STT but the reply audio {path} is not saved")
            return (turn.reply or None), ("text" if turn.reply else "none"), None
        text = await self._transcribe(path) or None
        if hear == "both" and turn.reply:
            differ = text is not None and words_differ(turn.reply, text)
            mismatch = f"text {turn.reply!r} vs audio {text!r}" if differ or text is None else None
            return turn.reply, "text+stt", mismatch
        return text, "stt", None

    async def _transcribe(self, path: Path) -> str:
        stt = await self.stages.stt()
        pcm = await asyncio.to_thread(load_for_stage, path, int(stt.input_rate))
        chunks = frames(pcm, FRAME_MS)

        async def audio() -> AsyncIterator[bytes]:
            for chunk in chunks:
                yield chunk

        finals: list[str] = []
        partial = ""
        async with self.stages.stt_lock, asyncio.timeout(_STEP_TIMEOUT_S):
            async for ev in stt.transcribe(audio()):
                if isinstance(ev, Final) and ev.text.strip():
                    finals.append(ev.text.strip())
                elif isinstance(ev, Partial) and ev.text.strip():
                    partial = ev.text.strip()
                elif isinstance(ev, Failed):
                    raise CallerError(f"the caller's STT failed: {ev.reason}")
        return " ".join(finals) or partial

    # -- the next line ---------------------------------------------------------------------------
    async def _line(self, view: CallView, t0: int) -> SourcedStep:
        clock = self.run.clock
        n = len(self.lines) + 1
        llm_ns: int | None = None
        if self.frozen is not None:
            text = self.frozen[n - 1].text
        elif n == 1 and self.spec.opening:
            text = self.spec.opening
        else:
            t = clock.now_ns()
            text = await self._write(view)
            llm_ns = clock.now_ns() - t
        t = clock.now_ns()
        clip, cached = await self._clip(text)
        tts_ns = None if cached else clock.now_ns() - t
        fixture = Fixture(
            id=f"caller-{clip.key[:16]}",
            path=clip.path,
            text=text,
            speech_start_ms=clip.speech_start_ms,
            speech_end_ms=clip.speech_end_ms,
            sha256=clip.sha256,
            voice=str(
                self.stages.tables["voice"].get("voice") or self.stages.tables["voice"]["stage"]
            ),
        )
        inp = await asyncio.to_thread(TurnInput.from_fixture, fixture, self.rate)
        self.exchanges.append(Exchange(text))
        self.lines.append(
            CallerLine(
                call_id=self.planned.call_id,
                scenario=self.planned.scenario.name,
                call_turn=len(view.turns) + 1,
                text=text,
                cache_key=clip.key,
                prep_ns=clock.now_ns() - t0,
                llm_ns=llm_ns,
                tts_ns=tts_ns,
                cached=cached,
                speech_start_ms=clip.speech_start_ms,
                speech_end_ms=clip.speech_end_ms,
                sha256=clip.sha256,
            )
        )
        self._pending = len(view.turns)
        step = Step(
            "say",
            fixture=fixture.id,
            gap_ms=self.spec.gap_ms,
            line=f"{self.spec.source}: caller line {n}",
        )
        return SourcedStep(step, inp)

    async def _write(self, view: CallView) -> str:
        """The caller LLM's next line (the goal token noted)."""
        table = self.stages.tables["llm"]
        if table.get("endpoint", "chat") == "completions":
            prompt: str | Conversation = completion_prompt(self.spec, view.greeting, self.exchanges)
        else:
            msgs = chat_messages(self.spec, view.greeting, self.exchanges)[
                1:
            ]  # system: the stage's
            history = tuple(Message(m["role"], m["content"]) for m in msgs[:-1])  # type: ignore[arg-type]
            prompt = Conversation(history, msgs[-1]["content"])
        raw = await _complete(self.stages.llm, prompt, "LLM")
        text, reached = clean_line(raw, self.spec.goal_token)
        self._goal = reached
        if not text:
            if reached:
                raise _GoalWithoutWords
            raise CallerError(
                "the caller's LLM wrote an empty line"
                + (f" ({raw.strip()[:60]!r})" if raw.strip() else "")
            )
        return text

    async def _clip(self, text: str) -> tuple[CachedClip, bool]:
        """The line's clip from the cache, else rendered and stored; (clip, from the cache)."""
        voice = self.stages.tables["voice"]
        key = cache_key(voice, text)
        if self.frozen is not None:
            recorded = self.frozen[len(self.lines)].cache_key
            if recorded and recorded != key:
                self.run.warn(
                    "--frozen: the caller's voice differs from the recorded run's: its lines "
                    "are rendered in the voice configured now"
                )
        # One render of a line at a time in the run: calls at once that say the same line
        # wait for the first one's clip.
        async with self.run.key_lock(key):
            return await self._clip_of(key, text, voice)

    async def _clip_of(
        self, key: str, text: str, voice: Mapping[str, Any]
    ) -> tuple[CachedClip, bool]:
        cache = self.run.cache
        try:
            found = await asyncio.to_thread(cache.load, key)
        except CorruptEntry as exc:
            self.run.warn(f"caller cache: {exc}: rendering the line again")
            found = None
        if found is not None:
            return found, True
        pcm = await self._render(text)
        clip = await asyncio.to_thread(shape_clip, pcm)
        if clip is None:
            raise CallerError(f"the caller's TTS rendered silence for {text[:60]!r}")
        return await asyncio.to_thread(cache.store, key, clip, text, voice), False

    async def _render(self, text: str) -> PCM:
        tts = self.stages.tts
        pieces: list[bytes] = []
        rate: int | None = None
        async with self.stages.tts_turn(), asyncio.timeout(_STEP_TIMEOUT_S):
            async for ev in tts.synthesize(_once(text)):
                if isinstance(ev, Audio) and ev.pcm:
                    if rate is not None and ev.rate != rate:
                        raise CallerError("the caller's TTS changed its sample rate mid-line")
                    rate = ev.rate
                    pieces.append(ev.pcm)
                elif isinstance(ev, Failed):
                    raise CallerError(f"the caller's TTS failed: {ev.reason}")
        if rate is None or not pieces:
            raise CallerError(f"the caller's TTS returned no audio for {text[:60]!r}")
        data = b"".join(pieces)
        return PCM(data[: len(data) // 2 * 2], rate)


class _GoalWithoutWords(CallerError):
    """The LLM said only the goal token: the goal is reached, nothing more to say."""


def callers_for_run(
    args: Any,
    pipeline: Any,
    calls: Sequence[PlannedCall],
    out_dir: Path,
    warn: Callable[[str], None],
    *,
    follow: bool = False,
) -> tuple[Any, SimulatedCallers]:
    """The run's callers from the options (``--caller-cache DIR``, ``--frozen RUN``) and the
    pipeline they need: one that saves its reply audio when a caller may hear the agent by
    STT (``hear = "stt"``, or ``auto`` on an agent, whose turns carry no reply text until
    its trace is read after the call)."""
    specs = [c.scenario.caller for c in calls if c.scenario.caller is not None]
    agent = getattr(pipeline, "agent", None) is not None
    hears_audio = any(s.hear in ("stt", "both") or (s.hear == "auto" and agent) for s in specs)
    if hears_audio and not pipeline.output.save_audio:
        pipeline = replace(pipeline, output=replace(pipeline.output, save_audio=True))
    cache = getattr(args, "caller_cache", None)
    frozen = getattr(args, "frozen", None)
    from voicelat.core.base.errors import ConfigError

    # A replay's recording is checked now, before any server starts (exit 2, one line).
    for folder, who in [(frozen, "--frozen"), *((s.frozen, s.source) for s in specs)]:
        if folder is not None and not (Path(folder) / CONVERSATION_FILE).is_file():
            raise ConfigError(
                f"{who}: {folder} has no {CONVERSATION_FILE} (the results of a run with a "
                "simulated caller hold one)"
            )
    options = CallerOptions(
        out_dir,
        cache_dir=Path(cache) if cache is not None else None,
        frozen=Path(frozen) if frozen is not None else None,
        warn=warn,
        auto_hears_audio=agent,
        follow=follow,
    )
    return pipeline, SimulatedCallers(options, calls)
