"""``--workers 2`` against ``--ray`` on a real two-node Ray cluster on this machine: the same run.

    python bench/ray_compare.py                       # 4 sessions x 6 turns, each way, twice
    python bench/ray_compare.py --sessions 8 --rounds 1 --json out.json

Starts a two-node Ray cluster (bench/ray_cluster.py: ``ray start --head --port 6390`` plus a
second ``ray start --address``, one CPU and a 100 MB object store each) and the OpenAI emulator
in its own process (``voicelat serve``, fixed delays); then runs ``voicelat run`` as users run it
(a child process, ``--no-tui -q``) on the bundled fixtures with ``--workers 2`` and with
``--ray 127.0.0.1:6390`` (two actors, one per node), alternately, ``--rounds`` times each.

Per run: e2e P50 / P99 (the summary's), the merged event-loop lag P99 and each worker's, the
trust verdict, and voicelat's CPU per session-second: the workers' own CPU over their runs
(``run.workers[].cpu_s``: every thread of the worker process, for an actor Ray's core-worker
threads included) over the session-seconds the turns held (each turn: from its start to the
end of its reply's audio, ``output_first_audible + tts_audio_ns``). For ``--ray`` the Ray
daemons' CPU over the run (GCS, both raylets and their agents: the cluster's cost, not on any
measuring loop) is shown apart. The machine's load average is printed with every run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import KEY_ENV, ROOT, Profile, machine, machine_line, serve
from overhead import cpu_s
from ray_cluster import TEMP_DIR, LocalRayCluster, _pids_under

MS = 1_000_000


def _pipeline_toml(base_url: str, path: Path) -> Path:
    text = (ROOT / "pipelines" / "emulated-openai.toml").read_text()
    path.write_text(text.replace("http://127.0.0.1:8401/v1", base_url))
    return path


def _daemons_cpu_s() -> float:
    total = 0.0
    for pid in _pids_under(TEMP_DIR):
        try:
            total += cpu_s(pid)
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def _session_s(turn: dict[str, Any]) -> float:
    audible = turn["milestones_ns"].get("output_first_audible")
    reply = turn["figures"].get("tts_audio_ns")
    if not isinstance(audible, int) or not isinstance(reply, int):
        return 0.0
    return (audible + reply) / 1e9


def run_once(mode: str, args: argparse.Namespace, toml: Path, out: Path, address: str) -> dict:
    """One ``voicelat run`` child; its figures."""
    flag = ["--workers", "2"] if mode == "workers" else ["--ray", address, "--workers", "2"]
    cmd = [sys.executable, "-m", "voicelat", "run", "-p", str(toml), "--no-tui", "-q"]
    cmd += ["--concurrency", str(args.sessions), "--turns", str(args.sessions * args.turns)]
    cmd += ["--warmup", str(args.sessions), "-o", str(out), *flag]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    load0, daemons0, t0 = os.getloadavg()[0], _daemons_cpu_s(), time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    wall, daemons = time.monotonic() - t0, _daemons_cpu_s() - daemons0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    summary = json.loads((out / "summary.json").read_text())
    turns = [json.loads(line) for line in (out / "turns.jsonl").read_text().splitlines()]
    workers = summary["run"]["workers"]
    cpu = sum(w["cpu_s"] or 0.0 for w in workers)
    session_s = sum(_session_s(t) for t in turns)
    return {
        "mode": mode,
        "command": " ".join(["voicelat", *cmd[3:]]),
        "turns": len(turns),
        "failed": sum(t["failed"] for t in turns),
        "nodes": len({t["extra"].get("node") for t in turns}) if mode == "ray" else 1,
        "wall_s": round(wall, 1),
        "e2e_p50_ms": round(summary["e2e"]["p50"] / MS, 1),
        "e2e_p99_ms": round(summary["e2e"]["p99"] / MS, 1),
        "loop_lag_p99_ms": round(summary["loop_lag"]["p99"] / MS, 2),
        "worker_loop_lag_p99_ms": [round(w["loop_lag_p99_ns"] / MS, 2) for w in workers],
        "event_loop": summary["run"]["event_loop"],
        "cpu_ms_per_session_s": round(cpu * 1000 / session_s, 2) if session_s else None,
        "worker_cpu_s": round(cpu, 2),
        "session_s": round(session_s, 1),
        "ray_daemons_cpu_s": round(daemons, 2) if mode == "ray" else None,
        "clock_offsets_us": [
            (round(w["clock_offset_ns"] / 1000, 1), round(w["clock_offset_uncertainty_ns"] / 1000))
            for w in workers
            if w.get("clock_offset_ns") is not None
        ],
        "trust": summary["trust"]["trustworthy"],
        "trust_reasons": [r["code"] for r in summary["trust"]["reasons"]],
        "loadavg_1min": [round(load0, 2), round(os.getloadavg()[0], 2)],
    }


def _print(r: dict[str, Any]) -> None:
    print(
        f"\n{r['mode']}: {r['turns']} turns ({r['failed']} failed) on {r['nodes']} node(s) in "
        f"{r['wall_s']} s; load average {r['loadavg_1min'][0]} -> {r['loadavg_1min'][1]}"
        f"\n  {r['command']}"
        f"\n  e2e P50 {r['e2e_p50_ms']} ms, P99 {r['e2e_p99_ms']} ms; loop lag P99 "
        f"{r['loop_lag_p99_ms']} ms (workers {r['worker_loop_lag_p99_ms']}, {r['event_loop']})"
        f"\n  CPU per session-second {r['cpu_ms_per_session_s']} ms ({r['worker_cpu_s']} s over "
        f"{r['session_s']} session-s)"
        + (
            f"; Ray daemons {r['ray_daemons_cpu_s']} s"
            if r["ray_daemons_cpu_s"] is not None
            else ""
        )
        + (f"; clock offsets (us, +-us) {r['clock_offsets_us']}" if r["clock_offsets_us"] else "")
        + f"\n  trust {'ok' if r['trust'] else 'FLAGGED: ' + ', '.join(r['trust_reasons'])}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sessions", type=int, default=4, help="closed-loop sessions (4)")
    ap.add_argument("--turns", type=int, default=6, help="measured turns per session (6)")
    ap.add_argument("--rounds", type=int, default=2, help="runs of each mode, alternating (2)")
    ap.add_argument("--json", type=Path, help="write every figure here as JSON")
    args = ap.parse_args(argv)
    print(f"voicelat --workers 2 vs --ray, {time.strftime('%Y-%m-%d %H:%M')}; {machine_line()}")
    print(
        f"command: python bench/ray_compare.py {' '.join(sys.argv[1:] if argv is None else argv)}"
    )
    os.environ.setdefault(KEY_ENV, "bench")
    results: dict[str, Any] = {"machine": machine(), "runs": []}
    with (
        tempfile.TemporaryDirectory(prefix="voicelat-ray-bench-") as tmp,
        LocalRayCluster(pythonpath=ROOT) as cluster,
        serve(Profile(), Path(tmp) / "serve") as served,
    ):
        toml = _pipeline_toml(served.base_url, Path(tmp) / "pipeline.toml")
        for k in range(args.rounds):
            for mode in ("workers", "ray"):
                r = run_once(mode, args, toml, Path(tmp) / f"{mode}-{k}", cluster.address)
                results["runs"].append(r)
                _print(r)
    for mode in ("workers", "ray"):
        rs = [r for r in results["runs"] if r["mode"] == mode]
        med = {
            k: round(statistics.median(r[k] for r in rs), 2)
            for k in ("e2e_p50_ms", "e2e_p99_ms", "loop_lag_p99_ms", "cpu_ms_per_session_s")
            if all(r[k] is not None for r in rs)
        }
        results[f"median_{mode}"] = med
        print(f"\nmedian over {len(rs)} {mode} run(s): {med}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
