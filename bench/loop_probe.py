"""Do the two loop-lag probes see the same lag? Both side by side on one loop, under load.

    python bench/loop_probe.py                          # quiet, gil, loop, cpu at 1 session (~6 min)
    python bench/loop_probe.py --modes cpu --sessions 10 --turns 3

The accuracy bench's runs (bench/accuracy.py: openai-stt -> chat -> tts against the OpenAI
emulator in its own process, a 2 s utterance paced in real time, ~5 s per turn), with two
probes on the measuring loop at once: the run's own, ``wakeups`` (the pacer's frame wake-ups
are its samples, its own 20 ms timer fills only their gaps), and ``timer`` (a wake-up of its
own every 20 ms: the probe before the wakeups kind), started together and compared over the same
window. Disturbances (``--modes``):

- ``quiet``: nothing added.
- ``gil``: a thread of the measuring process spinning in Python: the loop waits for the GIL
  (5 ms switch interval), as it does behind a busy writer or exporter thread.
- ``loop``: blocking work on the loop itself, 5-30 ms every 100-400 ms (seeded): what the
  trust section's loop-lag check exists to see.
- ``cpu``: two processes spinning on this 2-core machine: the measuring process waits for a
  CPU.

Per probe: samples, lag P50 / P99 / max, the share of samples over the trust threshold (5 ms),
the turns whose window holds a lag over it, and the trust verdict the run's turns get with that
probe's samples (assess_trust: same turns, same machine samples; only the loop lag differs).
The accuracy bench's worst P99 error vs truth shows how disturbed the run's stamps were.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    Profile,
    dist_ms,
    machine,
    machine_line,
    pipeline,
    serve,
    session_models,
    write_fixture,
)
from accuracy import METRICS, errors_of

from voicelat.core.base.plan import plan_turns
from voicelat.core.measure.schedule import Load
from voicelat.core.summaries.diagnostics import TrustThresholds, assess_trust
from voicelat.engine.probes import LoopLagProbe
from voicelat.engine.runner import Runner
from voicelat.files.fixtures import load_fixtures

MODES = ("quiet", "gil", "loop", "cpu")
LIMIT_NS = TrustThresholds().loop_lag_p99_ns


@contextlib.contextmanager
def gil_hog() -> Iterator[None]:
    """A thread spinning in Python for the block's duration."""
    stop = threading.Event()

    def spin() -> None:
        n = 0
        while not stop.is_set():
            n += 1

    t = threading.Thread(target=spin, daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()


@contextlib.contextmanager
def cpu_hog(n: int = 2) -> Iterator[None]:
    """``n`` processes spinning for the block's duration (ended by their pid)."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


async def loop_hog(seed: int = 7) -> None:
    """Blocking work on the loop, 5-30 ms every 100-400 ms, until cancelled."""
    rng = random.Random(seed)
    while True:
        await asyncio.sleep(rng.uniform(0.1, 0.4))
        time.sleep(rng.uniform(0.005, 0.030))  # blocks the loop: the disturbance itself


def _window(probe: LoopLagProbe, a: int, b: int) -> list[int]:
    return [lag for t, lag in zip(probe.times, probe.lags, strict=True) if a <= t <= b]


def _probe_figures(
    probe: LoopLagProbe, a: int, b: int, turns: list[Any], machine_samples: list[Any]
) -> dict[str, Any]:
    lags = _window(probe, a, b)
    trust = assess_trust(turns, lags, machine=machine_samples)
    windows = [
        (t.t0_ns, t.t0_ns + max([0, *(v for v in t.milestones.values() if isinstance(v, int))]))
        for t in turns
    ]
    over = sum(1 for s, e in windows if (probe.max_between(s, e) or 0) > LIMIT_NS)
    return {
        "n": len(lags),
        "per_s": round(len(lags) / ((b - a) / 1e9), 1),
        "lag_ms": dist_ms([float(v) for v in lags]),
        "over_limit_share": round(sum(v > LIMIT_NS for v in lags) / max(1, len(lags)), 4),
        "turns_over_limit": over,
        "trustworthy": trust["trustworthy"],
        "reasons": [r["code"] for r in trust["reasons"]],
    }


def run_mode(
    mode: str, sessions: int, turns: int, work: Path, fixtures: Path, wide_ms: float | None
) -> dict[str, Any]:
    """One accuracy-bench run under ``mode`` with both probes on its loop (and, ``wide_ms``,
    a third: the wakeups kind with a longer own period, told of the same frames)."""
    profile = Profile()
    with serve(profile, work / f"serve-{mode}-{sessions}") as served:
        p = pipeline(served.base_url)
        fx = load_fixtures(fixtures)
        runner = Runner(p, fx, work / f"run-{mode}-{sessions}-{time.monotonic_ns()}")
        runner.session_stages = session_models(p)
        runner.loop_lag = LoopLagProbe(clock=runner.clock, kind="wakeups")
        timer = LoopLagProbe(clock=runner.clock, kind="timer")
        wide = None if wide_ms is None else LoopLagProbe(wide_ms, runner.clock, "wakeups")
        if wide is not None:
            own, also = runner.loop_lag.note, wide.note

            def tee(due: int, woke: int) -> None:
                own(due, woke)
                also(due, woke)

            runner.loop_lag.note = tee  # type: ignore[method-assign]  # the pacer tells both
        plan = plan_turns([f.id for f in fx], turns=sessions * turns, warmup=min(sessions, 10))

        async def main() -> Any:
            side = [asyncio.create_task(p.run()) for p in (timer, wide) if p is not None]
            if mode == "loop":
                side.append(asyncio.create_task(loop_hog()))
            try:
                return await runner.run(plan, load=Load(concurrency=sessions))
            finally:
                for task in side:
                    task.cancel()
                await asyncio.gather(*side, return_exceptions=True)

        hog = (
            gil_hog() if mode == "gil" else cpu_hog() if mode == "cpu" else contextlib.nullcontext()
        )
        load0 = os.getloadavg()[0]
        with hog:
            outcome = asyncio.run(main())
        load1 = os.getloadavg()[0]
    errs = errors_of(outcome.turns, served.truth(), profile)
    measured = [t for t in outcome.turns if not t.warmup]
    w = runner.loop_lag
    a, b = w.times[0], w.times[-1]
    return {
        "mode": mode,
        "sessions": sessions,
        "turns": len(measured),
        "failed": sum(t.failed for t in measured),
        "loadavg": [round(load0, 2), round(load1, 2)],
        "wakeups": _probe_figures(w, a, b, measured, runner.machine_samples)
        | {"noted_share": round(w.noted / max(1, len(w.times)), 3)},
        "timer": _probe_figures(timer, a, b, measured, runner.machine_samples),
        **(
            {}
            if wide is None
            else {"wide": _probe_figures(wide, a, b, measured, runner.machine_samples)}
        ),
        "run_trust": [r["code"] for r in outcome.summary["trust"]["reasons"]] or ["ok"],
        "worst_p99_error_ms": max(
            (errs[m]["truth"] and dist_ms(errs[m]["truth"])["p99"]) or 0 for m in METRICS
        ),
    }


def _line(name: str, f: dict[str, Any]) -> str:
    lag = f["lag_ms"]
    verdict = "ok" if f["trustworthy"] else "FLAGGED: " + ", ".join(f["reasons"])
    return (
        f"  {name:<8} {f['n']:>6} {f['per_s']:>6}/s  {lag['p50'] or 0:>6.2f} {lag['p99'] or 0:>7.2f}"
        f" {lag['max'] or 0:>7.1f}  {f['over_limit_share']:>7.2%}  {f['turns_over_limit']:>4}"
        f"  {verdict}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma-separated ({','.join(MODES)})")
    ap.add_argument("--sessions", type=int, default=1, help="concurrent sessions (1)")
    ap.add_argument("--turns", type=int, default=12, help="measured turns per session (12)")
    ap.add_argument(
        "--wide-ms",
        type=float,
        help="also a wakeups probe whose own timer waits this long (e.g. 40): a candidate",
    )
    ap.add_argument("--json", type=Path, help="write every figure here as JSON")
    args = ap.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    for m in modes:
        if m not in MODES:
            ap.error(f"unknown mode {m!r}: use {', '.join(MODES)}")
    print(f"voicelat loop-probe bench, {time.strftime('%Y-%m-%d %H:%M')}; {machine_line()}")
    print(f"command: python bench/loop_probe.py {' '.join(sys.argv[1:] if argv is None else argv)}")
    results: dict[str, Any] = {"machine": machine(), "runs": []}
    with tempfile.TemporaryDirectory(prefix="voicelat-loop-probe-") as tmp:
        work = Path(tmp)
        fixtures = write_fixture(work / "fixtures")
        for mode in modes:
            r = run_mode(mode, args.sessions, args.turns, work, fixtures, args.wide_ms)
            results["runs"].append(r)
            print(
                f"\n{mode}: {r['sessions']} session(s), {r['turns']} measured turns "
                f"({r['failed']} failed), load average {r['loadavg'][0]} -> {r['loadavg'][1]}; "
                f"worst P99 error vs truth {r['worst_p99_error_ms']:.2f} ms; run's trust: "
                f"{', '.join(r['run_trust'])}; wakeups' samples from the pacer: "
                f"{r['wakeups']['noted_share']:.0%}"
            )
            print(
                f"  {'probe':<8} {'n':>6} {'rate':>8}  {'P50':>6} {'P99':>7} {'max':>7}  "
                f"{'>5 ms':>7}  {'turns>5':>4}  trust verdict (loop lag from this probe)"
            )
            print(_line("wakeups", r["wakeups"]))
            print(_line("timer", r["timer"]))
            if "wide" in r:
                print(_line(f"w@{args.wide_ms:g}ms", r["wide"]))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
