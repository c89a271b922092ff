"""Loss on WebRTC's media, as heard: the reply's continuity at the sink per loss rate.

    python bench/webrtc_media_loss.py                  # 0, 1, 3, 10 % down, 3 turns each (~1 min)
    python bench/webrtc_media_loss.py --loss 0,5 --turns 6
    python bench/webrtc_media_loss.py --delay-ms 35 --jitter-ms 10 --both --loss 0,0.5

A real Pipecat bot behind SmallWebRTC (tests/agents/pipecat_transport_agent.py, a 2 s tone
reply) and voicelat's aiortc caller, the media through the stage's impaired UDP relay
(stages/media_relay.py: the offer and the answer name only the relay's candidates) with 10 ms
each way (``--delay-ms``, ``--jitter-ms``: normal, 25 % correlated; a 100 ms output buffer) and the given random loss
on the reply's packets (down; ``--both``: each way). Per turn: the bot's ``agent_response``, the datagrams the
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
from voicelat.core.base.network import Direction, NetworkProfile  # noqa: E402

FIGURES = (
    ("agent_response", 1e6, "agent_response ms"),
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
    ap.add_argument("--delay-ms", type=float, default=10.0)
    ap.add_argument("--jitter-ms", type=float, default=0.0)
    ap.add_argument("--both", action="store_true", help="the loss on both ways")
    args = ap.parse_args()
    losses = [float(x) for x in args.loss.split(",")]
    print(f"# {now_stamp()}  {machine_line()}  load {os.getloadavg()[0]:.2f}")
    print(f"# {args.delay_ms:g} ms each way, jitter {args.jitter_ms:g} ms, loss "
          f"{'both ways' if args.both else 'down'}")  # fmt: skip
    rows = []
    with tempfile.TemporaryDirectory() as tmp, pipecat_agent("webrtc", PORT, "--tone-ms", "2000"):
        for loss in losses:
            d = {"delay_ms": args.delay_ms, "jitter_ms": args.jitter_ms,
                 "jitter_correlation_pct": 25.0 if args.jitter_ms else 0.0}  # fmt: skip
            profile = NetworkProfile(
                f"loss{loss}",
                up=Direction(**d, loss_pct=loss if args.both else 0.0),
                down=Direction(**d, loss_pct=loss),
                seed=3,
            )
            turns = [t for t in _turns(Path(tmp) / f"l{loss}", profile, args.turns) if t.ok]
            meds = []
            for name, scale, _ in FIGURES:
                vals = [
                    float(t.segments.get(name) or t.figures.get(name) or 0) / scale for t in turns
                ]
                meds.append(statistics.median(vals) if vals else float("nan"))
            rows.append((loss, len(turns), meds))
    print("| down loss | turns | " + " | ".join(label for *_, label in FIGURES) + " |")
    print("| --- " * (len(FIGURES) + 2) + "|")
    for loss, n, meds in rows:
        print(f"| {loss:g} % | {n} | " + " | ".join(f"{m:.0f}" for m in meds) + " |")
    print(f"# load after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
