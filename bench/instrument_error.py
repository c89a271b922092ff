"""Does the instrument error bar cover a known extra error? A delayed stamp, injected.

    python bench/instrument_error.py                  # 0, 10, 30 ms, 3 passes of 5 turns (~1 min)
    python bench/instrument_error.py --delays 0,5,10,30,100 --turns 10

The run's calibration (engine/calibrate.py: the in-process OpenAI emulator with exact delays,
real turns through the runner and turn engine) is timed on a clock that reads ``delay`` late:
every stamp voicelat takes is that much after the moment it stands for, while the emulator's
truth is stamped on the real clock (the mechanism of
tests/engine/test_calibrate.py::test_a_delayed_stamp_widens_the_error_bar_to_cover_it). A bar
that covers the injected error has its P50 at or above ``delay`` (every stamp is late by it)
and its P99 no further above it than the loopback's own error (the 0 ms row). A delay the
reference calls absurd (engine/calibrate.py's bound) leaves the run "uncalibrated".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, machine_line

from voicelat.engine.calibrate import Calibration

MS = 1_000_000


@dataclass
class DelayedClock:
    """The monotonic clock read ``offset_ns`` late: a delayed stamp on every event."""

    offset_ns: int

    def now_ns(self) -> int:
        return time.perf_counter_ns() + self.offset_ns


async def one_pass(delay_ms: float, turns: int) -> dict[str, Any]:
    """One calibration pass of ``turns`` reference turns with every stamp ``delay_ms`` late."""
    c = Calibration("quick", clock=DelayedClock(round(delay_ms * MS)), turns=turns)
    await c.before()
    return c.section()


def _ms(ns: object) -> float | None:
    return None if not isinstance(ns, int | float) else ns / MS


def row(delay_ms: float, sections: list[dict[str, Any]]) -> dict[str, Any]:
    """The bar of each pass at one injected delay, and whether each covered it."""
    out: dict[str, Any] = {"injected_ms": delay_ms, "passes": []}
    for s in sections:
        p50, p99 = _ms(s.get("error_p50_ns")), _ms(s.get("error_p99_ns"))
        kinds = {
            k: (_ms(v.get("error_p50_ns")), _ms(v.get("error_p99_ns")))
            for k, v in (s.get("by_kind") or {}).items()
        }
        covered = (
            s["status"] == "calibrated"
            and p50 is not None
            and p50 >= delay_ms
            and all(lo is not None and lo >= delay_ms for lo, _ in kinds.values())
        )
        out["passes"].append(
            {
                "status": s["status"],
                "reason": s.get("reason"),
                "p50_ms": p50,
                "p99_ms": p99,
                "by_kind_ms": kinds,
                "turns": s.get("turns"),
                "covered": covered,
                "cost_s": s.get("cost_s"),
            }
        )
    return out


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--delays", default="0,10,30", help="injected stamp delays in ms (0,10,30)")
    ap.add_argument("--turns", type=int, default=5, help="reference turns per pass (5)")
    ap.add_argument("--passes", type=int, default=3, help="passes per delay (3)")
    ap.add_argument("--json", type=Path, help="write every figure here as JSON")
    args = ap.parse_args(argv)
    delays = [float(x) for x in args.delays.split(",") if x.strip()]
    print(f"voicelat instrument-error bench, {time.strftime('%Y-%m-%d %H:%M')}; {machine_line()}")
    print(
        f"command: python bench/instrument_error.py {' '.join(sys.argv[1:] if argv is None else argv)}"
    )
    rows = []
    load0 = os.getloadavg()[0]
    for d in delays:
        sections = [asyncio.run(one_pass(d, args.turns)) for _ in range(args.passes)]
        rows.append(row(d, sections))
    load1 = os.getloadavg()[0]
    print(f"load average {load0:.2f} -> {load1:.2f}; {args.passes} passes of {args.turns} turns")
    kinds = sorted({k for r in rows for p in r["passes"] for k in p["by_kind_ms"]})
    head = " ".join(f"{k + ' P50/P99':>16}" for k in kinds)
    print(f"\n{'injected':>9}  {'bar P50':>8} {'bar P99':>8}  {head}  covered")
    for r in rows:
        for p in r["passes"]:
            if p["status"] != "calibrated":
                print(f"{r['injected_ms']:>7g} ms  uncalibrated: {p['reason']}")
                continue
            per = " ".join(
                f"{_f(p['by_kind_ms'].get(k, (None, None))[0]) + ' / ' + _f(p['by_kind_ms'].get(k, (None, None))[1]):>16}"
                for k in kinds
            )
            print(
                f"{r['injected_ms']:>7g} ms  {_f(p['p50_ms']):>8} {_f(p['p99_ms']):>8}  {per}  "
                f"{'yes' if p['covered'] else 'NO'}"
            )
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "rows": rows}, indent=2) + "\n")
    ok = all(p["covered"] for r in rows for p in r["passes"] if p["status"] == "calibrated")
    print(f"\ncovered={'all' if ok else 'NOT all'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
