"""How accurate are a call's figures? Greeting latency and per-turn e2e vs the emulator's truth.

    python bench/call_accuracy.py                      # 1 and 20 concurrent calls (~3 min)
    python bench/call_accuracy.py --calls 1,5 --turns 3

The OpenAI emulator runs in its own process (`voicelat serve openai --truth FILE`, the exact,
fixed delays of bench/accuracy.py). voicelat runs whole calls against it
(`voicelat run --scenario`'s engine): each call greets (voicelat's cascade speaks the
scenario's greeting through the TTS), then the caller speaks ``--turns`` times, each after a
400 ms human gap once the reply has played, on one session whose LLM sees the conversation so
far. N calls run at once (``--calls``), each on a session of its own whose model names tie
every exchange in the ground truth to its call.

Errors vs truth (voicelat's stamp minus the emulator's stamp of the write that carried the
bytes; same CLOCK_MONOTONIC):

- **greeting**: the greeting's first audible sample at the sink minus (the greeting's TTS
  exchange's ``first_audio_written`` + the onset of the emulator's audio);
- **e2e per turn**: as bench/accuracy.py (speech_end -> output_first_audible vs the turn's TTS
  ``first_audio_written`` + onset), by the turn's index in its call.

The last line is ``p99_error_ms=<worst P99 error vs truth over greeting and e2e>``.
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

from _common import (
    MS,
    Profile,
    dist_ms,
    fmt,
    machine,
    machine_line,
    pipeline,
    serve,
    session_models,
    write_fixture,
)
from accuracy import _after, _index, _onset_ns, errors_of

from voicelat.core.base.plan import PlannedTurn
from voicelat.core.calls.call import CALL_TURN, CallRecord, Scenario, Step
from voicelat.core.measure.schedule import Load
from voicelat.engine.call import plan_calls
from voicelat.engine.runner import Runner
from voicelat.files.fixtures import load_fixtures
from voicelat.files.results import read_calls

GAP_MS = 400


def _scenario(turns: int) -> Scenario:
    steps = (
        Step("greeting"),
        *tuple(
            Step("say", fixture="tone", gap_ms=GAP_MS, line=f"step {k + 2}") for k in range(turns)
        ),
    )
    return Scenario("bench-call", steps, greeting="Hello, thanks for calling.")


def greeting_errors(
    records: list[CallRecord], truth: list[dict[str, Any]], profile: Profile
) -> list[int]:
    """Each greeting's first audible sample minus its TTS exchange's first audio + onset."""
    idx, onset, out = _index(truth), _onset_ns(profile), []
    for r in records:
        if r.greeting_first_audible_ns is None or r.session is None:
            continue
        speech = _after(idx.get(("speech", f"gpt-4o-mini-tts-s{r.session}"), []), r.connected_ns)
        if speech is not None:
            out.append(
                r.greeting_first_audible_ns - (speech["marks"]["first_audio_written"] + onset)
            )
    return out


def run_calls(n: int, turns: int, profile: Profile, work: Path, fixtures: Path) -> dict[str, Any]:
    """``n`` concurrent calls of ``turns`` turns against a fresh emulator process."""
    with serve(profile, work / f"serve-{n}") as served:
        p = pipeline(served.base_url)
        fx = load_fixtures(fixtures)
        calls = plan_calls([_scenario(turns)], repeat=n)
        plan = [
            PlannedTurn(c.first_index + i, "tone", 0, False) for c in calls for i in range(turns)
        ]
        out_dir = work / f"run-{n}-{time.monotonic_ns()}"
        runner = Runner(p, fx, out_dir, calls=calls)
        runner.session_stages = session_models(p)
        t0 = time.monotonic()
        outcome = asyncio.run(runner.run(plan, load=Load(concurrency=n)))
        wall = time.monotonic() - t0
    truth = served.truth()
    records = read_calls(out_dir)
    by_index: dict[int, list[int]] = {}
    for t in outcome.turns:
        errs = errors_of([t], truth, profile)["e2e"]["truth"]
        by_index.setdefault(int(t.extra[CALL_TURN]), []).extend(errs)
    every = [e for v in by_index.values() for e in v]
    greet = greeting_errors(records, truth, profile)
    s = outcome.summary
    return {
        "calls": n,
        "turns": len(outcome.turns),
        "failed": sum(t.failed for t in outcome.turns),
        "greetings": len(greet),
        "wall_s": round(wall, 1),
        "errors_ms": {
            "greeting": dist_ms(greet),
            "e2e": dist_ms(every),
            **{f"e2e_turn_{k}": dist_ms(v) for k, v in sorted(by_index.items())},
        },
        "greeting_ms": {
            k: s["calls"]["greeting"].get(k) and s["calls"]["greeting"][k] / MS
            for k in ("p50", "p90")
        },
        "trust": "ok" if (s.get("trust") or {}).get("trustworthy", True) else "distrusted",
        "loadavg_1min": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--calls", default="1,20", help="concurrent calls, comma-separated (1,20)")
    ap.add_argument("--turns", type=int, default=4, help="caller turns per call (4)")
    ap.add_argument("--json", type=Path, help="write every figure here as JSON")
    args = ap.parse_args(argv)
    print(f"voicelat call accuracy bench, {time.strftime('%Y-%m-%d %H:%M')}; {machine_line()}")
    print(
        f"command: python bench/call_accuracy.py {' '.join(sys.argv[1:] if argv is None else argv)}"
    )
    base = Profile()
    results: dict[str, Any] = {"machine": machine(), "runs": []}
    worst = 0.0
    with tempfile.TemporaryDirectory(prefix="voicelat-call-accuracy-") as tmp:
        work = Path(tmp)
        fixtures = write_fixture(work / "fixtures")
        for n in (int(x) for x in args.calls.split(",") if x.strip()):
            r = run_calls(n, args.turns, base, work, fixtures)
            results["runs"].append(r)
            print(
                f"\n{n} concurrent call(s): {r['turns']} turns ({r['failed']} failed), "
                f"{r['greetings']} greetings, {r['wall_s']} s, load {r['loadavg_1min']}, "
                f"trust {r['trust']}"
            )
            for name, d in r["errors_ms"].items():
                print(f"  {name:<14} error vs truth ms: {fmt(d)}")
                if name in ("greeting", "e2e"):
                    worst = max(worst, d.get("p99") or 0)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    print(f"\np99_error_ms={worst:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
