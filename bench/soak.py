"""A soak: N sessions for D minutes; do the measuring process's memory, fds and threads stay flat?

    python bench/soak.py --sessions 100 --minutes 60 --out soak.json   # the 1-hour soak (~61 min)
    python bench/soak.py --sessions 100 --minutes 5 --out soak5.json   # a short one (~5.5 min)
    python bench/soak.py --repo /path/to/other/checkout ...            # another checkout's voicelat

`voicelat run --no-tui --concurrency N` runs as users run it (a child process) against the
OpenAI emulator in a process of its own (`voicelat serve openai`, fixed delays), on the bundled
fixtures (``--synthetic``: the short synthetic turns of bench/overhead.py, more turns a minute).
The run is planned longer than D minutes and stopped with SIGTERM at D minutes (as a Ctrl-C:
every finished turn is kept and the summary written, ``status: interrupted``). Once every
``--interval`` seconds (10) this script reads the child's resident set size (VmRSS), its open
file descriptors (``/proc/PID/fd``), its threads (``Threads:``), its CPU time and the turns it
has written, and prints a progress line. At the end: the slope of each (per hour, least squares)
over the steady part (after ``--settle`` minutes: default a fifth of the run, at least two:
sessions opened, the runner's window of 1,000 recent turns and the summary's exact buffers of
2,048 values filled, at ~20 turns/s), RSS per 1,000 turns, the load average, and the run's own
figures; ``--out`` gets all of it as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import KEY_ENV, ROOT, Profile, machine, machine_line, now_stamp, serve, write_fixture
from overhead import cpu_s, pipeline_toml

FIELDS = ("t_s", "turns", "rss_mb", "fds", "threads", "cpu_s", "load1")


def _status(pid: int) -> tuple[float, int]:
    """VmRSS (MB) and thread count of ``pid``."""
    rss, threads = 0.0, 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
        elif line.startswith("Threads:"):
            threads = int(line.split()[1])
    return rss, threads


def sample(pid: int, t_s: float, turns: int) -> dict[str, float]:
    """One reading of the child (raises OSError once it is gone)."""
    rss, threads = _status(pid)
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return {
        "t_s": round(t_s, 1),
        "turns": turns,
        "rss_mb": round(rss, 2),
        "fds": fds,
        "threads": threads,
        "cpu_s": round(cpu_s(pid), 2),
        "load1": round(os.getloadavg()[0], 2),
    }


def slope_per_hour(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of ``(t_s, value)`` points, per hour (None: fewer than 2 points)."""
    if len(points) < 2:
        return None
    n = len(points)
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    if var == 0:
        return None
    return sum((t - mt) * (v - mv) for t, v in points) / var * 3600


class _TurnCounter:
    """Counts the lines of a growing turns.jsonl (reads only what was appended)."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.n = path, 0, 0

    def __call__(self) -> int:
        if self.path.exists():
            with self.path.open("rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
            self.offset += len(chunk)
            self.n += chunk.count(b"\n")
        return self.n


def soak(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Run the child for ``args.minutes``, sampling it; returns the samples and the summary."""
    repo = Path(args.repo).resolve()
    if args.synthetic:
        fixtures = write_fixture(work / "fixtures", lead_s=0.2, speech_s=0.6, tail_s=0.5)
        prof, min_turn_s = Profile(reply="Sure thing.", ms_per_char=20.0), 1.0
    else:
        fixtures, prof, min_turn_s = ROOT / "fixtures", Profile(), 2.0
    # More turns than D minutes can hold (a turn lasts at least min_turn_s): stopped at D.
    planned = int(args.sessions * args.minutes * 60 / min_turn_s) + args.sessions
    out = work / "run"
    samples: list[dict[str, float]] = []
    with serve(prof, work / "serve") as served:
        pfile = work / "pipeline.toml"
        pfile.write_text(pipeline_toml(served.base_url))
        cmd = [sys.executable, "-m", "voicelat", "run", "--no-tui", "-q", "-p", str(pfile)]
        cmd += ["-f", str(fixtures), "--turns", str(planned), "--warmup", "1"]
        cmd += ["--concurrency", str(args.sessions), "--out", str(out)]
        env = {**os.environ, KEY_ENV: os.environ.get(KEY_ENV, "bench"), "PYTHONPATH": str(repo)}
        child = subprocess.Popen(
            cmd, cwd=repo, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        count = _TurnCounter(out / "turns.jsonl")
        t0 = time.monotonic()
        deadline = t0 + args.minutes * 60
        next_at = t0
        try:
            while child.poll() is None and time.monotonic() < deadline:
                next_at += args.interval
                time.sleep(max(0.0, min(next_at, deadline) - time.monotonic()))
                try:
                    s = sample(child.pid, time.monotonic() - t0, count())
                except OSError:
                    break
                samples.append(s)
                _progress(s, samples, args.minutes)
        finally:
            if child.poll() is None:
                # SIGTERM, not SIGINT: a background job's children inherit SIGINT ignored. The
                # run treats both alike: every finished turn kept, the summary written.
                child.send_signal(signal.SIGTERM)
            try:
                child.wait(timeout=120)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        err = child.stderr.read() if child.stderr else ""
    if child.returncode not in (0, 130, 143):
        raise RuntimeError(f"voicelat run failed ({child.returncode}): {err[-2000:]}")
    summary = json.loads((out / "summary.json").read_text())
    return {"samples": samples, "summary": summary, "planned_turns": planned, "repo": str(repo)}


def _progress(s: dict[str, float], samples: list[dict[str, float]], minutes: float) -> None:
    rate = 0.0
    if len(samples) > 1:
        a = samples[-2]
        rate = (s["turns"] - a["turns"]) / max(s["t_s"] - a["t_s"], 1e-9)
    print(
        f"[{now_stamp()}] {s['t_s']:7.0f}/{minutes * 60:.0f} s  turns {s['turns']:>7}"
        f" ({rate:5.1f}/s)  RSS {s['rss_mb']:8.1f} MB  fds {s['fds']:>4}  threads"
        f" {s['threads']:>3}  cpu {s['cpu_s']:8.1f} s  load {s['load1']:.2f}",
        flush=True,
    )


def report(result: dict[str, Any], settle_s: float) -> dict[str, Any]:
    """Slopes over the steady part, and the run's figures."""
    samples = result["samples"]
    steady = [s for s in samples if s["t_s"] >= settle_s]
    slopes = {
        f"{k}_per_hour": (
            round(v, 3) if (v := slope_per_hour([(s["t_s"], s[k]) for s in steady])) else v
        )
        for k in ("rss_mb", "fds", "threads")
    }
    summary = result["summary"]
    a, b = (steady[0], steady[-1]) if steady else ({}, {})
    turns = (b.get("turns", 0) - a.get("turns", 0)) if steady else 0
    loads = [s["load1"] for s in samples]
    return {
        "steady_from_s": settle_s,
        "steady_samples": len(steady),
        "slopes": slopes,
        "rss_mb_steady_start": a.get("rss_mb"),
        "rss_mb_end": b.get("rss_mb"),
        "rss_mb_max": max((s["rss_mb"] for s in samples), default=None),
        "rss_mb_per_1000_turns": (
            round((b["rss_mb"] - a["rss_mb"]) * 1000 / turns, 3) if turns else None
        ),
        "fds_min_max": [min(s["fds"] for s in steady), max(s["fds"] for s in steady)]
        if steady
        else None,
        "threads_min_max": [min(s["threads"] for s in steady), max(s["threads"] for s in steady)]
        if steady
        else None,
        "steady_turns": turns,
        "load1_min_median_max": [min(loads), sorted(loads)[len(loads) // 2], max(loads)]
        if loads
        else None,
        "run": {
            "status": summary["run"].get("status"),
            "counts": summary["counts"],
            "e2e_p50_ms": (summary["e2e"].get("p50") or 0) / 1e6,
            "e2e_p99_ms": (summary["e2e"].get("p99") or 0) / 1e6,
            "loop_lag_p99_ms": (summary["loop_lag"].get("p99") or 0) / 1e6,
            "trust_reasons": [r["code"] for r in summary.get("trust", {}).get("reasons", [])],
            "quantiles": summary.get("quantiles", "(not stated: a voicelat before streaming)"),
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--sessions", type=int, default=100, help="concurrent sessions (100)")
    ap.add_argument("--minutes", type=float, default=5.0, help="how long to run (5)")
    ap.add_argument("--interval", type=float, default=10.0, help="seconds between samples (10)")
    ap.add_argument(
        "--settle", type=float, default=None, help="minutes before the steady part (D/5, >= 2)"
    )
    ap.add_argument("--synthetic", action="store_true", help="short synthetic turns")
    ap.add_argument("--repo", default=str(ROOT), help="the checkout whose voicelat runs")
    ap.add_argument("--out", type=Path, default=None, help="write the JSON here")
    args = ap.parse_args(argv)
    if args.sessions < 1 or args.minutes <= 0 or args.interval <= 0:
        ap.error("--sessions, --minutes and --interval must be positive")
    settle_min = args.settle if args.settle is not None else max(2.0, args.minutes / 5)
    print(machine_line(), flush=True)
    print(
        f"soak: {args.sessions} sessions for {args.minutes:g} min against `voicelat serve "
        f"openai`, voicelat from {args.repo}; steady part after {settle_min:g} min",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="voicelat-soak-") as tmp:
        result = soak(args, Path(tmp))
    rep = report(result, settle_min * 60)
    doc = {
        "bench": "soak",
        "when": now_stamp(),
        "machine": machine(),
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        **rep,
        "samples": result["samples"],
        "planned_turns": result["planned_turns"],
        "repo": result["repo"],
    }
    s = rep["slopes"]
    print(
        f"steady part ({rep['steady_samples']} samples, {rep['steady_turns']} turns): "
        f"RSS {rep['rss_mb_steady_start']} -> {rep['rss_mb_end']} MB, "
        f"slope {s['rss_mb_per_hour']} MB/h ({rep['rss_mb_per_1000_turns']} MB per 1,000 turns); "
        f"fds {rep['fds_min_max']} ({s['fds_per_hour']}/h); threads {rep['threads_min_max']} "
        f"({s['threads_per_hour']}/h); load average {rep['load1_min_median_max']}",
        flush=True,
    )
    r = rep["run"]
    print(
        f"run: {r['status']}, {r['counts']['turns']} turns ({r['counts']['failed']} failed), "
        f"e2e P50 {r['e2e_p50_ms']:.1f} ms P99 {r['e2e_p99_ms']:.1f} ms, loop lag P99 "
        f"{r['loop_lag_p99_ms']:.2f} ms, trust {r['trust_reasons'] or 'ok'}, "
        f"quantiles {r['quantiles']}",
        flush=True,
    )
    if args.out is not None:
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {args.out}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
