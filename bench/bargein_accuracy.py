"""How accurate are voicelat's barge-in figures? Measured vs the realtime emulator's truth.

    python bench/bargein_accuracy.py                   # 1 and 20 concurrent calls (~2 min)
    python bench/bargein_accuracy.py --calls 1,5 --stop-ms 200

The OpenAI Realtime emulator runs in its own process (`voicelat serve openai-realtime --truth
FILE`, bench/s2s_accuracy.py's exact delays) and is told to keep streaming ``--stop-ms`` after
a barge-in (its ``cancel_stop``). Each call (one realtime session) is two turns: the caller
speaks, then cuts into the reply ``after_ms`` after it became audible with a second utterance
(an ``interrupt`` step, docs/BARGE_IN.md). The emulator's server VAD hears the interruption,
writes ``speech_started`` and cancels the response (``turn_detected``); voicelat flushes its
playback and sends ``response.cancel`` + ``conversation.item.truncate``. N calls run at once.

Errors vs truth (voicelat's stamp minus the emulator's stamp of the write that carried the
bytes; ``perf_counter_ns``, the same CLOCK_MONOTONIC in both processes):

- **detection**: voicelat's detection (``speech_started`` arrived) - its write;
- **last byte**: the last audio delta's arrival - the emulator's last audio write (the drain's
  end);
- **provider drain**: voicelat's drain (detection -> last byte) - the truth's (speech_started
  write -> last audio write): it should be ``--stop-ms`` on both sides;
- **ear after detection**: the last audible sample at the sink - the detection (voicelat's own
  flush; not a truth error, shown to bound the flush segment).

The last line is ``p99_error_ms=<worst P99 of the detection, last byte and drain errors>``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import KEY_ENV, dist_ms, fmt, machine, machine_line, serve, write_fixture
from s2s_accuracy import RealtimeProfile, realtime_pipeline

from voicelat.core.base.plan import PlannedTurn
from voicelat.core.calls.bargein import OverlayOutcome
from voicelat.core.calls.call import Scenario, Step
from voicelat.core.measure.schedule import Load
from voicelat.engine.call import plan_calls
from voicelat.engine.runner import Runner
from voicelat.files.fixtures import load_fixtures
from voicelat.files.results import read_calls

AFTER_MS = 600


class _Profile(RealtimeProfile):
    stop_ms: float = 120.0

    def toml(self) -> str:
        base = super().toml()
        return base.replace(
            '["openai-realtime".latency]\n',
            f'["openai-realtime".latency]\ncancel_stop = {self.stop_ms}\n',
        )


def _scenario() -> Scenario:
    return Scenario(
        "bench-bargein",
        (
            Step("say", fixture="tone", gap_ms=0, line="step 1"),
            Step("interrupt", fixture="tone", after_ms=AFTER_MS, line="step 2"),
        ),
    )


def _match(overlays: list[OverlayOutcome], truth: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
    """Each stopped interruption with the cancelled response whose speech_started write came
    last before voicelat saw it (a response is used once)."""
    cancelled = [
        r
        for e in truth
        if e.get("endpoint") == "realtime"
        for r in e.get("responses") or ()
        if r.get("status") == "cancelled" and r.get("cancel_ns") is not None
    ]
    used: set[int] = set()
    out = []
    for o in sorted((o for o in overlays if o.detected_ns is not None), key=lambda o: o.detected_ns or 0):
        best = max(
            (r for r in cancelled if id(r) not in used and r["cancel_ns"] <= (o.detected_ns or 0)),
            key=lambda r: r["cancel_ns"],
            default=None,
        )
        if best is not None:
            used.add(id(best))
            out.append((o, best))
    return out


def run_calls(n: int, profile: _Profile, work: Path, fixtures: Path) -> dict[str, Any]:
    os.environ.setdefault(KEY_ENV, "bench-key")
    with serve(profile, work / f"serve-{n}", name="openai-realtime") as served:  # type: ignore[arg-type]
        p = realtime_pipeline(served.base_url)
        fx = load_fixtures(fixtures)
        calls = plan_calls([_scenario()], repeat=n)
        plan = [PlannedTurn(c.first_index + i, "tone", 0, False) for c in calls for i in range(2)]
        out_dir = work / f"run-{n}-{time.monotonic_ns()}"
        runner = Runner(p, fx, out_dir, calls=calls)
        t0 = time.monotonic()
        outcome = asyncio.run(runner.run(plan, load=Load(concurrency=n)))
        wall = time.monotonic() - t0
    overlays = [o for r in read_calls(out_dir) for o in r.overlays]
    pairs = _match(overlays, served.truth())
    errors: dict[str, list[float]] = {"detection": [], "last_byte": [], "provider_drain": []}
    ear: list[float] = []
    for o, r in pairs:
        assert o.detected_ns is not None
        errors["detection"].append(o.detected_ns - r["cancel_ns"])
        if o.last_byte_ns is not None and r.get("last_audio_ns") is not None:
            errors["last_byte"].append(o.last_byte_ns - r["last_audio_ns"])
            truth_drain = r["last_audio_ns"] - r["cancel_ns"]
            errors["provider_drain"].append((o.provider_drain_ns or 0) - truth_drain)
        if o.last_audible_ns is not None:
            ear.append(o.last_audible_ns - o.detected_ns)
    stops = [o.stop_ns for o in overlays if o.stop_ns is not None]
    drains = [o.provider_drain_ns for o in overlays if o.provider_drain_ns is not None]
    s = outcome.summary
    return {
        "calls": n,
        "turns": len(outcome.turns),
        "failed": sum(t.failed for t in outcome.turns),
        "interruptions": len(overlays),
        "matched": len(pairs),
        "wall_s": round(wall, 1),
        "errors_ms": {k: dist_ms(v) for k, v in errors.items()},
        "ear_after_detection_ms": dist_ms(ear),
        "stop_ms": dist_ms([float(x) for x in stops]),
        "provider_drain_ms": dist_ms([float(x) for x in drains]),
        "trust": "ok" if (s.get("trust") or {}).get("trustworthy", True) else "distrusted",
        "loadavg_1min": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--calls", default="1,20", help="concurrent calls, comma-separated (1,20)")
    ap.add_argument("--stop-ms", type=float, default=120.0, help="the emulator's cancel_stop (120)")
    ap.add_argument("--json", type=Path, help="write every figure here as JSON")
    args = ap.parse_args(argv)
    print(f"voicelat barge-in accuracy bench, {time.strftime('%Y-%m-%d %H:%M')}; {machine_line()}")
    print(f"command: python bench/bargein_accuracy.py {' '.join(sys.argv[1:] if argv is None else argv)}")
    profile = _Profile(timer="spin", ms_per_char=60.0, audio_chunk=40.0)
    profile.stop_ms = args.stop_ms
    results: dict[str, Any] = {"machine": machine(), "stop_ms": args.stop_ms, "runs": []}
    worst = 0.0
    with tempfile.TemporaryDirectory(prefix="voicelat-bargein-accuracy-") as tmp:
        work = Path(tmp)
        fixtures = write_fixture(work / "fixtures")
        for n in (int(x) for x in args.calls.split(",") if x.strip()):
            r = run_calls(n, profile, work, fixtures)
            results["runs"].append(r)
            print(
                f"\n{n} concurrent call(s): {r['turns']} turns ({r['failed']} failed), "
                f"{r['interruptions']} interruptions ({r['matched']} matched to the truth), "
                f"{r['wall_s']} s, load {r['loadavg_1min']}, trust {r['trust']}"
            )
            print(f"  stop at the ear ms: {fmt(r['stop_ms'])}; provider drain ms: {fmt(r['provider_drain_ms'])}")
            for name, d in r["errors_ms"].items():
                print(f"  {name:<16} error vs truth ms: {fmt(d)}")
                worst = max(worst, abs(d.get("p99") or 0))
            print(f"  ear after detection ms (voicelat's own flush): {fmt(r['ear_after_detection_ms'])}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    print(f"\np99_error_ms={worst:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
