"""What grows per turn in a long run? tracemalloc snapshots of the measuring process at turn A
and turn B, diffed, each allocation site charged to the voicelat line that made it.

    python bench/memory_growth.py                         # 1,000 turns, 20 sessions, diff 100 -> 1,000
    python bench/memory_growth.py --turns 400 --at 100    # shorter
    python bench/memory_growth.py --rss                   # no tracemalloc: RSS alone, as users see it

The run is in this process (tracemalloc sees only its own process) against the OpenAI emulator
in a process of its own (`voicelat serve`), with the short synthetic turns of bench/overhead.py
(0.6 s utterance, a short reply). Snapshots are taken from the observer's ``turn_finished`` (on
the measuring loop: the run's timings are disturbed, its memory is not). The growth per turn is
(traced memory at B - at A) / (B - A); the sites list the largest differences. What a finished
turn must keep (the Turn the summary's percentiles and waterfall are computed from) shows as
``core/measure/recorder.py`` / ``core/base/turn.py`` lines; anything else growing is a leak candidate.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import gc
import linecache
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import KEY_ENV, ROOT, Profile, machine_line, pipeline, serve, write_fixture

from voicelat.core.base.plan import PlannedTurn, plan_turns
from voicelat.core.base.turn import Turn
from voicelat.core.measure.schedule import Load
from voicelat.engine.runner import Runner
from voicelat.files.fixtures import load_fixtures

_OURS = (str(ROOT / "voicelat") + os.sep,)


def _rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _trimmed_rss_kb() -> int:
    """RSS after glibc gave its free pages back (malloc_trim): what is really in use, without
    the allocator's fragmentation."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    return _rss_kb()


class Snapshots:
    """An observer taking a tracemalloc snapshot when the A-th and the B-th turn finish."""

    def __init__(self, at: tuple[int, int]) -> None:
        self.at = at
        self.done = 0
        self.snaps: dict[int, tracemalloc.Snapshot] = {}
        self.rss_kb: dict[int, int] = {}
        self.traced: dict[int, int] = {}
        self.trimmed_kb: dict[int, int] = {}

    def turn_started(self, planned: PlannedTurn, total: int) -> None:
        return None

    def milestone(self, index: int, name: str, t_rel_ns: int) -> None:
        return None

    def turn_finished(self, turn: Turn, total: int) -> None:
        self.done += 1
        if self.done in self.at:
            gc.collect()
            if tracemalloc.is_tracing():
                self.snaps[self.done] = tracemalloc.take_snapshot()
                self.traced[self.done] = tracemalloc.get_traced_memory()[0]
            self.rss_kb[self.done] = _rss_kb()
            self.trimmed_kb[self.done] = _trimmed_rss_kb()
        if self.done % 100 == 0:
            print(f"  {self.done}/{total} turns", file=sys.stderr, flush=True)


def _site(tb: tracemalloc.Traceback) -> str:
    """The most recent voicelat frame of an allocation (else its innermost frame)."""
    for frame in reversed(tb):  # oldest -> most recent
        if frame.filename.startswith(_OURS):
            rel = os.path.relpath(frame.filename, ROOT)
            code = linecache.getline(frame.filename, frame.lineno).strip()
            return f"{rel}:{frame.lineno}  {code[:70]}"
    frame = tb[-1]
    return f"{frame.filename}:{frame.lineno}"


def diff(a: tracemalloc.Snapshot, b: tracemalloc.Snapshot, top: int) -> list[tuple[str, int, int]]:
    """(site, bytes, blocks) differences from ``a`` to ``b``, largest first."""
    sites: dict[str, list[int]] = {}
    for stat in b.compare_to(a, "traceback"):
        if stat.size_diff == 0:
            continue
        entry = sites.setdefault(_site(stat.traceback), [0, 0])
        entry[0] += stat.size_diff
        entry[1] += stat.count_diff
    ranked = sorted(sites.items(), key=lambda kv: -kv[1][0])
    return [(s, v[0], v[1]) for s, v in ranked[:top]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=1000)
    ap.add_argument("--at", type=int, default=100, help="the first snapshot's turn")
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--frames", type=int, default=12, help="tracemalloc traceback depth")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--rss", action="store_true", help="no tracemalloc: RSS alone")
    args = ap.parse_args()
    os.environ.setdefault(KEY_ENV, "bench")
    print(machine_line())
    print(f"load average at start {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        fixtures = write_fixture(work / "fixtures", lead_s=0.2, speech_s=0.6, tail_s=0.5)
        with serve(Profile(reply="Sure thing.", ms_per_char=20.0), work / "serve") as served:
            p = pipeline(served.base_url, hangover_ms=200)
            snaps = Snapshots((args.at, args.turns))
            runner = Runner(p, load_fixtures(fixtures), work / "run", observer=snaps)
            plan = plan_turns(["tone"], turns=args.turns, warmup=0)
            if not args.rss:
                tracemalloc.start(args.frames)
            t0 = time.monotonic()
            asyncio.run(runner.run(plan, load=Load(concurrency=args.sessions)))
            wall = time.monotonic() - t0
            tracemalloc.stop()
    result: dict[str, Any] = {"wall_s": round(wall, 1), "load_1min_end": os.getloadavg()[0]}
    a, b = args.at, args.turns
    if a not in snaps.rss_kb or b not in snaps.rss_kb:
        raise SystemExit(f"only {snaps.done} turns finished: no snapshot pair")
    n = b - a
    print(
        f"{args.turns} turns at {args.sessions} sessions in {result['wall_s']} s; "
        f"load average at the end {result['load_1min_end']:.2f}"
    )
    print(
        f"RSS at turn {a}: {snaps.rss_kb[a] / 1024:.1f} MB, at turn {b}: "
        f"{snaps.rss_kb[b] / 1024:.1f} MB -> {(snaps.rss_kb[b] - snaps.rss_kb[a]) / n:.2f} KB "
        f"per turn; after malloc_trim {snaps.trimmed_kb[a] / 1024:.1f} -> "
        f"{snaps.trimmed_kb[b] / 1024:.1f} MB "
        f"({(snaps.trimmed_kb[b] - snaps.trimmed_kb[a]) / n:.2f} KB per turn)"
    )
    if args.rss:
        return
    per_turn = (snaps.traced[b] - snaps.traced[a]) / n
    print(
        f"traced memory at turn {a}: {snaps.traced[a] / 1e6:.2f} MB, at turn {b}: "
        f"{snaps.traced[b] / 1e6:.2f} MB -> {per_turn / 1000:.2f} KB per turn (the RSS above "
        "includes tracemalloc's own tables and the first snapshot: read --rss for RSS)"
    )
    print(f"largest growth from turn {a} to turn {b} (bytes per turn, blocks per turn, site):")
    for site, size, count in diff(snaps.snaps[a], snaps.snaps[b], args.top):
        print(f"  {size / n:9.0f} B {count / n:7.1f}  {site}")


if __name__ == "__main__":
    main()
