"""The provider's own clock against the emulator's truth: how exact is the split?

    python bench/provider_clock.py              # 12 turns, one session (~1 min)
    python bench/provider_clock.py --turns 40

The OpenAI emulator runs in its own process (`voicelat serve openai --truth FILE`, bench/_common)
with exact delays (headers 10 ms, the rest as bench/accuracy.py) and sends
`openai-processing-ms`, the time to its response head as written. voicelat runs real turns
(openai-stt -> openai chat -> openai-tts) and splits each stage into what the header reported
(`<stage>_provider_ns`) and the rest (`<stage>_overhead_ns`, request handed over -> response
headers, minus the report). Per stage it prints:

- **reported - truth**: the header minus the emulator's own `request_received -> headers_written`
  (whole ms, so within +-0.5 ms plus the microseconds between computing and writing it);
- **rest**: measured - reported: loopback network, the client's send and read, the upload
  (STT sends the whole recording), and the header's rounding.

Medians and P90 over the warm turns, with the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Profile, machine_line, pipeline, serve, write_fixture

from voicelat.core.base.plan import plan_turns
from voicelat.core.base.stats import percentile
from voicelat.engine.runner import Runner
from voicelat.files.fixtures import load_fixtures

ENDPOINTS = {"stt": "transcriptions", "llm": "chat", "tts": "speech"}


def _truth_head_ms(truth: list[dict[str, Any]], endpoint: str, after_ns: int) -> float | None:
    for ex in truth:
        marks = ex["marks"]
        if ex["endpoint"] == endpoint and marks.get("request_received", -1) >= after_ns:
            head = marks.get("headers_written")
            return None if head is None else (head - marks["request_received"]) / 1e6
    return None


def run(turns: int, work: Path) -> dict[str, dict[str, list[float]]]:
    fixtures = write_fixture(work / "fixtures")
    out: dict[str, dict[str, list[float]]] = {s: {"error": [], "rest": []} for s in ENDPOINTS}
    with serve(Profile(), work / "serve") as served:
        p = pipeline(served.base_url)
        fx = load_fixtures(fixtures)
        runner = Runner(p, fx, work / "run")
        plan = plan_turns([f.id for f in fx], turns=turns, warmup=1)
        outcome = asyncio.run(runner.run(plan))
        time.sleep(0.3)  # the truth file is written as each exchange closes
        truth = sorted(served.truth(), key=lambda ex: ex["marks"].get("request_received", 0))
    for turn in outcome.turns:
        if turn.warmup or turn.failed:
            continue
        for stage, endpoint in ENDPOINTS.items():
            reported = turn.figures.get(f"{stage}_provider_ns")
            rest = turn.figures.get(f"{stage}_overhead_ns")
            head = _truth_head_ms(truth, endpoint, turn.t0_ns)
            if isinstance(reported, int) and isinstance(rest, int) and head is not None:
                out[stage]["error"].append(reported / 1e6 - head)
                out[stage]["rest"].append(rest / 1e6)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=12)
    args = ap.parse_args(argv)
    os.environ.setdefault("VOICELAT_EMULATOR_KEY", "bench")
    print(f"voicelat provider-clock bench, {time.strftime('%Y-%m-%d %H:%M')}; {machine_line()}")
    with tempfile.TemporaryDirectory() as tmp:
        got = run(args.turns, Path(tmp))
    print(f"{'stage':<6}{'n':>4}  {'reported-truth P50/P90 ms':>26}  {'rest P50/P90 ms':>18}")
    for stage, d in got.items():
        err, rest = d["error"], d["rest"]
        if not err:
            print(f"{stage:<6}{0:>4}  (no report)")
            continue
        e = f"{percentile(err, 50):+.2f} / {percentile(err, 90):+.2f}"
        r = f"{percentile(rest, 50):.2f} / {percentile(rest, 90):.2f}"
        print(f"{stage:<6}{len(err):>4}  {e:>26}  {r:>18}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
