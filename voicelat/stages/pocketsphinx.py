"""``pocketsphinx-stt``: CMU PocketSphinx, in a worker process, with true streaming partials.

PocketSphinx decodes incrementally: after every 20 ms frame its current best hypothesis is a
real interim transcript, so ``stt_first_partial`` is measurable (Whisper over Wyoming has none).
The English model ships inside the ``pocketsphinx`` wheel: no download, no network. Accuracy is
poor next to Whisper; its use here is a fast, streaming point of comparison.

The decoder runs in a worker process (see :mod:`voicelat.stages.worker`): decoding a frame costs
1-3 ms of CPU, which on the measuring loop would delay the stamps of everything else.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, ClassVar

from voicelat.core.measure.events import (
    Connected,
    Done,
    Failed,
    Final,
    Partial,
    RequestSent,
    StageEvent,
)
from voicelat.core.measure.events import StageName as _StageName
from voicelat.stages.options import parse_options
from voicelat.stages.worker import WorkerProcess, WorkerStage


@dataclass(frozen=True, kw_only=True)
class PocketSphinxOptions:
    """``[stt]`` of ``pocketsphinx-stt``: paths to another model (the default is the en-us
    model inside the wheel)."""

    hmm: str | None = None
    lm: str | None = None
    dict: str | None = None
    timeout_s: float = 30.0
    start_timeout_s: float = 60.0


#: The bundled acoustic model expects 16 kHz mono.
RATE = 16000


class PocketSphinxSTT(WorkerStage):
    """Streaming speech-to-text with PocketSphinx: a Partial per changed hypothesis, a Final at
    the end of the audio (the endpoint)."""

    kind: ClassVar[_StageName] = "stt"
    engine_target: ClassVar[str] = "voicelat.stages.pocketsphinx:engine_main"
    stage_name: ClassVar[str] = "pocketsphinx-stt"
    input_rate: int = RATE

    def __init__(self, options: Mapping[str, Any], *, table: str = "stt") -> None:
        o = parse_options(PocketSphinxOptions, table, options)
        self.table = table
        self.engine_options = {
            k: v for k in ("hmm", "lm", "dict") if (v := getattr(o, k)) is not None
        }
        self.timeout_s = o.timeout_s
        self.start_timeout_s = o.start_timeout_s

    def describe(self) -> dict[str, Any]:
        info = self.worker_info
        return {
            "stage": "pocketsphinx-stt",
            "engine": "pocketsphinx",
            "engine_version": info.get("version"),
            "model": info.get("model"),
            "load_ms": info.get("load_ms"),
            "streaming": True,
            "worker_pid": info.get("pid"),
            "loop_pid": os.getpid(),
        }

    async def transcribe(self, audio: AsyncIterable[bytes]) -> AsyncIterator[StageEvent]:
        w = self._worker
        if w is None or not w.alive():
            yield Failed(self.clock.now_ns(), "pocketsphinx-stt: the engine worker is not running")
            return
        seq = w.next_seq()
        t = w.send("start", seq)
        # The decoder is loaded and kept; its first utterance is reported cold like any first use.
        yield Connected(t, cold=self._first_use(), new_connection=False)
        feeder = _spawn_feeder(w, seq, audio)
        ended = False
        try:
            while True:
                try:
                    # No timeout while audio streams: silence legitimately produces nothing.
                    t, msg = await w.receive(seq, self.timeout_s if ended else None)
                except TimeoutError:
                    yield Failed(
                        self.clock.now_ns(),
                        f"pocketsphinx-stt: no final transcript within {self.timeout_s:g} s",
                    )
                    return
                kind = msg[0]
                if kind == "sent_end":
                    ended = True
                    yield RequestSent(t, "audio_end")
                elif kind == "partial":
                    yield Partial(t, str(msg[2]))
                elif kind == "final":
                    yield Final(t, str(msg[2]))
                    yield Done(t)
                    return
                elif kind in ("error", "eof", "feed_error"):
                    yield Failed(t, f"pocketsphinx-stt: {msg[2]}")
                    return
        finally:
            if not feeder.done():
                feeder.cancel()


def _spawn_feeder(w: WorkerProcess, seq: int, audio: AsyncIterable[bytes]) -> asyncio.Task[None]:
    """Forward the paced audio to the worker as it arrives; note the end of audio in the inbox
    (the stage reports it as ``RequestSent("audio_end")``, the start of STT finalization)."""

    async def feed() -> None:
        try:
            async for frame in audio:
                w.send("audio", seq, frame)
            w.send("end", seq)
            w.note("sent_end", seq)
        except Exception as exc:
            w.note("feed_error", seq, f"{type(exc).__name__}: {exc}")

    return asyncio.create_task(feed())


# -- the worker side ---------------------------------------------------------------------------
def engine_main(conn: Connection, options: dict[str, Any]) -> None:
    """Runs in the worker process: load the decoder, then serve utterances until told to close."""
    from importlib.metadata import version

    t0 = time.perf_counter()
    try:
        import pocketsphinx  # type: ignore[import-untyped]

        model_dir = os.path.join(pocketsphinx.get_model_path(), "en-us")
        config = {
            "hmm": options.get("hmm") or os.path.join(model_dir, "en-us"),
            "lm": options.get("lm") or os.path.join(model_dir, "en-us.lm.bin"),
            "dict": options.get("dict") or os.path.join(model_dir, "cmudict-en-us.dict"),
        }
        decoder = pocketsphinx.Decoder(loglevel="FATAL", **config)
    except Exception as exc:
        conn.send(("error", 0, f"cannot load the pocketsphinx model: {type(exc).__name__}: {exc}"))
        return
    conn.send(
        (
            "ready",
            0,
            {
                "version": version("pocketsphinx"),
                "model": os.path.basename(str(config["hmm"])),
                "load_ms": round((time.perf_counter() - t0) * 1000, 1),
                "pid": os.getpid(),
            },
        )
    )
    last = ""
    in_utt = False
    while True:
        msg = conn.recv()
        kind, seq = msg[0], msg[1]
        try:
            if kind == "close":
                return
            if kind == "start":
                if in_utt:  # an abandoned utterance (a timed-out turn): close it first
                    decoder.end_utt()
                decoder.start_utt()
                in_utt = True
                last = ""
            elif kind == "audio":
                decoder.process_raw(msg[2], False, False)
                hyp = decoder.hyp()
                text = hyp.hypstr.strip() if hyp is not None else ""
                # Only a changed, non-empty hypothesis is news worth a message.
                if text and text != last:
                    last = text
                    conn.send(("partial", seq, text))
            elif kind == "end":
                decoder.end_utt()
                in_utt = False
                hyp = decoder.hyp()
                conn.send(("final", seq, hyp.hypstr.strip() if hyp is not None else ""))
        except Exception as exc:
            conn.send(("error", seq, f"{type(exc).__name__}: {exc}"))
