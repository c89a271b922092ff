"""What the SSE decoder costs the measuring loop: a large event in small reads vs one read.

    python bench/sse.py [--size-kib 1024] [--read-kib 4] [--repeat 5]

Prints the median time to decode one event of ``--size-kib`` arriving in ``--read-kib`` reads and
as a single read, and the difference (the loop time a long event costs beyond parsing it once).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from voicelat.core.measure.sse import SSEDecoder


def _decode_ms(reads: list[bytes]) -> float:
    dec = SSEDecoder()
    t = time.perf_counter_ns()
    n = sum(len(dec.feed(r, 0)) for r in reads)
    elapsed = time.perf_counter_ns() - t
    assert n == 1, n
    return elapsed / 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-kib", type=int, default=1024)
    ap.add_argument("--read-kib", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    event = b"data: " + b"x" * (args.size_kib * 1024) + b"\n\n"
    step = args.read_kib * 1024
    small = [event[i : i + step] for i in range(0, len(event), step)]
    split = statistics.median(_decode_ms(small) for _ in range(args.repeat))
    whole = statistics.median(_decode_ms([event]) for _ in range(args.repeat))
    load = os.getloadavg()[0]
    print(
        f"{args.size_kib} KiB event: {len(small)} reads of {args.read_kib} KiB {split:.2f} ms, "
        f"one read {whole:.2f} ms, difference {split - whole:.2f} ms (load {load:.2f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
