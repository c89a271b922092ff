"""Does an agent turn's e2e from events agree with e2e from the recorded reply audio?

    python bench/agent_accuracy.py                      # 10 measured turns per transport (~3 min)
    python bench/agent_accuracy.py --turns 3 --only twilio

For each transport (``twilio``, ``pipecat-ws``, ``webrtc``) a real Pipecat bot of known timing
runs in its own process (tests/agents/pipecat_agent.py: FastAPIWebsocketTransport +
TwilioFrameSerializer; tests/agents/pipecat_transport_agent.py: the websocket server transport
+ ProtobufFrameSerializer, or SmallWebRTC; Silero VAD, a canned tone reply after the VAD's
stop; 100 ms of digital silence first, except over WebRTC, whose line is digital silence).
voicelat runs real turns on the bundled fixtures through the agent turn engine (one
warm-up, one call per turn), with ``[output] save_audio``. Per measured turn, e2e three ways:

- **events**: the turn's e2e, ``output_first_audible - speech_end``; ``output_first_audible``
  is the sink's stamp from the onset voicelat's streaming detector found in the reply.
- **sink recording**: the sink's recording read back from disk (every sample it played, and
  silence for every underrun, so sample i played at ``playout_started + i / rate``), its first
  audible sample found by this bench's own detector (below):
  ``playout_started + onset / rate - speech_end``.
- **chunk timeline**: the reply chunks as the stage delivered them, tapped with their arrival
  stamps and rebuilt here into a playout timeline of this bench's own (back to back from the
  first arrival; a chunk that arrives after the buffer ran dry restarts playback at its
  arrival, silence in between), written as a WAV whose sample 0 is the first arrival, read
  back, onset by this bench's detector. It shares no code with the sink.

This bench's detector is not voicelat's (``voicelat.audio.onset``: fixed 10 ms windows from the
first sample, the first window above -40 dBFS RMS, its first sample above the -40 dBFS
amplitude): it slides a 5 ms window sample by sample and takes the first sample above the
-40 dBFS amplitude whose 5 ms from there are above -40 dBFS RMS. On a hard onset both name
the same sample; on a soft one (Opus's pre-echo) they may differ by a few samples.

Printed per transport: P50 / P99 / max of |events - recording| for both recordings (ms), and
the last line ``p99_error_ms=<the worst P99 of them>``; the bound of #13 is 5 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._common import MS, dist_ms, fmt, machine_line, now_stamp  # noqa: E402
from tests.agents.pipecat_agent import running_agent  # noqa: E402
from tests.stages.agent_helpers import pipecat_agent  # noqa: E402
from voicelat.audio import read_wav  # noqa: E402
from voicelat.audio.frames import FULL_SCALE  # noqa: E402
from voicelat.audio.wav import PCM, write_wav  # noqa: E402
from voicelat.core.base.errors import InfraError  # noqa: E402
from voicelat.core.base.plan import plan_turns  # noqa: E402
from voicelat.core.base.turn import Turn  # noqa: E402
from voicelat.core.measure.events import Audio, StageEvent  # noqa: E402
from voicelat.engine.runner import Runner  # noqa: E402
from voicelat.engine.stageset import AgentStageSet  # noqa: E402
from voicelat.files.fixtures import load_fixtures  # noqa: E402
from voicelat.files.pipeline import parse_pipeline  # noqa: E402
from voicelat.stages.pipecat_ws import PipecatWs  # noqa: E402
from voicelat.stages.twilio import Twilio  # noqa: E402
from voicelat.stages.webrtc import WebRTC  # noqa: E402

NS_PER_S = 1_000_000_000
BOUND_MS = 5.0
TRANSPORTS = ("twilio", "pipecat-ws", "webrtc")
PORTS = {"twilio": 9551, "pipecat-ws": 9552, "webrtc": 9553}
STOP_MS = 300

#: One tapped reply chunk: (arrival stamp ns, PCM16 mono bytes, rate).
Chunk = tuple[int, bytes, int]


# -- this bench's own onset detector and playout timeline ----------------------------------------
def sliding_onset(
    x: npt.NDArray[np.int16], rate: int, dbfs: float = -40.0, window_ms: int = 5
) -> int | None:
    """The first sample above the ``dbfs`` amplitude whose ``window_ms`` from there have an RMS
    above ``dbfs`` (a window sliding sample by sample; None: nothing audible)."""
    level = FULL_SCALE * 10.0 ** (dbfs / 20.0)
    w = max(1, rate * window_ms // 1000)
    if len(x) < w:
        return None
    sq = np.concatenate(([0.0], np.cumsum(x.astype(np.float64) ** 2)))
    loud_window = (sq[w:] - sq[:-w]) / w > level * level  # the window starting at sample i
    loud_sample = np.abs(x[: len(loud_window)].astype(np.float64)) > level
    hits = np.flatnonzero(loud_window & loud_sample)
    return int(hits[0]) if hits.size else None


def timeline(chunks: list[Chunk], latency_ns: int = 0) -> tuple[int, PCM] | None:
    """The chunks rebuilt into what the documented device (docs/AGENTS.md, "Accuracy") plays:
    sample 0 at the first arrival + ``latency_ns`` (its buffer fills first), then back to back;
    a chunk that arrives before its slot waits for it (the buffer absorbs that lateness), one
    that arrives after the buffer ran dry restarts playback at its arrival + ``latency_ns``,
    silence in between. Returns (sample-0 stamp, audio)."""
    if not chunks:
        return None
    rate = chunks[0][2]
    start = chunks[0][0] + latency_ns
    parts: list[bytes] = []
    samples = 0
    for arrival, pcm, chunk_rate in chunks:
        if chunk_rate != rate:
            raise ValueError(f"a reply at {rate} Hz then {chunk_rate} Hz")
        end = start + samples * NS_PER_S // rate  # when what is buffered has played
        if arrival > end:  # ran dry: the device refills its buffer (latency_ns) again
            # The restart's place on the sample grid from sample 0 (not the gap's own length
            # rounded down: that would lose up to a sample per gap, and they add up).
            gap = ((arrival + latency_ns - start) * rate + NS_PER_S // 2) // NS_PER_S - samples
            parts.append(bytes(2 * gap))
            samples += gap
        parts.append(pcm[: len(pcm) - len(pcm) % 2])
        samples += len(pcm) // 2
    return start, PCM(b"".join(parts), rate)


def tap(stage: Any, taps: list[list[Chunk]]) -> Any:
    """``stage`` whose every converse call appends the reply chunks it yields, with their
    stamps, to a new list in ``taps`` (kept in memory: written to disk after the run)."""
    converse = stage.converse

    def tapped(audio: Any) -> AsyncIterator[StageEvent]:
        chunks: list[Chunk] = []
        taps.append(chunks)

        async def events() -> AsyncIterator[StageEvent]:
            async for ev in converse(audio):
                if isinstance(ev, Audio) and ev.pcm:
                    chunks.append((ev.t_ns, ev.pcm, ev.rate))
                yield ev

        return events()

    stage.converse = tapped
    return stage


# -- one transport's run -----------------------------------------------------------------------
@contextlib.contextmanager
def agent_for(transport: str, port: int) -> Iterator[tuple[dict[str, Any], Any]]:
    """The transport's test bot on ``port``: yields the ``[agent]`` table and the stage class."""
    if transport == "twilio":
        with running_agent(port, stop_ms=STOP_MS, lead_ms=100, tone_ms=400) as url:
            yield {"stage": "twilio", "url": f"{url}/twilio", "reply_idle_ms": 500}, Twilio
        return
    kind = "ws" if transport == "pipecat-ws" else "webrtc"
    # A lead of digital silence puts the first audible sample chunks into the reply (a sink
    # timeline with underruns before it); WebRTC's line carries digital silence between
    # replies, so there the lead would be the line's and its reply starts at the tone.
    lead = "100" if kind == "ws" else "0"
    with pipecat_agent(kind, port, "--stop-ms", str(STOP_MS), "--lead-ms", lead):
        if kind == "ws":
            yield (
                {"stage": "pipecat-ws", "url": f"ws://127.0.0.1:{port}", "reply_idle_ms": 300},
                (PipecatWs),
            )
        else:
            url = f"http://127.0.0.1:{port}/api/offer"
            yield {"stage": "webrtc", "url": url, "reply_idle_ms": 300}, WebRTC


def run_transport(transport: str, turns: int, work: Path, latency_ms: int = 0) -> dict[str, Any]:
    """``turns`` measured turns (after one warm-up) and their errors, in ns; ``latency_ms``:
    the sink's output latency (``[output] latency_ms``)."""
    fixtures = load_fixtures(ROOT / "fixtures")
    taps: list[list[Chunk]] = []
    with agent_for(transport, PORTS[transport]) as (table, cls):
        pipeline = parse_pipeline(
            {
                "agent": table,
                "output": {"save_audio": True, "latency_ms": latency_ms},
                "turn": {"timeout_s": 20},
            }
        )
        runner = Runner(pipeline, fixtures, work / "run")
        stage = tap(cls(pipeline.agent or {}), taps)
        runner.build_stages = lambda: AgentStageSet.agent_of(stage)  # type: ignore[method-assign]
        plan = plan_turns([f.id for f in fixtures], turns=turns, warmup=1)
        load = os.getloadavg()[0]
        t0 = time.monotonic()
        with contextlib.suppress(InfraError):
            asyncio.run(runner.run(plan))
        wall = time.monotonic() - t0
    done = sorted(runner.turns, key=lambda t: t.index)
    # One converse call per turn, in turn order (one session): the taps line up with the turns.
    by_turn = (
        dict(zip((t.index for t in done), taps, strict=False)) if len(taps) == len(done) else {}
    )
    errors: dict[str, list[int]] = {"sink recording": [], "chunk timeline": []}
    for t in done:
        if t.warmup or not t.ok or t.e2e_ns is None:
            continue
        speech_end = t.milestones["speech_end"]
        sink = _sink_e2e(t, work / "run")
        if sink is not None:
            errors["sink recording"].append(t.e2e_ns - (sink - speech_end))
        rebuilt = _timeline_e2e(t, by_turn.get(t.index, []), pipeline.output.latency_ms, work)
        if rebuilt is not None:
            errors["chunk timeline"].append(t.e2e_ns - (rebuilt - t.t0_ns - speech_end))
    measured = [t for t in done if not t.warmup]
    return {
        "transport": transport,
        "turns": len(measured),
        "failed": [t.failure_reason for t in measured if not t.ok],
        "wall_s": round(wall, 1),
        "loadavg_1min": round(load, 2),
        "e2e_ms": dist_ms([float(t.e2e_ns) for t in measured if t.e2e_ns is not None]),
        "signed": {k: dist_ms([float(v) for v in vs]) for k, vs in errors.items()},
        "abs": {k: dist_ms([float(abs(v)) for v in vs]) for k, vs in errors.items()},
    }


def _sink_e2e(t: Turn, run_dir: Path) -> int | None:
    """When the sink's recording says the first audible sample played (turn timeline, ns)."""
    wav = run_dir / "audio" / f"turn-{t.index:04d}-{t.fixture}.wav"
    if "playout_started_ns" not in t.extra or not wav.exists():
        return None
    pcm = read_wav(wav)
    onset = sliding_onset(pcm.to_array(), pcm.rate)
    if onset is None:
        return None
    return int(t.extra["playout_started_ns"]) + onset * NS_PER_S // pcm.rate


def _timeline_e2e(t: Turn, chunks: list[Chunk], latency_ms: int, work: Path) -> int | None:
    """When the rebuilt chunk timeline, written and read back, plays its first audible sample
    (voicelat's clock, ns)."""
    built = timeline(chunks, latency_ms * MS)
    if built is None:
        return None
    start, pcm = built
    path = work / "timeline" / f"turn-{t.index:04d}.wav"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_wav(path, pcm)
    path.with_suffix(".json").write_text(json.dumps({"sample0_ns": start}))
    back = read_wav(path)
    sample0 = int(json.loads(path.with_suffix(".json").read_text())["sample0_ns"])
    onset = sliding_onset(back.to_array(), back.rate)
    return None if onset is None else sample0 + onset * NS_PER_S // back.rate


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=10, help="measured turns per transport")
    ap.add_argument("--only", default="", help="comma-separated transports (default: all three)")
    ap.add_argument("--latency-ms", type=int, default=0, help="the sink's output latency")
    ap.add_argument("--json", type=Path, help="also write the results here")
    a = ap.parse_args(argv)
    wanted = [t for t in TRANSPORTS if not a.only or t in {x.strip() for x in a.only.split(",")}]
    print(f"# {now_stamp()}  {machine_line()}")
    print(
        f"# command: python bench/agent_accuracy.py {' '.join(sys.argv[1:] if argv is None else argv)}"
    )
    results = []
    for transport in wanted:
        with tempfile.TemporaryDirectory(prefix=f"voicelat-agent-acc-{transport}-") as tmp:
            r = run_transport(transport, a.turns, Path(tmp), a.latency_ms)
        results.append(r)
        print(
            f"\n{transport}: {r['turns']} turns ({len(r['failed'])} failed) in {r['wall_s']} s; "
            f"load average {r['loadavg_1min']}; e2e P50 / P99 / max {fmt(r['e2e_ms'])} ms"
        )
        for reason in r["failed"][:3]:
            print(f"  failed: {reason}")
        print(f"  {'|events - recording|':<22} {'n':>3}  P50 / P99 / max (ms)   signed P50")
        for name, d in r["abs"].items():
            signed = r["signed"][name]["p50"]
            print(f"  {name:<22} {d['n']:>3}  {fmt(d):<22} {signed if signed is not None else '-'}")
    print(f"\n# load average at the end {os.getloadavg()[0]:.2f}")
    if a.json:
        a.json.write_text(json.dumps(results, indent=2))
    p99s = [d["p99"] for r in results for d in r["abs"].values()]
    missing = any(d["n"] == 0 for r in results for d in r["abs"].values())
    worst = max((p for p in p99s if p is not None), default=float("nan"))
    print(f"p99_error_ms={'nan' if missing else f'{worst:.3f}'}")
    return 0 if not missing and worst <= BOUND_MS else 1


if __name__ == "__main__":
    raise SystemExit(main())
