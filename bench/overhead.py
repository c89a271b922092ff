"""What does measuring cost? voicelat's own CPU time per turn and its memory over a long run.

    python bench/overhead.py                     # 60 turns at 1 session + 2,000 at 20 (~5 min)
    python bench/overhead.py --long 500          # a shorter long run
    python bench/overhead.py --loop uvloop,asyncio --busy-wait   # both loops, and busy-waiting

`voicelat run` runs as users run it (a child process, --no-tui) against the OpenAI emulator in
a process of its own (`voicelat serve`), so the servers' CPU is not counted: only voicelat's
(its event loop, its stages' HTTP clients, its writer thread). Short turns (a 0.6 s utterance,
a 0.2 s reply) make many turns per minute. Once a second this script reads the child's CPU time
(utime + stime from /proc/PID/stat) and resident set size (VmRSS), and how many turns it has
written (turns.jsonl). CPU per turn is the slope over the steady part of the run (after the
first 10 % of the turns); memory growth is RSS at the end minus RSS at 10 % of the turns.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import KEY_ENV, ROOT, Profile, machine, machine_line, serve, write_fixture

TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def cpu_s(pid: int) -> float:
    """utime + stime of a process, in seconds (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def tree_cpu_s(pid: int) -> float:
    """cpu_s of ``pid`` and of every live descendant (``--workers``: the worker processes)."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            total += cpu_s(p)
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def pipeline_toml(base_url: str, busy_wait: bool = False) -> str:
    return f"""
[pipeline]
name = "overhead-emulated"
[endpointing]
mode = "vad"
hangover_ms = 200
[stt]
stage = "openai-stt"
base_url = "{base_url}"
model = "gpt-4o-mini-transcribe"
api_key_env = "{KEY_ENV}"
[llm]
stage = "openai"
base_url = "{base_url}"
endpoint = "chat"
model = "gpt-4o-mini"
max_tokens = 40
api_key_env = "{KEY_ENV}"
[tts]
stage = "openai-tts"
base_url = "{base_url}"
model = "gpt-4o-mini-tts"
voice = "alloy"
api_key_env = "{KEY_ENV}"
[turn]
timeout_s = 60
{"busy_wait = true" if busy_wait else ""}
"""


def run(
    turns: int,
    concurrency: int,
    work: Path,
    *,
    loop: str = "auto",
    busy_wait: bool = False,
    bundled: bool = False,
    workers: int = 1,
) -> dict[str, Any]:
    """One `voicelat run` child, sampled once a second (``loop``: VOICELAT_LOOP). ``bundled``:
    the bundled fixtures and the accuracy bench's emulator profile (a 1.7 s reply), not the
    short synthetic turns."""
    if bundled:
        fixtures = ROOT / "fixtures"
        prof = Profile()
    else:
        fixtures = write_fixture(work / "fixtures", lead_s=0.2, speech_s=0.6, tail_s=0.5)
        prof = Profile(reply="Sure thing.", ms_per_char=20.0)
    out = work / f"run-c{concurrency}-{loop}-{int(busy_wait)}-{int(bundled)}-w{workers}"
    samples: list[tuple[float, int, float, float, float]] = []  # t, turns, cpu, rss, server cpu
    with serve(prof, work / f"serve-{out.name}") as served:
        pfile = work / "pipeline.toml"
        pfile.write_text(pipeline_toml(served.base_url, busy_wait))
        cmd = [sys.executable, "-m", "voicelat", "run", "--no-tui", "-p", str(pfile)]
        cmd += ["-f", str(fixtures), "--turns", str(turns), "--warmup", "1", "--out", str(out)]
        cmd += ["--concurrency", str(concurrency)]
        if workers > 1:
            cmd += ["--workers", str(workers)]
        env = {**os.environ, KEY_ENV: os.environ.get(KEY_ENV, "bench"), "VOICELAT_LOOP": loop}
        t0 = time.monotonic()
        child = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        turns_file = out / "turns.jsonl"
        done = 0
        offset = 0
        while child.poll() is None:
            time.sleep(1.0)
            try:
                if turns_file.exists():
                    with turns_file.open("rb") as fh:
                        fh.seek(offset)
                        chunk = fh.read()
                    offset += len(chunk)
                    done += chunk.count(b"\n")
                samples.append(
                    (
                        time.monotonic() - t0,
                        done,
                        tree_cpu_s(child.pid),
                        rss_mb(child.pid),
                        cpu_s(served.proc.pid),
                    )
                )
            except (FileNotFoundError, ProcessLookupError, IndexError):
                break
        err = child.stderr.read() if child.stderr else ""
        if child.wait() != 0:
            raise RuntimeError(f"voicelat run failed ({child.returncode}): {err[-2000:]}")
    # A sample taken as the child exited reads no RSS (its memory is gone): not a sample. Nor
    # is one taken as its workers exited (their CPU left the process tree: the sum drops).
    samples = [x for x in samples if x[3] > 0]
    drop = next((i for i in range(1, len(samples)) if samples[i][2] < samples[i - 1][2]), None)
    samples = samples[:drop]
    summary = json.loads((out / "summary.json").read_text())
    total = summary["counts"]["turns"]
    steady = [s for s in samples if s[1] >= max(2, total // 10)]
    a, b = steady[0], steady[-1]
    n = b[1] - a[1]
    return {
        "concurrency": concurrency,
        "turns": total,
        "failed": summary["counts"]["failed"],
        "wall_s": round(samples[-1][0], 1),
        "cpu_ms_per_turn": round((b[2] - a[2]) * 1000 / n, 2) if n else None,
        "server_cpu_ms_per_turn": round((b[4] - a[4]) * 1000 / n, 2) if n else None,
        "cpu_share_of_a_core": round((b[2] - a[2]) / (b[0] - a[0]), 3),
        # A session-second: one session's audio flowing for a second. In a closed loop every
        # session is busy all the time, so the steady part holds wall x sessions of them.
        "cpu_ms_per_session_s": round((b[2] - a[2]) * 1000 / ((b[0] - a[0]) * concurrency), 2),
        "event_loop": summary["run"].get("event_loop"),
        "bundled": bundled,
        "workers": workers,
        "trust": summary["trust"]["trustworthy"],
        "trust_reasons": [r["code"] for r in summary["trust"]["reasons"]],
        "pacer_lag_max_p99_ms": _p99_ms(summary, "pacer_lag_max_ns", out),
        "turn_s": round((b[0] - a[0]) * concurrency / n, 2) if n else None,
        "busy_wait": busy_wait,
        "rss_mb_at_10pct": round(a[3], 1),
        "rss_mb_end": round(b[3], 1),
        "rss_growth_mb_per_1000_turns": round((b[3] - a[3]) * 1000 / n, 2) if n else None,
        "rss_max_mb": round(max(s[3] for s in samples), 1),
        "steady_turns": n,
        "loop_lag_p99_ms": (summary["loop_lag"].get("p99") or 0) / 1e6,
        "e2e_p50_ms": (summary["e2e"].get("p50") or 0) / 1e6,
        "rss_curve": [(s[1], round(s[3], 1)) for s in samples[:: max(1, len(samples) // 12)]],
    }


def _p99_ms(summary: dict[str, Any], figure: str, out: Path) -> float | None:
    """P99 over the measured turns of a per-turn figure (from turns.jsonl)."""
    values = sorted(
        v
        for line in (out / "turns.jsonl").read_text().splitlines()
        if not (t := json.loads(line))["warmup"]
        and isinstance(v := t.get("figures", {}).get(figure), int)
    )
    return round(values[min(len(values) - 1, len(values) * 99 // 100)] / 1e6, 2) if values else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--short", type=int, default=60, help="turns of the 1-session run (60)")
    ap.add_argument("--long", type=int, default=2000, help="turns of the long run (2000)")
    ap.add_argument("--concurrency", type=int, default=20, help="sessions of the long run (20)")
    ap.add_argument("--json", type=Path, help="write the figures here as JSON")
    ap.add_argument(
        "--loop", default="auto", help="comma-separated VOICELAT_LOOP values to run (auto)"
    )
    ap.add_argument(
        "--busy-wait", action="store_true", help="also run the 1-session case with busy_wait on"
    )
    ap.add_argument(
        "--bundled",
        default="",
        help="session counts (e.g. 1,20,100) to also run on the bundled fixtures (~5 s turns)",
    )
    ap.add_argument(
        "--bundled-turns", type=int, default=8, help="turns per session of the bundled runs (8)"
    )
    ap.add_argument(
        "--workers",
        default="1",
        help="comma-separated --workers values for the bundled runs (1); CPU counts them all",
    )
    args = ap.parse_args(argv)
    print(f"voicelat overhead bench, {time.strftime('%Y-%m-%d %H:%M')}; {machine_line()}")
    print(f"command: python bench/overhead.py {' '.join(sys.argv[1:] if argv is None else argv)}")
    results: dict[str, Any] = {"machine": machine(), "runs": []}
    with tempfile.TemporaryDirectory(prefix="voicelat-overhead-") as tmp:
        cases = [(args.short, 1, loop, False) for loop in args.loop.split(",")]
        if args.busy_wait:
            cases.append((args.short, 1, args.loop.split(",")[0], True))
        cases += [(args.long, args.concurrency, loop, False) for loop in args.loop.split(",")]
        cases = [(t, c, lp, b, False) for t, c, lp, b in cases]
        cases = [(*c, 1) for c in cases]
        for n in (int(x) for x in args.bundled.split(",") if x):
            for w in (int(x) for x in args.workers.split(",")):
                cases.append((n * args.bundled_turns, n, args.loop.split(",")[0], False, True, w))
        for turns, conc, loop, busy, bundled, workers in cases:
            if turns <= 0:
                continue
            r = run(
                turns, conc, Path(tmp), loop=loop, busy_wait=busy, bundled=bundled, workers=workers
            )
            results["runs"].append(r)
            print(
                f"\n{conc} session(s), {'bundled fixtures' if bundled else 'short turns'}, "
                f"loop {r['event_loop']}, busy_wait {busy}, workers {workers}: "
                f"{r['turns']} turns ({r['failed']} failed, {r['turn_s']} s each) in {r['wall_s']} s;"
                f" load average {os.getloadavg()[0]:.2f}"
                f"\n  voicelat CPU per turn {r['cpu_ms_per_turn']} ms, per session-second "
                f"{r['cpu_ms_per_session_s']} ms "
                f"({r['cpu_share_of_a_core']:.0%} of one core; the emulator: "
                f"{r['server_cpu_ms_per_turn']} ms per turn)"
                f"\n  RSS {r['rss_mb_at_10pct']} MB at 10 % of the turns -> {r['rss_mb_end']} MB "
                f"at the end ({r['rss_growth_mb_per_1000_turns']} MB per 1,000 turns; "
                f"max {r['rss_max_mb']} MB); loop lag P99 {r['loop_lag_p99_ms']:.2f} ms; "
                f"pacer lag max P99 {r['pacer_lag_max_p99_ms']} ms; trust "
                f"{'ok' if r['trust'] else 'FLAGGED: ' + ', '.join(r['trust_reasons'])}"
                f"\n  RSS curve (turns, MB): {r['rss_curve']}"
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
