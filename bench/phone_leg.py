"""The phone leg on the emulated cascade: clean vs ``--network phone``, segment by segment.

    python bench/phone_leg.py

Runs tests/network/test_phone_leg.py's set-up (the openai emulator, kitchen_lights and
call_mom, 4 measured turns + 1 warm-up), clean then under the built-in ``phone`` profile, and
prints the P50 of e2e and of each segment, the per-turn lost frames (up, down) and underruns,
and the summary's realised impairment (docs/BENCHMARKS.md, "The phone leg on the audio").
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


async def _main() -> None:
    from tests.network.test_phone_leg import PROFILE, _run
    from voicelat.emulate import Emulators

    os.environ.setdefault("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    out = Path(tempfile.mkdtemp(prefix="phone-leg-"))
    async with Emulators(["openai"], profile=PROFILE, seed=2) as em:
        clean, _ = await _run(em, out / "clean", None)
        phone, summary = await _run(em, out / "phone", "phone")
    for name, outcome in (("clean", clean), ("phone", phone)):
        turns = [t for t in outcome.turns if not t.warmup]
        segs = {
            k: round(statistics.median(t.segments[k] for t in turns if k in t.segments) / 1e6, 1)
            for k in turns[0].segments
        }
        e2e = statistics.median(t.e2e_ns for t in turns) / 1e6
        print(f"{name}: e2e P50 {e2e:.1f} ms; segments P50 {segs}")
        print(
            "  lost frames up/down, underruns per turn:",
            [
                (
                    t.figures.get("phone_up_lost_frames"),
                    t.figures.get("phone_down_lost_frames"),
                    t.figures.get("sink_underruns"),
                )
                for t in turns
            ],
        )
    print("realised:", summary["network"]["realised"])
    print("load average:", os.getloadavg())


if __name__ == "__main__":
    asyncio.run(_main())
