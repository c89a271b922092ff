"""What do ``[turn_taking] ignore_words`` cost? The cascade's stop latency with and without.

    python bench/bargein_words.py              # scenarios/interrupt.toml, one run each (~1 min)
    python bench/bargein_words.py --runs 3

voicelat's emulated cascade (the OpenAI emulator in-process on its own thread: STT, LLM, TTS
on loopback, its default latencies: the transcription's first delta ~80 ms after the upload)
runs the bundled interrupt scenario (two interruptions, "Wait, actually..." and "Sorry, I
meant...") under ``[turn_taking]`` defaults, then under the same policy with
``ignore_words = ["mm-hmm", "yeah", "right", "okay"]``. Printed per policy: each stop and its
detection (onset -> detected) and, with the words, the detection's ``vad`` and ``words``
parts; then the medians and the extra stop latency (words minus VAD only). The runs are one
after the other, never side by side, so neither loads the other.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import machine_line

from tests.helpers import emulated_openai_pipeline
from voicelat.core.base.plan import PlannedTurn
from voicelat.core.calls.bargein import OverlayOutcome
from voicelat.emulate import Emulators
from voicelat.engine.call import plan_calls
from voicelat.engine.runner import Runner
from voicelat.files.pipeline import TurnTaking
from voicelat.files.results import read_calls
from voicelat.files.scenario import load_scenario

ROOT = Path(__file__).resolve().parent.parent
MS = 1_000_000
REPLY = (
    "The forecast for today is mostly sunny with a light breeze from the west, "
    "highs around twenty two degrees, and a small chance of rain late in the evening, "
    "so you may want to bring a light jacket if you are out after dark."
)
WORDS = ("mm-hmm", "yeah", "right", "okay")


async def _run(taking: TurnTaking, workdir: Path) -> list[OverlayOutcome]:
    loaded = load_scenario(ROOT / "scenarios" / "interrupt.toml")
    plan = [PlannedTurn(i, f, 0, False) for i, f in enumerate(loaded.scenario.fixture_ids())]
    profile = {
        "openai": {"content": {"reply": REPLY, "fixtures": str(ROOT / "fixtures" / "calls")}}
    }
    async with Emulators(["openai"], profile=profile, seed=1, thread=True) as em:
        pipeline = replace(emulated_openai_pipeline(em), turn_taking=taking)
        calls = plan_calls([loaded.scenario])
        runner = Runner(pipeline, list(loaded.fixtures.values()), workdir, calls=calls)
        await runner.run(plan)
    return [o for c in read_calls(workdir) for o in c.overlays if o.kind == "interrupt"]


def _ms(ns: int | None) -> str:
    return "-" if ns is None else f"{ns / MS:.1f}"


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    os.environ.setdefault("VOICELAT_EMULATOR_KEY", "bench-key")
    print(machine_line())
    print(f"load before: {os.getloadavg()[0]:.2f}")
    stops: dict[str, list[int]] = {"vad": [], "words": []}
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(args.runs):
            for label, taking in (("vad", TurnTaking()), ("words", TurnTaking(ignore_words=WORDS))):
                t = time.perf_counter()
                outs = await _run(taking, Path(tmp) / f"{label}{run}")
                for o in outs:
                    parts = o.detection_parts
                    print(
                        f"{label:5} {o.fixture:12} stop {_ms(o.stop_ns)} ms  detection "
                        f"{_ms(o.segments.get('detection'))}  vad {_ms(parts.get('vad'))}  "
                        f"words {_ms(parts.get('words'))}  verdict {o.words_verdict or '-'}  "
                        f"heard {o.words!r}"
                    )
                    if o.stop_ns is not None:
                        stops[label].append(o.stop_ns)
                print(f"  ({time.perf_counter() - t:.1f} s, load {os.getloadavg()[0]:.2f})")
    med = {k: statistics.median(v) for k, v in stops.items() if v}
    print(
        f"median stop: vad only {_ms(int(med['vad']))} ms, with words {_ms(int(med['words']))} ms"
    )
    print(f"extra_stop_ms={(med['words'] - med['vad']) / MS:.1f}")


if __name__ == "__main__":
    asyncio.run(main())
