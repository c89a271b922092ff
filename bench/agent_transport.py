"""What the agent transports add on loopback: the `transport` remainder taken apart.

    python bench/agent_transport.py                 # 8 turns per configuration (~2 min)
    python bench/agent_transport.py --turns 20 --json out.json

A real Pipecat bot without models (tests/agents/pipecat_transport_agent.py: Pipecat's own
transports, its Silero VAD, a canned 400 ms-tone reply (no leading silence) pushed the moment the
VAD ends the user's turn) runs in its own process and prints, on CLOCK_MONOTONIC (one clock for
both processes on this host), when its VAD stopped (``vad_stop``), when the reply was pushed
(``reply``: the traced path's ``agent_tts_first_byte``), when its output transport took the
reply's first chunk (``write``: after Pipecat's resampling and 40 ms chunking) and, for WebRTC,
when its outgoing track handed that chunk to aiortc's Opus encoder (``track``). voicelat runs
real turns (the `pipecat-ws` / `webrtc` stages through the agent turn engine) and stamps
``first_audio``. Per turn, in ms:

- **inbound+VAD**: ``vad_stop`` - (speech_end + the VAD's stop_secs): our send, the bot's
  input transport and Silero's 32 ms analysis windows (inside ``endpointing``, traced).
- **pipecat output**: ``write`` - ``reply``: the output transport's resampler (``clip-rate``
  configurations: the reply at 16 kHz into a 24 kHz transport), chunking and audio queue.
- **ws: socket**: ``first_audio`` - ``write``: protobuf serialization, the websocket, our
  parse and stamp.
- **webrtc: track queue**: ``track`` - ``write``: SmallWebRTC's 10 ms output track queue and
  its real-time pacing.
- **webrtc: RTP path**: ``first_audio`` - ``track``: Opus encode (20 ms frames), RTP over
  loopback, aiortc's jitter buffer (``jitter_buffer_packets``: 4 by default, 1 to show its
  share; "both ways": the bot's receiver too, so the inbound leg's share shows in
  inbound+VAD), Opus decode on aiortc's thread, the hop to our loop.
- **transport**: ``first_audio`` - ``reply``: the whole remainder of the traced split.
- **loop lag max**: the measuring loop's worst lag in the turn (the engine's probe): what
  aiortc's work on that loop (RTP, SRTP, the jitter buffer) may add to a stamp.

Medians and P90 of each, with the load average; the last line is ``transport_p50_ms=...`` per
configuration.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._common import machine_line, now_stamp  # noqa: E402
from tests.stages.agent_helpers import pipecat_agent, run_agent_turns  # noqa: E402
from voicelat.core.base.stats import percentile  # noqa: E402
from voicelat.core.base.turn import Turn  # noqa: E402
from voicelat.stages.pipecat_ws import PipecatWs  # noqa: E402
from voicelat.stages.webrtc import WebRTC  # noqa: E402

MS = 1_000_000
STOP_MS = 300
PORT = 9280

#: (name, transport, bot arguments, stage options)
CONFIGS: tuple[tuple[str, str, tuple[str, ...], dict[str, Any]], ...] = (
    ("ws 24k", "ws", (), {}),
    ("ws 16k->24k", "ws", ("--clip-rate", "16000"), {}),
    ("webrtc jb4", "webrtc", (), {}),
    ("webrtc jb1", "webrtc", (), {"jitter_buffer_packets": 1}),
    ("webrtc jb1 both ways", "webrtc", ("--jitter-packets", "1"), {"jitter_buffer_packets": 1}),
    ("webrtc 16k->24k", "webrtc", ("--clip-rate", "16000"), {}),
)


def _t0(turn: Turn) -> int:
    return int(turn.figures["intended_start_ns"] + turn.figures["schedule_lag_ns"])


def _split(turn: Turn, events: list[dict[str, Any]], webrtc: bool) -> dict[str, int] | None:
    """One turn's parts, from the bot's first events after its speech ended."""
    if not turn.ok:
        return None
    t0 = _t0(turn)
    m = turn.milestones
    speech_end, first_audio = t0 + m["speech_end"], t0 + m["first_audio"]

    def first(name: str, after: int) -> int | None:
        times = [e["t_ns"] for e in events if e["event"] == name and after <= e["t_ns"]]
        return min(times) if times else None

    vad = first("vad_stop", t0 + m["speech_start"])
    reply = first("reply", vad or speech_end)
    write = first("write", reply or speech_end)
    if vad is None or reply is None or write is None or write > first_audio:
        return None
    parts = {
        # The measuring loop's worst lag in the turn: aiortc's RTP, SRTP and jitter buffer run
        # on it (its Opus encoder and decoder on threads of their own).
        "loop lag max": int(turn.figures.get("loop_lag_max_ns") or 0),
        "inbound+VAD": vad - speech_end - STOP_MS * MS,
        "pipecat output": write - reply,
        "transport": first_audio - reply,
        "agent_response": m["first_audio"] - m["speech_end"],
    }
    if webrtc:
        track = first("track", write)
        if track is None or track > first_audio:
            return None
        parts["webrtc: track queue"] = track - write
        parts["webrtc: RTP path"] = first_audio - track
    else:
        parts["ws: socket"] = first_audio - write
    return parts


def _run_config(
    name: str, transport: str, bot_args: tuple[str, ...], options: dict[str, Any], turns: int
) -> dict[str, Any]:
    port = PORT + [c[0] for c in CONFIGS].index(name)
    if transport == "ws":
        table = {"stage": "pipecat-ws", "url": f"ws://127.0.0.1:{port}"}
        cls: Any = PipecatWs
    else:
        table = {"stage": "webrtc", "url": f"http://127.0.0.1:{port}/api/offer"}
        cls = WebRTC
    table |= {"reply_idle_ms": 300, **options}
    # No leading silence in the clip: WebRTC's line carries digital silence, so a reply's first
    # frame with sound is its first audio there; both transports then start at the same sample.
    args = ("--stop-ms", str(STOP_MS), "--lead-ms", "0", *bot_args)
    with tempfile.TemporaryDirectory() as tmp, pipecat_agent(transport, port, *args) as bot:
        done = run_agent_turns(Path(tmp), cls, table, turns=turns + 1)[1:]  # the first: warm-up
        events = list(bot.events)
    splits = [s for t in done if (s := _split(t, events, transport == "webrtc")) is not None]
    failed = [t.failure_reason for t in done if not t.ok]
    keys = splits[0].keys() if splits else ()
    stats = {
        k: {
            "p50": round(percentile([s[k] / MS for s in splits], 50), 1),
            "p90": round(percentile([s[k] / MS for s in splits], 90), 1),
        }
        for k in keys
    }
    return {"name": name, "turns": len(done), "split": len(splits), "failed": failed, "ms": stats}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=8)
    ap.add_argument("--only", default="", help="comma-separated configuration names")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    wanted = {n.strip() for n in a.only.split(",") if n.strip()}
    load = os.getloadavg()
    print(f"# {now_stamp()}  {machine_line()}  load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    results = []
    for name, transport, bot_args, options in CONFIGS:
        if wanted and name not in wanted:
            continue
        r = _run_config(name, transport, bot_args, options, a.turns)
        results.append(r)
        print(f"\n{name}: {r['split']}/{r['turns']} turns split" + (
            f", failed: {r['failed'][:2]}" if r["failed"] else ""
        ))  # fmt: skip
        for k, v in r["ms"].items():
            print(f"  {k:22s} p50 {v['p50']:7.1f}  p90 {v['p90']:7.1f}")
    end = os.getloadavg()
    print(f"\n# load at the end {end[0]:.2f} {end[1]:.2f} {end[2]:.2f}")
    print(
        "transport_p50_ms="
        + ",".join(f"{r['name']}:{r['ms'].get('transport', {}).get('p50')}" for r in results)
    )
    if a.json:
        with contextlib.suppress(OSError):
            a.json.write_text(json.dumps({"load": [load, end], "results": results}, indent=2))


if __name__ == "__main__":
    main()
