"""Loss on WebRTC's media, as heard: the reply's continuity at the sink per loss rate.

    python bench/webrtc_media_loss.py                  # 0, 1, 3, 10 % down, 3 turns each (~1 min)
    python bench/webrtc_media_loss.py --loss 0,5 --turns 6

A real Pipecat bot behind SmallWebRTC (tests/agents/pipecat_transport_agent.py, a 2 s tone
reply) and voicelat's aiortc caller, the media through the stage's impaired UDP relay
(stages/media_relay.py: the offer and the answer name only the relay's candidates) with 10 ms
each way and the given random loss on the reply's packets (down). Per turn: the datagrams the
relay lost, the reply frames aiortc's decoder never got (``webrtc_lost_frames``), the sink's
underruns, their total and longest silence, and the reply audio decoded; the medians per loss
rate, with the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._common import machine_line, now_stamp  # noqa: E402
from tests.network.test_webrtc_media import PORT, _turns  # noqa: E402
from tests.stages.agent_helpers import pipecat_agent  # noqa: E402

FIGURES = (
    ("media_down_packets", 1, "down datagrams"),
    ("media_down_lost", 1, "lost"),
    ("webrtc_lost_frames", 1, "frames skipped"),
    ("sink_underruns", 1, "underruns"),
    ("sink_underrun_total_ns", 1e6, "gap total ms"),
    ("sink_longest_gap_ns", 1e6, "longest gap ms"),
    ("agent_audio_ns", 1e6, "reply audio ms"),
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loss", default="0,1,3,10", help="down loss rates, %%, comma-separated")
    ap.add_argument("--turns", type=int, default=3)
    args = ap.parse_args()
    losses = [float(x) for x in args.loss.split(",")]
    print(f"# {now_stamp()}  {machine_line()}  load {os.getloadavg()[0]:.2f}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp, pipecat_agent("webrtc", PORT, "--tone-ms", "2000"):
        for loss in losses:
            turns = [t for t in _turns(Path(tmp) / f"l{loss}", loss, args.turns) if t.ok]
            meds = []
            for name, scale, _ in FIGURES:
                vals = [float(t.figures.get(name) or 0) / scale for t in turns]
                meds.append(statistics.median(vals) if vals else float("nan"))
            rows.append((loss, len(turns), meds))
    print("| down loss | turns | " + " | ".join(label for *_, label in FIGURES) + " |")
    print("| --- " * (len(FIGURES) + 2) + "|")
    for loss, n, meds in rows:
        print(f"| {loss:g} % | {n} | " + " | ".join(f"{m:.0f}" for m in meds) + " |")
    print(f"# load after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
