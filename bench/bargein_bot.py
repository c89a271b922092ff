"""Where a real Pipecat bot's stop goes, per transport: interruptions timed at the ear.

    python bench/bargein_bot.py                   # pipecat-ws, webrtc, twilio: 5 calls each (~3 min)
    python bench/bargein_bot.py --calls 3 --transports ws,twilio

The bot is tests/agents/pipecat_transport_agent.py with ``--interruptible``: Pipecat's own
transports and serializer, its bundled Silero VAD (``stop_secs`` 0.3, start 0.2 s), a 5 s
canned reply; the caller's speech starting during a reply interrupts it as Pipecat does
(``broadcast_interruption``: the output transport drops its queued audio, the serializer tells
the client: the protobuf interruption frame over pipecat-ws, Twilio's ``clear`` over twilio,
nothing in-band over WebRTC). Each call is scenarios-style: a question, an interruption 500 ms after the reply
became audible (``int_01_wait``), a last turn. Per transport: the stop latency (onset -> the
bot silent at the ear) and its waterfall, P50 / P90 over the calls.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._common import machine_line  # noqa: E402
from tests.bargein.bargein_helpers import INTERRUPT_STEPS, scenario  # noqa: E402
from tests.stages.agent_helpers import pipecat_agent  # noqa: E402
from voicelat.core.base.plan import PlannedTurn  # noqa: E402
from voicelat.core.base.stats import Distribution  # noqa: E402
from voicelat.core.calls.bargein import OverlayOutcome  # noqa: E402
from voicelat.engine.call import plan_calls  # noqa: E402
from voicelat.engine.runner import Runner  # noqa: E402
from voicelat.engine.stageset import AgentStageSet  # noqa: E402
from voicelat.files.pipeline import parse_pipeline  # noqa: E402
from voicelat.files.results import read_calls  # noqa: E402
from voicelat.files.scenario import load_scenario  # noqa: E402
from voicelat.stages.pipecat_ws import PipecatWs  # noqa: E402
from voicelat.stages.twilio import Twilio  # noqa: E402
from voicelat.stages.webrtc import WebRTC  # noqa: E402

MS = 1_000_000
TRANSPORTS = {
    "ws": ("pipecat-ws", PipecatWs, "ws://127.0.0.1:{port}"),
    "webrtc": ("webrtc", WebRTC, "http://127.0.0.1:{port}/api/offer"),
    "twilio": ("twilio", Twilio, "ws://127.0.0.1:{port}/ws"),
}


def run(transport: str, calls: int, work: Path, port: int) -> list[OverlayOutcome]:
    name, stage, url = TRANSPORTS[transport]
    loaded = load_scenario(scenario(work, f"bot-{transport}", INTERRUPT_STEPS))
    planned = plan_calls([loaded.scenario], repeat=calls)
    plan = [PlannedTurn(c.first_index + i, f, 0, False) for c in planned
            for i, f in enumerate(c.scenario.fixture_ids())]  # fmt: skip
    table = {"stage": name, "url": url.format(port=port), "reply_idle_ms": 400}
    pipeline = parse_pipeline({"agent": table, "turn": {"timeout_s": 25}})
    out = work / f"out-{transport}"
    extra = ("--tone-ms", "5000", "--stop-ms", "300", "--interruptible")
    with pipecat_agent(transport, port, *extra):
        runner = Runner(pipeline, list(loaded.fixtures.values()), out, calls=planned)
        made = stage(pipeline.agent or {})
        runner.build_stages = lambda: AgentStageSet.agent_of(made)  # type: ignore[method-assign]
        asyncio.run(runner.run(plan))
    return [o for r in read_calls(out) for o in r.overlays]


def _ms(values: list[int]) -> str:
    d = Distribution.of(values)
    if not d.n:
        return "-"
    return f"{(d.p50 or 0) / MS:.0f} / {(d.p90 or 0) / MS:.0f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--transports", default="ws,webrtc,twilio")
    args = ap.parse_args()
    print(f"voicelat barge-in through a Pipecat bot, {time.strftime('%Y-%m-%d %H:%M')}; "
          f"{machine_line()}")  # fmt: skip
    print(f"command: python bench/bargein_bot.py {' '.join(sys.argv[1:])}")
    with tempfile.TemporaryDirectory() as tmp:
        for k, transport in enumerate(t for t in args.transports.split(",") if t):
            overlays = run(transport, args.calls, Path(tmp), 9295 + k)
            stops = [o.stop_ns for o in overlays if o.stop_ns is not None]
            segments: dict[str, list[int]] = {}
            for o in overlays:
                for name, v in o.segments.items():
                    segments.setdefault(name, []).append(v)
            inferred = sum(1 for o in overlays if o.extra.get("stop_inferred"))
            print(f"\n{transport}: {len(overlays)} interruptions, {len(stops)} stopped "
                  f"({inferred} inferred), stop P50 / P90 ms {_ms(stops)}")  # fmt: skip
            for name, values in segments.items():
                print(f"  {name:<26} P50 / P90 ms {_ms(values)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
