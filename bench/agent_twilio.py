"""The ``twilio`` agent stage against a real Pipecat agent on loopback, whose timing is known.

    python bench/agent_twilio.py                 # 16 measured turns (~80 s)
    python bench/agent_twilio.py --turns 32 --stop-ms 200

The agent (tests/agents/pipecat_agent.py, its own process) is Pipecat's
FastAPIWebsocketTransport + TwilioFrameSerializer + the Silero VAD analyzer (``stop_secs`` =
``--stop-ms``) + a canned reply: ``--lead-ms`` of silence, then a tone, at 16 kHz. voicelat
runs real turns through the runner on the bundled fixtures (one warm-up), one call per turn.
Printed: the machine and load average, P50 / P90 / max of each segment and e2e, and what the
known parts explain: ``agent_response`` - the VAD's stop time (the rest is Silero's view of
the end of speech, its analysis windows, packetization and resampling) and
``leading_silence`` - the clip's lead (the rest is Pipecat's output chunking).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import ROOT, dist_ms, machine_line
from tests.agents.pipecat_agent import running_agent
from voicelat.core.base.plan import plan_turns
from voicelat.engine.runner import Runner
from voicelat.engine.stageset import AgentStageSet
from voicelat.files.fixtures import load_fixtures
from voicelat.files.pipeline import parse_pipeline
from voicelat.stages.twilio import Twilio

MS = 1_000_000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--turns", type=int, default=16)
    ap.add_argument("--port", type=int, default=9148)
    ap.add_argument("--stop-ms", type=int, default=300)
    ap.add_argument("--lead-ms", type=int, default=100)
    args = ap.parse_args()
    print(machine_line())
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    with running_agent(args.port, stop_ms=args.stop_ms, lead_ms=args.lead_ms) as url:
        table = {"stage": "twilio", "url": f"{url}/twilio", "reply_idle_ms": 800}
        pipeline = parse_pipeline({"agent": table})
        fixtures = load_fixtures(ROOT / "fixtures")
        runner = Runner(pipeline, fixtures, Path(tempfile.mkdtemp()) / "run")
        runner.build_stages = lambda: AgentStageSet.agent_of(Twilio(table))  # type: ignore[method-assign]
        asyncio.run(runner.run(plan_turns([f.id for f in fixtures], turns=args.turns, warmup=1)))
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    turns = [t for t in runner.turns if t.headline]
    print(f"{len(turns)} measured turns, {sum(t.failed for t in runner.turns)} failed")
    for name in ("agent_response", "leading_silence", "playout"):
        d = dist_ms([t.segments[name] for t in turns])
        print(f"  {name:<16} P50 {d['p50']:8.1f}  P99 {d['p99']:8.1f}  max {d['max']:8.1f} ms")
    e2e = dist_ms([t.e2e_ns or 0 for t in turns])
    print(f"  {'e2e':<16} P50 {e2e['p50']:8.1f}  P99 {e2e['p99']:8.1f}  max {e2e['max']:8.1f} ms")
    beyond_vad = dist_ms([t.segments["agent_response"] - args.stop_ms * MS for t in turns])
    beyond_lead = dist_ms([t.segments["leading_silence"] - args.lead_ms * MS for t in turns])
    print(f"agent_response - VAD stop ({args.stop_ms} ms): P50 {beyond_vad['p50']:.1f} ms")
    print(f"leading_silence - clip lead ({args.lead_ms} ms): P50 {beyond_lead['p50']:.1f} ms")
    sums = all(sum(t.segments.values()) == t.e2e_ns for t in turns)
    print(f"every turn's segments sum exactly to its e2e: {sums}")


if __name__ == "__main__":
    main()
