"""A/B: does the TUI disturb the measurement? Loop and pacer lag with and without it.

    python -m tests.tui.ab_lag [--runs 2] [--turns 5] [--old REV] [--out DIR]

Runs ``voicelat run`` on the embedded stack, interleaved so drift hits every mode alike:

* ``no-tui``: ``voicelat run --no-tui`` with stdout to a file (voicelat of ``--new REV``,
  default HEAD, extracted with ``git archive``);
* ``tui``: ``voicelat run --tui`` in a detached tmux session at 120x40; ``q`` is sent once the
  run's summary says complete (the app stays open until then, as a user would leave it);
* ``events`` (with ``--events``): the measuring child alone, ``voicelat run --no-tui --events
  jsonl`` with its event lines going to a file (what the event stream costs, without a TUI);
* ``tui-nice0`` (with ``--nice0``): the same with ``VOICELAT_TUI_NICE=0`` (the TUI process
  keeps its priority);
* ``old-tui`` (with ``--old REV``): the same, with the voicelat of git revision REV (the
  in-process TUI, measuring on a thread of the UI's process), extracted with ``git archive``.

Start the stack first so every run reuses the same warm servers (``voicelat stack up``, with
the same ``VOICELAT_*`` environment). Prints one row per run: the maxima over its turns of
``loop_lag_max_ns`` and ``pacer_lag_max_ns`` (all turns, warm-up included), in ms, and writes
the per-turn figures to ``DIR/ab.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
#: The status line of a run that failed ("· failed: <why>"), not the failed-turns count.
FAILED = re.compile(r"· failed(: | · results)")
MS = 1_000_000


def _turns(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "turns.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _complete(run_dir: Path) -> bool:
    try:
        summary = json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError):
        return False
    return bool(summary.get("run", {}).get("status") == "complete")


def run_plain(cmd: list[str], cwd: Path, out: Path) -> int:
    """``voicelat run --no-tui``: stdout and stderr to files, not a terminal."""
    with (out.parent / f"{out.name}.log").open("w") as log:
        return subprocess.run(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT).returncode


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far; 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(c) for c in text.split()]


def run_in_tmux(
    cmd: list[str], cwd: Path, out: Path, env: dict[str, str], cpu: dict[str, float]
) -> int:
    """``voicelat run --tui`` in a 120x40 tmux session; ``q`` once the run completed.

    ``cpu`` gets the CPU seconds of the TUI process, the measuring child (when there is one)
    and the tmux server (the terminal that draws the screen), sampled before ``q``.
    """
    session = f"voicelat-ab-{os.getpid()}-{out.name}"
    rc_file = out.parent / f"{out.name}.rc"
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    # COLUMNS/LINES dropped: inherited from a non-terminal parent they would override the pane.
    script = (
        f"cd {shlex.quote(str(cwd))} && env -u COLUMNS -u LINES {exports} {shlex.join(cmd)}; "
        f"echo $? > {rc_file}"
    )
    # A tmux server of our own (-L): nobody else's sessions or options can resize ours.
    tmux = ["tmux", "-L", session]
    subprocess.run(
        [*tmux, "new-session", "-d", "-s", session, "-x", "120", "-y", "40", script], check=True
    )
    try:
        deadline = time.monotonic() + 900
        shot = ""
        polls = 0
        # The app stays open after the run ended (complete or failed) until q. The screen is
        # read only every 10 s: reading it costs the tmux server CPU on the cores measured.
        while not _complete(out) and not rc_file.exists() and not FAILED.search(shot):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{session}: no complete summary in 15 min")
            time.sleep(1)
            polls += 1
            if polls % 10 == 0:
                shot = subprocess.run(
                    [*tmux, "capture-pane", "-p", "-t", session], capture_output=True, text=True
                ).stdout
        time.sleep(1)  # let the app show the end, as a user would see it
        server = subprocess.run(
            [*tmux, "display-message", "-p", "#{pid} #{pane_pid}"], capture_output=True, text=True
        ).stdout.split()
        if len(server) == 2:
            cpu["tmux"] = _cpu_s(int(server[0]))
            for tui in _children(int(server[1])):  # the shell's child: voicelat --tui
                cpu["tui"] = _cpu_s(tui)
                for child in _children(tui):
                    cpu["child"] = _cpu_s(child)
        shot = subprocess.run(
            [*tmux, "capture-pane", "-p", "-t", session], capture_output=True, text=True
        ).stdout
        (out.parent / f"{out.name}.screen.txt").write_text(shot)
        subprocess.run([*tmux, "send-keys", "-t", session, "q"], check=False)
        while not rc_file.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{session}: did not exit after q")
            time.sleep(0.5)
        return int(rc_file.read_text().strip() or "-1")
    finally:
        socket = subprocess.run(
            [*tmux, "display-message", "-p", "#{socket_path}"], capture_output=True, text=True
        ).stdout.strip()
        subprocess.run([*tmux, "kill-server"], check=False, capture_output=True)
        if socket:  # tmux leaves the socket file behind
            Path(socket).unlink(missing_ok=True)


def wait_for_quiet(max_load: float, timeout: float = 600) -> float:
    """Wait (up to ``timeout`` s) until the 1-minute load average is below ``max_load``.

    The machine is shared: another session's tests or servers on the same cores show up as
    loop lag in whichever mode happens to run then. Returns the load the run starts at.
    """
    deadline = time.monotonic() + timeout
    while (load := os.getloadavg()[0]) >= max_load and time.monotonic() < deadline:
        time.sleep(5)
    return load


def extract(rev: str, dest: Path) -> Path:
    """The voicelat package of git revision ``rev`` under ``dest`` (no worktree, no checkout)."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    archive = dest / "src.tar"
    with archive.open("wb") as fh:
        subprocess.run(["git", "archive", rev, "voicelat"], cwd=ROOT, stdout=fh, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    archive.unlink()
    return dest


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--turns", type=int, default=5)
    p.add_argument("--new", metavar="REV", default="HEAD", help="the revision to measure")
    p.add_argument("--old", metavar="REV", help="also measure the TUI of this git revision")
    p.add_argument(
        "--nice0", action="store_true", help="also measure the TUI with VOICELAT_TUI_NICE=0"
    )
    p.add_argument(
        "--events",
        action="store_true",
        help="also measure the child alone: --no-tui --events jsonl, stdout to a file",
    )
    p.add_argument("--out", type=Path, default=Path("/tmp/voicelat-ab"))
    p.add_argument(
        "--max-load", type=float, default=1.0, help="wait for a 1-min load below this per run"
    )
    a = p.parse_args()
    if a.out.exists():
        shutil.rmtree(a.out)
    a.out.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k.startswith("VOICELAT_")}
    common = ["-p", str(ROOT / "pipelines" / "local.toml"), "-f", str(ROOT / "fixtures")]
    common += ["--turns", str(a.turns)]
    # A snapshot, not the working tree: a half-saved edit elsewhere must not break a run.
    new = extract(a.new, a.out / "new-src")
    # mode -> (source tree, extra environment)
    trees: dict[str, tuple[Path, dict[str, str]]] = {"no-tui": (new, {})}
    if a.events:
        trees["events"] = (new, {})
    trees["tui"] = (new, {})
    if a.nice0:
        trees["tui-nice0"] = (new, {"VOICELAT_TUI_NICE": "0"})
    if a.old:
        trees["old-tui"] = (extract(a.old, a.out / "old-src"), {})
    rows: list[dict[str, Any]] = []
    for i in range(1, a.runs + 1):
        for mode, (tree, extra) in trees.items():
            out = a.out / f"{mode}-{i}"
            load = wait_for_quiet(a.max_load)
            cmd = [sys.executable, "-m", "voicelat", "run", *common, "--out", str(out)]
            cpu: dict[str, float] = {}
            if mode == "no-tui":
                rc = run_plain([*cmd, "--no-tui"], tree, out)
            elif mode == "events":
                rc = run_plain([*cmd, "--no-tui", "--events", "jsonl"], tree, out)
            else:
                rc = run_in_tmux([*cmd, "--tui"], tree, out, {**env, **extra}, cpu)
            turns = _turns(out) if (out / "turns.jsonl").exists() else []
            loop = [t["figures"].get("loop_lag_max_ns") or 0 for t in turns]
            pacer = [t["figures"].get("pacer_lag_max_ns") or 0 for t in turns]
            row = {
                "mode": mode,
                "run": i,
                "rc": rc,
                "turns": len(turns),
                "load_before": round(load, 2),
                "load_after": round(os.getloadavg()[0], 2),
                "cpu_s": {k: round(v, 2) for k, v in cpu.items()},
                "loop_lag_max_ms": max(loop, default=0) / MS,
                "pacer_lag_max_ms": max(pacer, default=0) / MS,
                # The median turn: one noisy moment on a shared machine moves the max only.
                "loop_lag_median_turn_ms": statistics.median(loop or [0]) / MS,
                "pacer_lag_median_turn_ms": statistics.median(pacer or [0]) / MS,
                "loop_lag_per_turn_ms": [round(v / MS, 1) for v in loop],
                "pacer_lag_per_turn_ms": [round(v / MS, 1) for v in pacer],
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    (a.out / "ab.json").write_text(json.dumps(rows, indent=1))
    print(
        "\n| mode | run | exit | turns | load 1 min | loop lag max ms (median turn) "
        "| pacer lag max ms (median turn) |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['mode']} | {r['run']} | {r['rc']} | {r['turns']} | "
            f"{r['load_before']:.2f}-{r['load_after']:.2f} | "
            f"{r['loop_lag_max_ms']:.1f} ({r['loop_lag_median_turn_ms']:.1f}) | "
            f"{r['pacer_lag_max_ms']:.1f} ({r['pacer_lag_median_turn_ms']:.1f}) |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
