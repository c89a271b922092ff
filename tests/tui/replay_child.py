"""A stand-in for the measuring child: replays a recorded event stream, then ends as told.

Run as a script (it imports nothing from voicelat, so it starts in a few ms)::

    python tests/tui/replay_child.py EVENTS.jsonl [--delay S] [--out DIR] [--stderr LINE]...
        [--exit N] [--traceback] [--hang] [--kill]

It behaves like ``voicelat run --events jsonl`` where the TUI can tell: event lines on
stdout, human lines on stderr, and SIGINT handled like Ctrl-C (the summary is written to
``--out``, ``interrupted: ...`` goes to stderr, exit 130).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

#: The saved run whose files stand in for what the runner would write.
SAVED_RUN = Path(__file__).resolve().parent / "data" / "run"


def write_results(out: Path | None) -> None:
    """Write the saved run's results to ``out`` and announce the summary, as the child does."""
    if out is None:
        return
    out.mkdir(parents=True, exist_ok=True)
    for name in ("turns.jsonl", "summary.json"):
        shutil.copy(SAVED_RUN / name, out / name)
    print(json.dumps({"event": "summary", "path": str(out / "summary.json")}), flush=True)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("events", type=Path)
    p.add_argument("--delay", type=float, default=0.0, help="seconds between event lines")
    p.add_argument("--out", type=Path)
    p.add_argument("--stderr", action="append", default=[], help="a line for stderr, first")
    p.add_argument("--exit", type=int, default=0, help="exit code after the replay")
    p.add_argument("--traceback", action="store_true", help="crash with a traceback at the end")
    p.add_argument("--hang", action="store_true", help="after the replay, wait for SIGINT")
    p.add_argument("--kill", action="store_true", help="after the replay, die by SIGKILL")
    args = p.parse_args()
    try:
        for line in args.stderr:
            print(line, file=sys.stderr, flush=True)
        for line in args.events.read_text().splitlines():
            time.sleep(args.delay)
            print(line, flush=True)
        if args.kill:
            os.kill(os.getpid(), signal.SIGKILL)
        if args.traceback:
            raise RuntimeError("replay child crashed on purpose")
        while args.hang:
            time.sleep(0.05)
    except KeyboardInterrupt:
        print("replay child: got SIGINT", file=sys.stderr, flush=True)
        write_results(args.out)
        print(f"interrupted: finished turns kept, summary written to {args.out}", file=sys.stderr)
        print("voicelat: error: interrupted", file=sys.stderr)
        return 130
    write_results(args.out)
    return int(args.exit)


if __name__ == "__main__":
    raise SystemExit(main())
