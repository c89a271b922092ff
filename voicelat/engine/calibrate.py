"""``--calibrate off|quick|full``: the run's instrument error bar, measured on this host.

Before the measured turns (and with ``full`` also after them) a known-delay reference runs:
an in-process OpenAI emulator (its own event loop on a thread, exact fixed delays) answers a
few turns of a short synthetic utterance, run by the same :class:`~voicelat.engine.runner.Runner`
and turn engine on the same clock as the run. The emulator stamps the moment it handed each
first token / first audio byte to the socket; voicelat's stamps minus those are the
measurement error (``core/summaries/instrument.py`` computes it, with the clock's rate check).

A calibration that fails (the emulator cannot start, every reference turn failed, a stall,
an absurd error) never stops the run: the summary's ``instrument`` section then says
``"uncalibrated"`` and why. Cost: ~1 s per reference turn plus the emulator's start
(docs/BENCHMARKS.md, "The instrument error bar").
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from voicelat.core.base.errors import ConfigError
from voicelat.core.base.turn import Turn
from voicelat.core.measure.clock import Clock, MonotonicClock
from voicelat.core.summaries.instrument import (
    KINDS,
    ReferenceTurn,
    TruthExchange,
    calibrated_section,
    clock_ppm,
    reference_errors,
    uncalibrated_section,
)

__all__ = [
    "DEFAULT_MODE",
    "ENV",
    "MODES",
    "REFERENCE_PROFILE",
    "Calibration",
    "calibration_for",
    "reference_errors_of",
]

#: ``--calibrate``'s choices: no reference, one before the turns, one before and one after.
MODES: tuple[str, ...] = ("off", "quick", "full")
#: What a run does when it is not told (``voicelat run`` and every command built on the job).
DEFAULT_MODE = "quick"
#: The environment variable that sets the mode of runs that do not pass ``--calibrate``.
ENV = "VOICELAT_CALIBRATE"
#: Reference turns per pass (no warm-up: the session opens its connections before the first,
#: and an error against the truth leaves the connection set-up out).
TURNS = 3
#: A reference pass that takes longer than this is abandoned (the run goes on uncalibrated).
TIMEOUT_S = 30.0
_KEY_ENV = "VOICELAT_CALIBRATION_KEY"
_TTS_RATE = 24000
#: The reference's exact delays (ms) and content: short, so a pass costs ~1 s a turn.
REFERENCE_PROFILE: dict[str, Any] = {
    "openai": {
        "latency": {"headers": 5, "ttft": 40, "token": 5, "stt_first": 20, "stt_final": 40,
                    "tts_first_audio": 30, "tts_chunk": 5},
        "content": {"reply": "Sure.", "transcripts": "canned", "leading_silence_ms": 30.0,
                    "ms_per_char": 10.0},
    }
}  # fmt: skip


class Calibration:
    """The run's reference passes and its ``instrument`` section.

    ``clock``: the run's clock (every reference stamp is taken on it, as the run's are);
    ``log``: where a failed pass says why (one line)."""

    def __init__(
        self,
        mode: str,
        clock: Clock | None = None,
        log: Callable[[str], None] = lambda _: None,
        turns: int = TURNS,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"calibrate mode must be one of {', '.join(MODES)}, not {mode!r}")
        self.mode = mode
        self.clock = clock or MonotonicClock()
        self.log = log
        self.turns = turns
        self.errors: dict[str, list[int]] = {k: [] for k in KINDS}
        self.failure: str | None = None
        self.ran = 0
        self.cost_s = 0.0
        self._anchor = (time.time_ns(), time.perf_counter_ns())

    async def before(self) -> None:
        """The pass before the measured turns (none when ``off``); starts the clock check."""
        self._anchor = (time.time_ns(), time.perf_counter_ns())
        if self.mode != "off":
            await self._pass("before")

    async def after(self) -> None:
        """The pass after the measured turns (``full`` only)."""
        if self.mode == "full":
            await self._pass("after")

    async def _pass(self, label: str) -> None:
        t0 = time.monotonic()
        try:
            errors = await asyncio.wait_for(run_reference(self.clock, self.turns), TIMEOUT_S)
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except TimeoutError:
            self._failed(f"the reference pass {label} the turns took over {TIMEOUT_S:.0f} s")
        except Exception as exc:
            self._failed(f"the reference {label} the turns failed: {_one_line(exc)}")
        else:
            for k, v in errors.items():
                self.errors[k].extend(v)
            self.ran += self.turns
        finally:
            self.cost_s += time.monotonic() - t0

    def skip(self, reason: str) -> None:
        """No reference for this run (the section says "uncalibrated" and ``reason``)."""
        self.failure = self.failure or reason

    def _failed(self, reason: str) -> None:
        self.failure = self.failure or reason
        self.log(f"warning: uncalibrated: {reason}")

    def section(self) -> dict[str, Any]:
        """The summary's ``instrument`` section, the clock check taken now."""
        wall0, mono0 = self._anchor
        ppm = clock_ppm(wall0, mono0, time.time_ns(), time.perf_counter_ns())
        if self.mode == "off":
            out = uncalibrated_section("--calibrate off", self.mode, ppm)
        elif self.failure is not None and not self.ran:
            out = uncalibrated_section(self.failure, self.mode, ppm)
        else:
            out = calibrated_section(self.errors, turns=self.ran, mode=self.mode, ppm=ppm)
            if self.failure is not None and out["status"] == "calibrated":
                # ``full`` with one good pass: its bar stands, and the other pass's failure is said.
                out["reason"] = "; ".join(r for r in (self.failure, out["reason"]) if r)
        return out | {"cost_s": round(self.cost_s, 2)}


def calibration_for(
    asked: str | None, clock: Clock | None = None, log: Callable[[str], None] = lambda _: None
) -> Calibration:
    """The calibration ``asked`` for (``--calibrate``); when it says nothing, the
    ``VOICELAT_CALIBRATE`` variable's (a CI job's or a test suite's default), else
    :data:`DEFAULT_MODE`. A bad variable is a ``ConfigError`` (exit 2)."""
    mode = asked or os.environ.get(ENV) or DEFAULT_MODE
    if mode not in MODES:
        raise ConfigError(f"{ENV}={mode!r}: use one of {', '.join(MODES)}")
    return Calibration(mode, clock, log)


async def run_reference(clock: Clock, turns: int) -> dict[str, list[int]]:
    """One reference pass: ``turns`` turns against a fresh
    in-process emulator; the errors per kind (ns)."""
    # Imported here: the emulator and the runner are needed only when calibrating.
    from voicelat.core.base.plan import plan_turns
    from voicelat.emulate import Emulators
    from voicelat.engine.runner import Runner
    from voicelat.files.fixtures import load_fixtures

    os.environ.setdefault(_KEY_ENV, "calibration")  # the emulator wants a key sent
    with tempfile.TemporaryDirectory(prefix="voicelat-calibration-") as tmp:
        work = Path(tmp)
        fixtures = load_fixtures(await asyncio.to_thread(_write_fixture, work / "fixture"))
        async with Emulators(
            ["openai"], profile=REFERENCE_PROFILE, seed=1, thread=True, log=lambda _: None
        ) as em:
            runner = Runner(_pipeline(em.url("openai")), fixtures, work / "run", clock=clock)
            outcome = await runner.run(plan_turns(["ref"], turns=turns, warmup=0))
            truth = em.truth.select("openai")
    return reference_errors_of(outcome.turns, [_exchange(e) for e in truth])


def reference_errors_of(
    turns: Sequence[Turn], truth: Sequence[TruthExchange]
) -> dict[str, list[int]]:
    """The errors of a pass's finished measured turns against the emulator's exchanges."""
    refs = [_reference(t) for t in turns if not t.warmup and t.ok]
    return reference_errors(refs, truth, _onset_ns())


def _reference(t: Turn) -> ReferenceTurn:
    def at(name: str) -> int | None:
        v = t.milestones.get(name)
        return None if v is None else t.t0_ns + v

    e2e = t.e2e_ns
    return ReferenceTurn(
        at("llm_request"),
        at("llm_first_token"),
        at("tts_request"),
        at("tts_first_byte"),
        at("speech_end"),
        None if e2e is None else int(e2e),
    )


def _exchange(ex: Any) -> TruthExchange:
    mark = "first_audio_written" if ex.endpoint == "speech" else "first_content_written"
    return TruthExchange(ex.endpoint, ex.marks.get("request_received", -1), ex.marks.get(mark))


def _onset_ns() -> int:
    """When the reference reply becomes audible after its first byte: computed from the very
    samples the emulator sends (leading silence plus the tone's fade-in to the threshold)."""
    from voicelat.audio import first_audible_sample
    from voicelat.audio.wav import PCM
    from voicelat.emulate.content import tone_speech

    c = REFERENCE_PROFILE["openai"]["content"]
    pcm = tone_speech(
        c["reply"],
        _TTS_RATE,
        ms_per_char=c["ms_per_char"],
        leading_silence_ms=c["leading_silence_ms"],
    )
    onset = first_audible_sample(PCM(pcm, _TTS_RATE))
    return 0 if onset is None else onset * 1_000_000_000 // _TTS_RATE


def _pipeline(base_url: str) -> Any:
    """openai-stt -> openai chat -> openai-tts against the reference emulator."""
    from voicelat.files.pipeline import parse_pipeline

    common = {"base_url": base_url, "api_key_env": _KEY_ENV}
    return parse_pipeline(
        {
            "pipeline": {"name": "calibration-reference"},
            "endpointing": {"mode": "vad", "hangover_ms": 150},
            "stt": {"stage": "openai-stt", "model": "gpt-4o-mini-transcribe", **common},
            "llm": {"stage": "openai", "endpoint": "chat", "model": "gpt-4o-mini", **common},
            "tts": {"stage": "openai-tts", "model": "gpt-4o-mini-tts", "voice": "alloy", **common},
            "chunker": {"mode": "sentence"},
            "turn": {"timeout_s": 10},
        }
    )


def _write_fixture(d: Path, lead_s: float = 0.05, speech_s: float = 0.3) -> Path:
    """A 16 kHz tone 'utterance' (0.3 s) with its annotated speech and a manifest."""
    from voicelat.audio.wav import PCM, write_wav

    d.mkdir(parents=True, exist_ok=True)
    rate, tail_s = 16000, 0.2
    t = np.arange(int(speech_s * rate)) / rate
    tone = 0.3 * np.sin(2 * math.pi * 300 * t)
    audio = np.concatenate([np.zeros(int(lead_s * rate)), tone, np.zeros(int(tail_s * rate))])
    write_wav(d / "ref.wav", PCM((audio * 32767).astype("<i2").tobytes(), rate))
    entry = {
        "id": "ref",
        "file": "ref.wav",
        "text": "What's the weather like today?",
        "speech_start_ms": round(lead_s * 1000),
        "speech_end_ms": round((lead_s + speech_s) * 1000),
    }
    (d / "manifest.json").write_text(json.dumps({"version": 1, "fixtures": [entry]}))
    return d


def _one_line(exc: BaseException) -> str:
    """An exception as one short line (a calibration's warning, never a traceback)."""
    return (" ".join(str(exc).split()) or type(exc).__name__)[:300]
