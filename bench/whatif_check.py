"""Is `voicelat whatif` right? Predict from a baseline run, rerun with the setting, compare.

    python bench/whatif_check.py                         # 2 settings, --repeat 2 (~8 min)
    python bench/whatif_check.py --repeat 1 --set endpointing.hangover_ms=300

Runs the embedded local stack (started once with `voicelat stack up`, stopped at the end when
this script started it): a baseline `voicelat run` with pipelines/local.toml, then for each
setting `voicelat whatif BASELINE --set ... --json` (the prediction) and a `voicelat run` with a
copy of the pipeline file that has the setting (the measurement). Prints predicted vs measured
P50/P90 of e2e and of the endpointing segment over the warm turns, with the load average before
and after each run (other work on the machine moves every stage's latency, not only the one the
setting changes).
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


def measure(pipeline: Path, out: Path, repeat: int) -> dict[str, Any]:
    """One `voicelat run`; the warm turns' e2e and endpointing percentiles (ns)."""
    before = _load()
    r = _voicelat(
        "run", "--no-tui", "--pipeline", str(pipeline), "--repeat", str(repeat), "--out", str(out)
    )
    if r.returncode != 0:
        raise SystemExit(f"voicelat run failed ({r.returncode}): {r.stderr.strip()[-400:]}")
    turns = [t for t in load_run(out).turns if t.headline and t.e2e_ns is not None]
    e2e = [t.e2e_ns for t in turns if t.e2e_ns is not None]
    ep = [t.segments.get("endpointing", 0) for t in turns]
    return {
        "n": len(turns),
        "e2e_p50_ns": round(percentile(e2e, 50)),
        "e2e_p90_ns": round(percentile(e2e, 90)),
        "endpointing_p50_ns": round(percentile(ep, 50)),
        "load_before": before,
        "load_after": _load(),
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
    ap.add_argument("--repeat", type=int, default=2, help="rounds over the 14 fixtures per run")
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
        results = _check(settings, work, args.repeat)
    finally:
        if not was_up:
            _voicelat("stack", "down")
    (work / "whatif_check.json").write_text(json.dumps(results, indent=1) + "\n")
    _print(results)
    return 0


def _check(settings: list[str], work: Path, repeat: int) -> dict[str, Any]:
    base = measure(PIPELINE, work / "baseline", repeat)
    print(
        f"baseline: n={base['n']} e2e P50 {_ms(base['e2e_p50_ns'])} ms (load {base['load_before']})",
        flush=True,
    )
    rows = []
    for i, setting in enumerate(settings):
        key, value = setting.split("=", 1)
        pred = predict(work / "baseline", setting, work / f"predict-{i}.json")
        pipe = work / f"pipeline-{i}.toml"
        pipe.write_text(with_setting(PIPELINE.read_text(), key, value))
        meas = measure(pipe, work / f"run-{i}", repeat)
        rows.append({"setting": setting, "predicted": pred, "measured": meas})
        print(f"{setting}: measured n={meas['n']} (load {meas['load_before']})", flush=True)
    return {"baseline": base, "rows": rows}


def _print(results: dict[str, Any]) -> None:
    base = results["baseline"]
    print(
        f"\nbaseline (pipelines/local.toml): n={base['n']}  e2e P50 {_ms(base['e2e_p50_ns'])}  "
        f"P90 {_ms(base['e2e_p90_ns'])}  endpointing P50 {_ms(base['endpointing_p50_ns'])} ms  "
        f"(load {base['load_before']})"
    )
    print(
        "| setting | n | e2e P50 predicted | measured | diff | e2e P90 predicted | measured | diff "
        "| endpointing P50 predicted | measured | load avg 1/5/15 min before |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for row in results["rows"]:
        p, m = row["predicted"], row["measured"]
        d50 = (p["predicted_p50_ns"] - m["e2e_p50_ns"]) / MS
        d90 = (p["predicted_p90_ns"] - m["e2e_p90_ns"]) / MS
        ep = p.get("predicted_endpointing_p50_ns")
        print(
            f"| {row['setting']} | {m['n']} | {_ms(p['predicted_p50_ns'])} | "
            f"{_ms(m['e2e_p50_ns'])} | {d50:+.0f} | {_ms(p['predicted_p90_ns'])} | "
            f"{_ms(m['e2e_p90_ns'])} | {d90:+.0f} | {_ms(ep) if ep is not None else '-'} | "
            f"{_ms(m['endpointing_p50_ns'])} | {m['load_before']} |"
        )


if __name__ == "__main__":
    sys.exit(main())
