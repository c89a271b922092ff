"""``espeak-tts``: espeak-ng through the library that ``espeakng-loader`` ships, in a worker process.

Formant synthesis: robotic and close to free (RTF under 0.001), so it is the lower bound of TTS
latency a pipeline can reach. ``espeakng-loader`` only ships ``libespeak-ng.so`` and its data;
synthesis goes through ctypes with ``AUDIO_OUTPUT_SYNCHRONOUS``: ``espeak_Synth`` calls back with
each buffer of samples as it renders them, and every callback becomes one audio message, so the
first audio leaves the worker long before the sentence is finished (true streaming).

The synthesizer runs in a worker process (see :mod:`voicelat.stages.worker`): a synthesis holds
the CPU for milliseconds, and on the measuring loop every stamp would wait for it.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import time
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, ClassVar

from voicelat.core.measure.events import (
    Audio,
    Connected,
    Done,
    Failed,
    StageEvent,
    StageName,
    TextSent,
)
from voicelat.stages.options import parse_options
from voicelat.stages.worker import WorkerProcess, WorkerStage


@dataclass(frozen=True, kw_only=True)
class EspeakOptions:
    """``[tts]`` of ``espeak-tts``."""

    voice: str = "en-us"
    rate_wpm: int = 175
    pitch: int = 50
    buffer_ms: int = 50
    timeout_s: float = 30.0
    start_timeout_s: float = 60.0


# espeak-ng's speak_lib.h constants.
_AUDIO_OUTPUT_SYNCHRONOUS = 2
_POS_CHARACTER = 1
_CHARS_UTF8 = 1
_PARAM_RATE = 1
_PARAM_PITCH = 3


class EspeakTTS(WorkerStage):
    """Streaming text-to-speech with espeak-ng (22.05 kHz, 16-bit mono)."""

    kind: ClassVar[StageName] = "tts"
    engine_target: ClassVar[str] = "voicelat.stages.espeak:engine_main"
    stage_name: ClassVar[str] = "espeak-tts"

    def __init__(self, options: Mapping[str, Any], *, table: str = "tts") -> None:
        o = parse_options(EspeakOptions, table, options)
        self.table = table
        self.voice = o.voice
        self.engine_options: dict[str, Any] = {
            "voice": o.voice,
            "rate_wpm": o.rate_wpm,
            "pitch": o.pitch,
            "buffer_ms": o.buffer_ms,
        }
        self.timeout_s = o.timeout_s
        self.start_timeout_s = o.start_timeout_s

    @property
    def rate(self) -> int:
        return int(self.worker_info.get("rate", 22050))

    def describe(self) -> dict[str, Any]:
        info = self.worker_info
        return {
            "stage": "espeak-tts",
            "engine": "espeak-ng",
            "engine_version": info.get("version"),
            "loader_version": info.get("loader_version"),
            "voice": self.voice,
            "rate_hz": info.get("rate"),
            "streaming": True,
            "worker_pid": info.get("pid"),
            "loop_pid": os.getpid(),
        }

    async def synthesize(self, text: AsyncIterable[str]) -> AsyncIterator[StageEvent]:
        w = self._worker
        if w is None or not w.alive():
            yield Failed(self.clock.now_ns(), "espeak-tts: the engine worker is not running")
            return
        seq = w.next_seq()
        yield Connected(self.clock.now_ns(), cold=self._first_use(), new_connection=False)
        feeder = asyncio.create_task(_feed(w, seq, text))
        sent = done = 0
        text_ended = False
        rate = self.rate
        try:
            while not (text_ended and done >= sent):
                try:
                    # Waiting for the LLM's next sentence is not the synthesizer's delay: the
                    # timeout applies only while a synthesis is outstanding.
                    t, msg = await w.receive(seq, self.timeout_s if sent > done else None)
                except TimeoutError:
                    yield Failed(
                        self.clock.now_ns(),
                        f"espeak-tts: no audio within {self.timeout_s:g} s",
                    )
                    return
                kind = msg[0]
                if kind == "audio":
                    yield Audio(t, msg[2], rate)
                elif kind == "sent":
                    sent += 1
                    yield TextSent(t, str(msg[2]))
                elif kind == "synth_done":
                    done += 1
                elif kind == "text_end":
                    text_ended = True
                elif kind in ("error", "eof", "feed_error"):
                    yield Failed(t, f"espeak-tts: {msg[2]}")
                    return
            yield Done(self.clock.now_ns())
        finally:
            if not feeder.done():
                feeder.cancel()


async def _feed(w: WorkerProcess, seq: int, text: AsyncIterable[str]) -> None:
    """Hand each text piece to the worker the moment the chunker releases it."""
    try:
        async for piece in text:
            if not piece.strip():
                continue
            t = w.send("synth", seq, piece)
            w.inbox.put_nowait((t, ("sent", seq, piece)))
        w.note("text_end", seq)
    except Exception as exc:
        w.note("feed_error", seq, f"{type(exc).__name__}: {exc}")


# -- the worker side ---------------------------------------------------------------------------
_Callback = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p
)


def _load(options: dict[str, Any]) -> tuple[Any, int, dict[str, Any]]:
    from importlib.metadata import version

    import espeakng_loader  # type: ignore[import-untyped]

    lib = ctypes.CDLL(espeakng_loader.get_library_path())
    lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    lib.espeak_Initialize.restype = ctypes.c_int
    lib.espeak_Info.argtypes = [ctypes.POINTER(ctypes.c_char_p)]
    lib.espeak_Info.restype = ctypes.c_char_p
    lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
    lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
    lib.espeak_SetSynthCallback.argtypes = [_Callback]
    lib.espeak_SetSynthCallback.restype = None
    lib.espeak_Synth.argtypes = [
        ctypes.c_char_p,
        ctypes.c_size_t,
        ctypes.c_uint,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.c_uint,
        ctypes.c_void_p,
        ctypes.c_void_p,
    ]
    data = espeakng_loader.get_data_path().encode()
    rate = int(lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, int(options["buffer_ms"]), data, 0))
    if rate <= 0:
        raise RuntimeError(f"espeak_Initialize failed ({rate})")
    if lib.espeak_SetVoiceByName(str(options["voice"]).encode()) != 0:
        raise RuntimeError(f"espeak-ng has no voice {options['voice']!r}")
    lib.espeak_SetParameter(_PARAM_RATE, int(options["rate_wpm"]), 0)
    lib.espeak_SetParameter(_PARAM_PITCH, int(options["pitch"]), 0)
    info = {
        "version": (lib.espeak_Info(None) or b"?").decode(),
        "loader_version": version("espeakng-loader"),
        "rate": rate,
        "pid": os.getpid(),
    }
    return lib, rate, info


def engine_main(conn: Connection, options: dict[str, Any]) -> None:
    """Runs in the worker process: initialize espeak-ng, then synthesize each piece sent."""
    t0 = time.perf_counter()
    try:
        lib, _, info = _load(options)
    except Exception as exc:
        conn.send(("error", 0, f"cannot load espeak-ng: {type(exc).__name__}: {exc}"))
        return
    info["load_ms"] = round((time.perf_counter() - t0) * 1000, 1)
    current = [0]

    def on_audio(wav: Any, n: int, events: Any) -> int:
        # Each rendered buffer goes out at once: that is what makes the first byte early.
        if n > 0:
            conn.send(("audio", current[0], ctypes.string_at(wav, n * 2)))
        return 0  # 0 = continue synthesis

    # Kept in a local for the worker's lifetime: a collected ctypes callback would crash the C side.
    callback: Any = _Callback(on_audio)
    lib.espeak_SetSynthCallback(callback)
    conn.send(("ready", 0, info))
    while True:
        msg = conn.recv()
        kind, seq = msg[0], msg[1]
        if kind == "close":
            return
        if kind == "synth":
            current[0] = seq
            data = str(msg[2]).encode("utf-8")
            rc = lib.espeak_Synth(
                data, len(data) + 1, 0, _POS_CHARACTER, 0, _CHARS_UTF8, None, None
            )
            if rc != 0:
                conn.send(("error", seq, f"espeak_Synth failed ({rc})"))
            else:
                conn.send(("synth_done", seq))
