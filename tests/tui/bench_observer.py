"""What the event stream costs the measuring loop: ns per observer call, and the alternatives.

    python -m tests.tui.bench_observer

Each observer call runs on the measuring loop, between two timestamps. Compares the
``SimpleQueue.put`` hand-off (what ``JsonlObserver`` does) with encoding the line on the loop,
and with encoding and writing it there (into a pipe a thread drains).
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path

from voicelat.core.base.plan import PlannedTurn
from voicelat.tui.model import TurnFinished
from voicelat.tui.protocol import JsonlObserver, decode, encode

EVENTS = Path(__file__).resolve().parent / "data" / "events.jsonl"
N = 20_000


def _per_call_ns(fn: Callable[[], object], n: int = N) -> tuple[float, int]:
    """Median and P99 of one call, timed call by call."""
    samples: list[int] = []
    for _ in range(n):
        t = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - t)
    samples.sort()
    return statistics.median(samples), samples[int(0.99 * len(samples))]


def main() -> None:
    turn = next(
        e.turn for e in map(decode, EVENTS.read_bytes().splitlines()) if isinstance(e, TurnFinished)
    )
    r, w = os.pipe()

    def drain() -> None:  # the TUI's reader: keeps the pipe from filling up
        while os.read(r, 1 << 16):
            pass

    threading.Thread(target=drain, daemon=True).start()
    sink = os.fdopen(w, "wb")
    obs = JsonlObserver(sink, {"kitchen_lights": 1650})
    planned = PlannedTurn(0, "kitchen_lights", 0, False)

    def write(item: tuple[object, ...]) -> None:  # what the writer thread does, inline
        sink.write(encode(item))
        sink.flush()

    rows: dict[str, Callable[[], object]] = {
        "observer.milestone (queue put)": lambda: obs.milestone(0, "endpoint", 2_140_003_588),
        "observer.turn_started (queue put)": lambda: obs.turn_started(planned, 6),
        "observer.turn_finished (queue put)": lambda: obs.turn_finished(turn, 6),
        "encode milestone on the loop": lambda: encode(
            ("milestone", 0, "endpoint", 2_140_003_588, time.perf_counter_ns())
        ),
        "encode turn_finished on the loop": lambda: encode(("turn_finished", turn, 6)),
        "encode + write + flush milestone on the loop": lambda: write(
            ("milestone", 0, "endpoint", 1, 2)
        ),
        "encode + write + flush turn on the loop": lambda: write(("turn_finished", turn, 6)),
    }
    for name, fn in rows.items():
        n = N if "turn" not in name or "queue" in name else 2_000
        med, p99 = _per_call_ns(fn, n)
        print(f"{name:48s} median {med / 1000:7.2f} µs   p99 {p99 / 1000:7.2f} µs")
    obs.close()


if __name__ == "__main__":
    main()
