"""Is `voicelat whatif` right? Predict from a baseline run, rerun with the setting, compare.

    python bench/whatif_check.py                         # 2 settings, 2 rounds (~8 min)
    python bench/whatif_check.py --rounds 1 --set endpointing.hangover_ms=300
    python bench/whatif_check.py --report DIR/whatif_check.json   # print a saved result

Runs the embedded local stack (started once with `voicelat stack up`, stopped at the end when
this script started it). Each round runs `voicelat run` with pipelines/local.toml (the baseline)
and then with a copy of it per setting; the rounds are pooled per configuration. The prediction
is `voicelat whatif BASELINE --set ... --json` on the pooled baseline, the measurement the pooled
reruns. Prints predicted vs measured P50/P90 of e2e and of the endpointing segment over the warm
turns, and the P50 of e2e minus endpointing (what the setting does not touch) in the baseline
and in the rerun: when that moved, the machine's load moved between the runs and the prediction
cannot follow it (the load averages are printed too).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import MS, ROOT, machine_line

from voicelat.core.stats import percentile
from voicelat.files.results import load_run

PIPELINE = ROOT / "pipelines" / "local.toml"
DEFAULT_SETTINGS = ("endpointing.hangover_ms=300", "endpointing.threshold_dbfs=-30")


def _voicelat(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "voicelat", *args]
    return subprocess.run(cmd, env=env, text=True, capture_output=True, check=False)


def with_setting(text: str, key: str, value: str) -> str:
    """The pipeline file's text with ``[section] name = value`` set (replaced or added)."""
    section, name = key.split(".", 1)
    head = re.search(rf"^\[{re.escape(section)}\]\s*$", text, re.M)
    if head is None:
        return text + f"\n[{section}]\n{name} = {value}\n"
    nxt = re.search(r"^\[", text[head.end() :], re.M)
    end = head.end() + (nxt.start() if nxt else len(text) - head.end())
    body = text[head.end() : end]
    line = re.compile(rf"^{re.escape(name)}\s*=.*$", re.M)
    body = line.sub(f"{name} = {value}", body) if line.search(body) else f"\n{name} = {value}{body}"
    return text[: head.end()] + body + text[end:]


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_once(pipeline: Path, out: Path) -> str:
    """One `voicelat run` into ``out``; returns the load average it started under."""
    before = _load()
    r = _voicelat("run", "--no-tui", "--pipeline", str(pipeline), "--out", str(out))
    if r.returncode != 0:
        raise SystemExit(f"voicelat run failed ({r.returncode}): {r.stderr.strip()[-400:]}")
    return before


def pool(dirs: list[Path], out: Path) -> dict[str, Any]:
    """Merge runs into one run directory (turns appended, the first summary) and measure it.

    Percentiles are over the warm turns: e2e, the endpointing segment, and e2e minus it (the
    part a setting of the endpointer does not touch: when it moves between runs, the machine's
    load moved, and no prediction from one run can follow it).
    """
    out.mkdir(parents=True, exist_ok=True)
    lines = [ln for d in dirs for ln in (d / "turns.jsonl").read_text().splitlines() if ln.strip()]
    (out / "turns.jsonl").write_text("\n".join(lines) + "\n")
    (out / "summary.json").write_text((dirs[0] / "summary.json").read_text())
    turns = [t for t in load_run(out).turns if t.headline and t.e2e_ns is not None]
    e2e = [t.e2e_ns for t in turns if t.e2e_ns is not None]
    ep = [t.segments.get("endpointing", 0) for t in turns]
    rest = [e - p for e, p in zip(e2e, ep, strict=True)]
    return {
        "n": len(turns),
        "e2e_p50_ns": round(percentile(e2e, 50)),
        "e2e_p90_ns": round(percentile(e2e, 90)),
        "endpointing_p50_ns": round(percentile(ep, 50)),
        "after_endpoint_p50_ns": round(percentile(rest, 50)),
        "dir": str(out),
    }


def predict(baseline: Path, setting: str, out: Path) -> dict[str, Any]:
    """`voicelat whatif BASELINE --set SETTING --json`."""
    r = _voicelat("whatif", str(baseline), "--set", setting, "--json", str(out))
    if r.returncode != 0:
        raise SystemExit(f"voicelat whatif failed ({r.returncode}): {r.stderr.strip()}")
    doc: dict[str, Any] = json.loads(out.read_text())
    return doc


def _ms(ns: float) -> str:
    return f"{ns / MS:7.0f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", dest="settings", action="append", help="KEY=VALUE (repeatable)")
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds (each: every config)")
    ap.add_argument("--out", type=Path, help="where the runs go (default: a temporary dir)")
    ap.add_argument("--report", type=Path, help="only print the table of a whatif_check.json")
    args = ap.parse_args(argv)
    if args.report is not None:
        _print(json.loads(args.report.read_text()))
        return 0
    settings = args.settings or list(DEFAULT_SETTINGS)
    print(
        f"command: python bench/whatif_check.py {' '.join(sys.argv[1:] if argv is None else argv)}"
    )
    print(machine_line())
    work = args.out or Path(tempfile.mkdtemp(prefix="whatif-"))
    work.mkdir(parents=True, exist_ok=True)
    was_up = "ready" in _voicelat("stack", "status").stdout
    if not was_up and _voicelat("stack", "up").returncode != 0:
        raise SystemExit("voicelat stack up failed: see voicelat stack status")
    try:
        results = _check(settings, work, args.rounds)
    finally:
        if not was_up:
            _voicelat("stack", "down")
    (work / "whatif_check.json").write_text(json.dumps(results, indent=1) + "\n")
    _print(results)
    return 0


def _check(settings: list[str], work: Path, rounds: int) -> dict[str, Any]:
    """Interleaved: each round runs the baseline, then each setting, so slow drifts of the
    machine's load fall on all of them alike; the rounds are pooled per configuration."""
    pipes = [PIPELINE]
    for i, setting in enumerate(settings):
        key, value = setting.split("=", 1)
        pipe = work / f"pipeline-{i}.toml"
        pipe.write_text(with_setting(PIPELINE.read_text(), key, value))
        pipes.append(pipe)
    dirs: list[list[Path]] = [[] for _ in pipes]
    loads: list[str] = []
    for r in range(rounds):
        for j, pipe in enumerate(pipes):
            out = work / f"round{r}-{j}"
            loads.append(run_once(pipe, out))
            dirs[j].append(out)
            label = "baseline" if j == 0 else settings[j - 1]
            print(f"round {r + 1}/{rounds} {label}: done (load {loads[-1]})", flush=True)
    base = pool(dirs[0], work / "baseline")
    rows = []
    for i, setting in enumerate(settings):
        pred = predict(work / "baseline", setting, work / f"predict-{i}.json")
        meas = pool(dirs[i + 1], work / f"measured-{i}")
        rows.append({"setting": setting, "predicted": pred, "measured": meas})
    return {"baseline": base, "rows": rows, "rounds": rounds, "loads": loads}


def _print(results: dict[str, Any]) -> None:
    base = results["baseline"]
    print(
        f"\nbaseline (pipelines/local.toml): n={base['n']}  e2e P50 {_ms(base['e2e_p50_ns'])}  "
        f"P90 {_ms(base['e2e_p90_ns'])}  endpointing P50 {_ms(base['endpointing_p50_ns'])} ms  "
        f"after the endpoint P50 {_ms(base['after_endpoint_p50_ns'])} ms; "
        f"{results['rounds']} round(s), load averages {results['loads']}"
    )
    print(
        "| setting | n | e2e P50 predicted | measured | diff | e2e P90 predicted | measured | diff "
        "| endpointing P50 predicted | measured | after-endpoint P50 baseline | rerun |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in results["rows"]:
        p, m = row["predicted"], row["measured"]
        d50 = (p["predicted_p50_ns"] - m["e2e_p50_ns"]) / MS
        d90 = (p["predicted_p90_ns"] - m["e2e_p90_ns"]) / MS
        ep = p.get("predicted_endpointing_p50_ns")
        print(
            f"| {row['setting']} | {m['n']} | {_ms(p['predicted_p50_ns'])} | "
            f"{_ms(m['e2e_p50_ns'])} | {d50:+.0f} | {_ms(p['predicted_p90_ns'])} | "
            f"{_ms(m['e2e_p90_ns'])} | {d90:+.0f} | {_ms(ep) if ep is not None else '-'} | "
            f"{_ms(m['endpointing_p50_ns'])} | {_ms(base['after_endpoint_p50_ns'])} | "
            f"{_ms(m['after_endpoint_p50_ns'])} |"
        )


if __name__ == "__main__":
    sys.exit(main())
