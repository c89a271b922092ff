"""Measure the example bot: start-up, reply time per transport seen from the caller, memory.

Starts the stack and the bot through voicelat's manager (``PipecatBot``), then plays each
fixture once per transport with ``call.py`` (real time, then silence, hang up 1 s after the
reply), and prints one line per transport::

    python examples/pipecat-bot/measure.py --port 9152 --stt-port 10400 --tts-port 10401 \
        --llm-port 8180 --state-dir /tmp/h2state --turns 3

"reply" = the fixture's ground-truth speech end (fixtures/manifest.json) to the first audible
reply sample received by the client, on the client's clock (so it includes the bot's
endpointing wait, STT, LLM, TTS, its output transport and, for webrtc, Opus and the jitter
buffer). A rough smoke figure: voicelat's agent stages measure this properly.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

import call  # noqa: E402

from voicelat.stack.agent import AgentConfig, PipecatBot  # noqa: E402
from voicelat.stack.config import StackConfig  # noqa: E402


def _mem(pid: int) -> str:
    fields = dict(ln.split(":", 1) for ln in Path(f"/proc/{pid}/status").read_text().splitlines())
    rss, hwm = (int(fields[k].split()[0]) // 1024 for k in ("VmRSS", "VmHWM"))
    return f"RSS {rss} MB, peak {hwm} MB"


async def _turns(urls: dict[str, str], fixtures: list[dict[str, object]], n: int) -> None:
    for transport, url in urls.items():
        replies: list[float] = []
        failed = 0
        for i in range(n):
            fx = fixtures[i % len(fixtures)]
            tail_s = (int(fx["duration_ms"]) - int(fx["speech_end_ms"])) / 1000  # type: ignore[call-overload]
            result = await call.CALLS[transport](
                url, str(ROOT / "fixtures" / str(fx["file"])), listen_s=16.0, idle_s=1.0
            )
            if result.response_s is None:
                failed += 1
            else:
                replies.append((result.response_s + tail_s) * 1000)
        if replies:
            print(
                f"{transport:<10} speech_end -> first audible reply: median "
                f"{statistics.median(replies):.0f} ms, min {min(replies):.0f}, "
                f"max {max(replies):.0f} (n={len(replies)}, no reply {failed})",
                flush=True,
            )
        else:
            print(f"{transport:<10} no reply in {n} calls", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--port", type=int, default=9152)
    p.add_argument("--stt-port", type=int, default=10400)
    p.add_argument("--tts-port", type=int, default=10401)
    p.add_argument("--llm-port", type=int, default=8180)
    p.add_argument("--state-dir", type=Path, default=Path("/tmp/pipecat-bot-measure"))
    p.add_argument("--turns", type=int, default=3)
    args = p.parse_args()
    fixtures = json.loads((ROOT / "fixtures" / "manifest.json").read_text())["fixtures"]
    stack = StackConfig(
        stt_port=args.stt_port,
        tts_port=args.tts_port,
        llm_port=args.llm_port,
        state_dir=args.state_dir,
    )
    cfg = AgentConfig(stack=stack, port=args.port, otlp_endpoint=None)
    print(f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
    with PipecatBot(cfg) as bot:
        t0 = time.monotonic()
        status = bot.up()
        print(
            f"stack + bot up in {time.monotonic() - t0:.2f} s (bot alone "
            f"{status.startup_s:.2f} s: models loaded and warmed); {_mem(status.pid or 0)}",
            flush=True,
        )
        asyncio.run(_turns(status.urls, fixtures, args.turns))
        print(f"after the calls: {_mem(status.pid or 0)}", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
