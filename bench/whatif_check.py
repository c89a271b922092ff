"""Is `voicelat whatif` right? Predict from a baseline run, rerun with the setting, compare.

    python bench/whatif_check.py                         # 2 settings, 2 rounds (~8 min)
    python bench/whatif_check.py --rounds 1 --set endpointing.hangover_ms=300
    python bench/whatif_check.py --set chunker.mode=clause --set tts=espeak
    python bench/whatif_check.py --base-tts espeak --set chunker.mode=clause
    python bench/whatif_check.py --interleaved --repeat 2 --set chunker.mode=clause --set tts=espeak
    python bench/whatif_check.py --report DIR/whatif_check.json   # print a saved result

``--emulated-llm`` (with ``--interleaved``): the STT and the LLM are `voicelat serve openai` on
port 19410 with fixed delays (:data:`EMULATED_PROFILE`: 150 ms to the first token, then a word
every 25 ms of a fixed two-sentence reply); the TTS stays the local stack's. The loaded machine's
seconds of LLM and STT compute then stop drowning the TTS and chunker effects being checked.

``--interleaved``: instead of whole runs one after another, ONE `voicelat compare` of the
baseline pipeline and each setting's pipeline (and, for ``tts=NAME``, a second cell with NAME
that serves as the compare run the prediction reads): fixture A on every cell, then fixture B...
so the machine's load drifts onto baseline and reruns alike, turn by turn. The prediction is made
from the baseline cell, the measurement is the setting's cell.

``tts=NAME`` (NAME in :data:`TTS_TABLES`): a `voicelat compare` of the baseline's TTS and NAME
(same STT and LLM, the same fixtures) runs once first; the prediction is `voicelat whatif
BASELINE --set tts=NAME --compare THAT`, the measurement reruns with NAME's [tts] table.
``--base-tts NAME`` makes NAME's table the baseline's (e.g. a chunker what-if on a TTS that
synthesizes each piece it is sent). The stack's ports and state come from the environment
(VOICELAT_STT_PORT / _TTS_PORT / _LLM_PORT, VOICELAT_STATE_DIR), as for `voicelat stack up`.

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
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import MS, ROOT, machine_line

from voicelat.core.base.stats import percentile
from voicelat.files.results import load_run

PIPELINE = ROOT / "pipelines" / "local.toml"
DEFAULT_SETTINGS = ("endpointing.hangover_ms=300", "endpointing.threshold_dbfs=-30")
#: The [tts] tables a swap may use (the local stack's two TTSes, as in matrix-local.toml).
TTS_TABLES: dict[str, dict[str, Any]] = {
    "piper": {"stage": "wyoming-tts", "voice": "en_US-joe-medium", "streaming": True},
    "espeak": {"stage": "espeak-tts", "voice": "en-us"},
}


def _voicelat(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), KEY_ENV: "emulator-key"}
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


EMULATED_PORT = 19410
EMULATED_REPLY = "Sure, I can do that for you. Well, is there anything else?"
EMULATED_PROFILE = f"""seed = 1

[openai.latency]
headers = 5
ttft = 150
token = 25
stt_first = 60
stt_final = 120

[openai.content]
reply = {json.dumps(EMULATED_REPLY)}
"""
KEY_ENV = "VOICELAT_EMULATOR_KEY"


def emulated_text(text: str, base_url: str) -> str:
    """The pipeline's text with [stt] and [llm] on the emulator at ``base_url``."""
    common = {"base_url": base_url, "api_key_env": KEY_ENV}
    stt = {"stage": "openai-stt", "model": "gpt-4o-mini-transcribe", "language": "en", **common}
    llm = {"stage": "openai", "endpoint": "chat", "model": "gpt-4o-mini", "max_tokens": 60}
    return with_table(with_table(text, "stt", stt), "llm", {**llm, "temperature": 0.0, **common})


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(str(value))


def setting_value(raw: str) -> str:
    """A --set value as TOML: numbers as they are, anything else quoted."""
    try:
        float(raw)
    except ValueError:
        return json.dumps(raw)
    return raw


def with_table(text: str, section: str, table: dict[str, Any]) -> str:
    """The pipeline file's text with ``[section]`` replaced whole by ``table``."""
    body = "".join(f"{k} = {_toml_value(v)}\n" for k, v in table.items())
    head = re.search(rf"^\[{re.escape(section)}\]\s*$", text, re.M)
    if head is None:
        return text + f"\n[{section}]\n{body}"
    nxt = re.search(r"^\[", text[head.end() :], re.M)
    end = head.end() + (nxt.start() if nxt else len(text) - head.end())
    return text[: head.end()] + "\n" + body + "\n" + text[end:]


def tts_matrix(base_tts: str, other: str) -> str:
    """A matrix of the baseline pipeline's STT and LLM with two TTSes (labelled by name)."""
    import tomllib

    doc = tomllib.loads(PIPELINE.read_text())
    out = ['[matrix]\nname = "whatif-tts"\nstack = "local"\n']
    for kind in ("stt", "llm"):
        out.append(f"[[{kind}]]\nlabel = {json.dumps(kind)}\n")
        out += [
            f"{k} = {_toml_value(v) if not isinstance(v, list) else json.dumps(v)}\n"
            for k, v in doc[kind].items()
        ]
    for label in (base_tts, other):
        out.append(f"[[tts]]\nlabel = {json.dumps(label)}\n")
        out += [f"{k} = {_toml_value(v)}\n" for k, v in TTS_TABLES[label].items()]
    for table in ("endpointing", "chunker", "output", "turn"):
        out.append(f"[{table}]\n")
        out += [f"{k} = {_toml_value(v)}\n" for k, v in doc[table].items()]
    return "\n".join(out)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_once(pipeline: Path, out: Path) -> str:
    """One `voicelat run` into ``out``; returns the load average it started under."""
    before = _load()
    r = _voicelat("run", "--no-tui", "--pipeline", str(pipeline), "--out", str(out))
    if r.returncode != 0:
        raise SystemExit(f"voicelat run failed ({r.returncode}): {r.stderr.strip()[-400:]}")
    return before


def _parts(turns: list[Any]) -> dict[str, list[int]]:
    """The parts of e2e a reply what-if moves, over the turns that have them."""
    out: dict[str, list[int]] = {
        "llm_first_token -> tts_first_byte": [],
        "llm_first_speakable -> output_first_audible": [],
    }
    for t in turns:
        m = t.milestones
        if "llm_first_token" in m and "tts_first_byte" in m:
            out["llm_first_token -> tts_first_byte"].append(
                m["tts_first_byte"] - m["llm_first_token"]
            )
        if "llm_first_speakable" in m and "output_first_audible" in m:
            out["llm_first_speakable -> output_first_audible"].append(
                m["output_first_audible"] - m["llm_first_speakable"]
            )
    return out


def pool(dirs: list[Path], out: Path) -> dict[str, Any]:
    """Merge runs into one run directory (turns appended, the first summary) and measure it.

    Percentiles are over the warm turns: e2e, the endpointing segment, and e2e minus it (the
    part a setting of the endpointer does not touch: when it moves between runs, the machine's
    load moved, and no prediction from one run can follow it); and the parts a chunker or TTS
    what-if moves (``parts_p50_ns``).
    """
    out.mkdir(parents=True, exist_ok=True)
    lines = [ln for d in dirs for ln in (d / "turns.jsonl").read_text().splitlines() if ln.strip()]
    # One run's turn indexes are unique (a repeated index is a damaged record the reader
    # skips): the pooled turns are numbered anew.
    pooled = [json.dumps(json.loads(ln) | {"index": k}) for k, ln in enumerate(lines)]
    (out / "turns.jsonl").write_text("\n".join(pooled) + "\n")
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
        "parts_p50_ns": {k: round(percentile(v, 50)) for k, v in _parts(turns).items() if v},
        "dir": str(out),
    }


def predict(baseline: Path, setting: str, out: Path, *extra: str) -> dict[str, Any]:
    """`voicelat whatif BASELINE --set SETTING --json` (plus ``extra``, e.g. --compare DIR)."""
    r = _voicelat("whatif", str(baseline), "--set", setting, *extra, "--json", str(out))
    if r.returncode != 0:
        raise SystemExit(f"voicelat whatif failed ({r.returncode}): {r.stderr.strip()}")
    doc: dict[str, Any] = json.loads(out.read_text())
    doc["text"] = r.stdout
    return doc


def _ms(ns: float) -> str:
    return f"{ns / MS:7.0f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", dest="settings", action="append", help="KEY=VALUE (repeatable)")
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds (each: every config)")
    ap.add_argument("--base-tts", choices=sorted(TTS_TABLES), help="the baseline's TTS")
    ap.add_argument(
        "--interleaved", action="store_true", help="one interleaved compare (see the docstring)"
    )
    ap.add_argument("--repeat", type=int, default=2, help="with --interleaved: fixture repeats")
    ap.add_argument(
        "--emulated-llm", action="store_true", help="with --interleaved: emulated STT and LLM"
    )
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
        if args.interleaved:
            with _emulator(work, args.emulated_llm) as url:
                results = _check_interleaved(settings, work, args.repeat, args.base_tts, url)
        else:
            results = _check(settings, work, args.rounds, args.base_tts)
    finally:
        if not was_up:
            _voicelat("stack", "down")
    (work / "whatif_check.json").write_text(json.dumps(results, indent=1) + "\n")
    _print(results)
    return 0


def _base_text(base_tts: str | None) -> str:
    text = PIPELINE.read_text()
    return text if base_tts is None else with_table(text, "tts", TTS_TABLES[base_tts])


def _measured_text(base: str, setting: str) -> str:
    key, value = setting.split("=", 1)
    if key == "tts":
        if value not in TTS_TABLES:
            raise SystemExit(f"--set tts={value}: choose from {', '.join(TTS_TABLES)}")
        return with_table(base, "tts", TTS_TABLES[value])
    return with_setting(base, key, setting_value(value))


def compare_tts(work: Path, base_tts: str, other: str) -> Path:
    """`voicelat compare` of the baseline's TTS and ``other`` (run once, before the rounds)."""
    matrix = work / f"matrix-{other}.toml"
    matrix.write_text(tts_matrix(base_tts, other))
    out = work / f"compare-{other}"
    r = _voicelat("compare", "--matrix", str(matrix), "--out", str(out), "--no-tui")
    if r.returncode != 0:
        raise SystemExit(f"voicelat compare failed ({r.returncode}): {r.stderr.strip()[-400:]}")
    return out


def _check(settings: list[str], work: Path, rounds: int, base_tts: str | None) -> dict[str, Any]:
    """Interleaved: each round runs the baseline, then each setting, so slow drifts of the
    machine's load fall on all of them alike; the rounds are pooled per configuration."""
    base = _base_text(base_tts)
    pipes = [work / "pipeline-base.toml"]
    pipes[0].write_text(base)
    compares: dict[str, Path] = {}
    for i, setting in enumerate(settings):
        pipe = work / f"pipeline-{i}.toml"
        pipe.write_text(_measured_text(base, setting))
        pipes.append(pipe)
        key, value = setting.split("=", 1)
        if key == "tts":
            load = _load()
            compares[setting] = compare_tts(work, base_tts or "piper", value)
            print(f"compare piper|{value}: done (load {load})", flush=True)
    dirs: list[list[Path]] = [[] for _ in pipes]
    loads: list[str] = []
    for r in range(rounds):
        for j, pipe in enumerate(pipes):
            out = work / f"round{r}-{j}"
            loads.append(run_once(pipe, out))
            dirs[j].append(out)
            label = "baseline" if j == 0 else settings[j - 1]
            print(f"round {r + 1}/{rounds} {label}: done (load {loads[-1]})", flush=True)
    baseline = pool(dirs[0], work / "baseline")
    rows = []
    for i, setting in enumerate(settings):
        extra = ("--compare", str(compares[setting])) if setting in compares else ()
        pred = predict(work / "baseline", setting, work / f"predict-{i}.json", *extra)
        meas = pool(dirs[i + 1], work / f"measured-{i}")
        rows.append({"setting": setting, "predicted": pred, "measured": meas})
    return {
        "baseline": baseline,
        "base_tts": base_tts or "piper",
        "rows": rows,
        "rounds": rounds,
        "loads": loads,
    }


def named(text: str, name: str) -> str:
    """The pipeline file's text with ``[pipeline] name`` set (a compare names cells by it)."""
    return with_setting(text, "pipeline.name", json.dumps(name))


@contextlib.contextmanager
def _emulator(work: Path, wanted: bool) -> Iterator[str | None]:
    """`voicelat serve openai` on :data:`EMULATED_PORT` while the block runs (None: not wanted)."""
    if not wanted:
        yield None
        return
    profile = work / "emulated-profile.toml"
    profile.write_text(EMULATED_PROFILE)
    env = {**os.environ, "PYTHONPATH": str(ROOT), KEY_ENV: "emulator-key"}
    cmd = [sys.executable, "-m", "voicelat", "serve", "openai", "--port", str(EMULATED_PORT)]
    proc = subprocess.Popen(
        [*cmd, "--profile", str(profile)], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("openai "):
            raise SystemExit(f"voicelat serve openai did not start: {line!r}")
        yield line.split()[1]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)


def _check_interleaved(
    settings: list[str], work: Path, repeat: int, base_tts: str | None, emulated: str | None
) -> dict[str, Any]:
    """One `voicelat compare` of every configuration, interleaved fixture by fixture."""
    base = _base_text(base_tts)
    if emulated is not None:
        base = emulated_text(base, emulated)
    files = {"base": named(base, "base")}
    for i, setting in enumerate(settings):
        measured = _measured_text(base, setting)
        files[f"set{i}"] = named(measured, f"set{i}")
        key, value = setting.split("=", 1)
        if key == "tts":
            # The compare run the prediction reads: the same TTS, its own cell and worker.
            files[f"tts-{value}"] = named(measured, f"tts-{value}")
    paths = []
    for name, text in files.items():
        path = work / f"{name}.toml"
        path.write_text(text)
        paths.append(str(path))
    out = work / "interleaved"
    load = _load()
    args = ["compare", *paths, "--repeat", str(repeat), "--out", str(out), "--no-tui"]
    r = _voicelat(*args)
    if r.returncode != 0:
        raise SystemExit(f"voicelat compare failed ({r.returncode}): {r.stderr.strip()[-400:]}")
    loads = [load, _load()]
    print(f"interleaved compare of {len(files)} cells: done (load {load} -> {loads[1]})")
    baseline = pool([out / "base"], work / "baseline")
    rows = []
    for i, setting in enumerate(settings):
        key, value = setting.split("=", 1)
        extra = ("--compare", str(out)) if key == "tts" else ()
        shown = f"tts=tts-{value}" if key == "tts" else setting
        pred = predict(work / "baseline", shown, work / f"predict-{i}.json", *extra)
        meas = pool([out / f"set{i}"], work / f"measured-{i}")
        rows.append({"setting": setting, "predicted": pred, "measured": meas})
    return {
        "baseline": baseline,
        "base_tts": base_tts or "piper",
        "rows": rows,
        "rounds": f"interleaved compare, --repeat {repeat}"
        + (", emulated STT and LLM" if emulated else ""),
        "loads": loads,
    }


def _print(results: dict[str, Any]) -> None:
    base = results["baseline"]
    print(
        f"\nbaseline (pipelines/local.toml, TTS {results.get('base_tts', 'piper')}): "
        f"n={base['n']}  e2e P50 {_ms(base['e2e_p50_ns'])}  "
        f"P90 {_ms(base['e2e_p90_ns'])}  endpointing P50 {_ms(base['endpointing_p50_ns'])} ms  "
        f"after the endpoint P50 {_ms(base['after_endpoint_p50_ns'])} ms; "
        f"{results['rounds']} round(s), load averages {results['loads']}"
    )
    print(
        "| setting | n | e2e P50 predicted | measured | diff | e2e P90 predicted | measured | diff "
        "| moved part | its P50 baseline | predicted | measured |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|")
    for row in results["rows"]:
        p, m = row["predicted"], row["measured"]
        d50 = (p["predicted_p50_ns"] - m["e2e_p50_ns"]) / MS
        d90 = (p["predicted_p90_ns"] - m["e2e_p90_ns"]) / MS
        part = p.get("part", "endpointing")
        if part == "endpointing":
            was, now = base["endpointing_p50_ns"], m["endpointing_p50_ns"]
        else:
            was = base.get("parts_p50_ns", {}).get(part)
            now = m.get("parts_p50_ns", {}).get(part)
        pp = p.get("predicted_part_p50_ns", p.get("predicted_endpointing_p50_ns"))
        print(
            f"| {row['setting']} | {m['n']} | {_ms(p['predicted_p50_ns'])} | "
            f"{_ms(m['e2e_p50_ns'])} | {d50:+.0f} | {_ms(p['predicted_p90_ns'])} | "
            f"{_ms(m['e2e_p90_ns'])} | {d90:+.0f} | {part} | "
            f"{_ms(was) if was is not None else '-'} | {_ms(pp) if pp is not None else '-'} | "
            f"{_ms(now) if now is not None else '-'} |"
        )


if __name__ == "__main__":
    sys.exit(main())
