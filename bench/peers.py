"""The same local servers measured by other tools and by voicelat, side by side, in one run.

    python bench/peers.py                 # ~4 min; creates bench/.venv-peers the first time

Servers: the embedded local stack (voicelat's stack manager starts it on the benches' ports):
llama-cpp-python serving gemma-3-270m, wyoming-faster-whisper (tiny.en), wyoming-piper (joe).

- **LLM**: ``curl -w '%{time_starttransfer}'`` (the usual quick method) against
  ``/v1/completions`` with ``stream: true``, and voicelat's ``openai`` stage with the very same
  body (the local pipeline's prompt, stop and seed), alternating request by request. voicelat
  reports the response headers (TTFB, like curl's starttransfer) and the first non-empty token
  (TTFT), which curl cannot see.
- **TTS**: ``wyoming-bench tts --no-unique`` (its 4 built-in texts, 1-4 sentences; both modes)
  and voicelat's ``wyoming-tts`` stage on the same texts: request -> first audio chunk.
- **STT**: ``wyoming-bench stt --trailing-silence 0`` on a corpus of voicelat's bundled fixtures
  and voicelat's ``wyoming-stt`` stage on the same WAVs, audio sent unpaced like wyoming-bench:
  wyoming-bench's Total (from before ``transcribe``) and voicelat's from the first byte and from
  audio-stop (its ``stt_finalization``).

wyoming-bench 2026.10.0 lives in its own venv (bench/.venv-peers), not in voicelat's deps:

    python3 -m venv bench/.venv-peers && bench/.venv-peers/bin/pip install wyoming-bench==2026.10.0
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import MS, ROOT, local_stack, machine, machine_line

from voicelat.audio import frames, load_for_stage
from voicelat.core.measure.events import Audio, Delta, Done, Final, RequestSent, Span, TextSent
from voicelat.files.fixtures import default_fixtures_dir, load_fixtures
from voicelat.files.pipeline import default_pipeline_path, load_pipeline
from voicelat.stages.base import load_stage_class

PEERS_VENV = ROOT / "bench" / ".venv-peers"
WYOMING_BENCH = "wyoming-bench==2026.10.0"
VOICE = {"voice": {"name": "en_US-joe-medium"}}
# wyoming-bench's built-in TTS texts (wyoming_bench/tts/texts.py), so both tools say the same.
TTS_TEXTS = [
    "The weather today is sunny and warm with a light breeze.",
    "The quick brown fox jumps over the lazy dog. This sentence tests two-sentence synthesis.",
    "Text to speech is a fascinating field. Modern neural models produce remarkably natural "
    "audio. We benchmark them to compare performance.",
    "Welcome to the Wyoming protocol benchmark. We measure latency, streaming behavior, and "
    "throughput. Each sample is between one and four sentences long. Results help us choose "
    "the best engine for real-time use.",
]
QUESTION = "What's the weather like in Paris today?"


def ensure_peers_venv() -> Path:
    exe = PEERS_VENV / "bin" / "wyoming-bench"
    if not exe.exists():
        print(f"creating {PEERS_VENV} with {WYOMING_BENCH} ...", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(PEERS_VENV)], check=True)
        pip = [str(PEERS_VENV / "bin" / "pip"), "install", "-q", WYOMING_BENCH]
        subprocess.run(pip, check=True)
    return exe


def med(values: list[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


def p95(values: list[float]) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return round(s[min(len(s) - 1, round(0.95 * (len(s) - 1)))], 1)


# -- LLM: curl vs voicelat ------------------------------------------------------------------------
async def llm_side_by_side(base: str, rounds: int, work: Path) -> dict[str, Any]:
    p = load_pipeline(default_pipeline_path())
    table = dict(p.llm) | {"base_url": base}
    stage = load_stage_class("openai", "llm")(table)
    url, body = stage._body(QUESTION)
    body_file = work / "body.json"
    body_file.write_text(json.dumps(body))
    curl = shutil.which("curl")
    assert curl, "curl is not installed"
    fmt = "%{time_connect} %{time_starttransfer} %{time_total}"
    body_out = work / "curl-body.txt"
    cmd = [
        curl,
        "-sS",
        "-N",
        "-o",
        str(body_out),
        "-w",
        fmt,
        "-H",
        "Content-Type: application/json",
    ]
    cmd += ["-H", "Accept-Encoding: identity", "--data-binary", f"@{body_file}", url]
    out: dict[str, list[float]] = {
        "curl_connect": [],
        "curl_starttransfer": [],
        "curl_total": [],
        "vl_headers": [],
        "vl_ttft": [],
        "vl_total": [],
        "curl_tokens": [],
        "vl_tokens": [],
    }
    async with stage:
        for i in range(rounds + 1):
            c = await asyncio.to_thread(
                subprocess.run, cmd, capture_output=True, text=True, check=True
            )
            connect, start, total = (float(x) * 1000 for x in c.stdout.split())
            got: dict[str, int] = {"tokens": 0}
            async for ev in stage.complete(QUESTION):
                if isinstance(ev, RequestSent):
                    got["req"] = ev.t_ns
                elif isinstance(ev, Span) and ev.name == "response_headers":
                    got["headers"] = ev.end_ns
                elif isinstance(ev, Delta) and ev.content:
                    got.setdefault("token", ev.t_ns)
                    got["tokens"] += 1
                elif isinstance(ev, Done):
                    got["done"] = ev.t_ns
            if i == 0:
                continue  # one warm-up request each (the first after start costs ~230 ms)
            out["curl_connect"].append(connect)
            out["curl_starttransfer"].append(start)
            out["curl_total"].append(total)
            out["vl_headers"].append((got["headers"] - got["req"]) / MS)
            out["vl_ttft"].append((got["token"] - got["req"]) / MS)
            out["vl_total"].append((got["done"] - got["req"]) / MS)
            # Same body, seed and temperature 0: both tools should get the same reply.
            out["vl_tokens"].append(got["tokens"])
            out["curl_tokens"].append(_sse_tokens(body_out.read_text()))
    return {"url": url, "body": body, **{k: v for k, v in out.items()}}


def _sse_tokens(body: str) -> int:
    """Non-empty ``text`` events in a saved /v1/completions stream."""
    n = 0
    for line in body.splitlines():
        if line.startswith("data: {"):
            choices = json.loads(line[6:]).get("choices") or [{}]
            n += bool(choices[0].get("text"))
    return n


# -- TTS: wyoming-bench vs voicelat --------------------------------------------------------------
def wyoming_bench_tts(
    exe: Path, server: str, rounds: int
) -> tuple[str, dict[str, dict[int, list[float]]]]:
    """wyoming-bench's output and its per-measurement TTFTs (-v lines), by mode and text."""
    cmd = [str(exe), "tts", server, "--mode", "both", "--no-unique", "--rounds", str(rounds)]
    cmd += ["--warmup", "1", "--config", json.dumps(VOICE), "-v"]
    raw = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    out: dict[str, dict[int, list[float]]] = {}
    for mode, sent, ttft in re.findall(r"\[(\w+)\] r\d+ sent=(\d+) ttft=([\d.]+)ms", raw):
        out.setdefault(mode, {}).setdefault(int(sent) - 1, []).append(float(ttft))
    return raw, out


async def voicelat_tts(url: str, rounds: int, streaming: bool) -> dict[int, list[float]]:
    stage = load_stage_class("wyoming-tts", "tts")(
        {"url": url, "voice": "en_US-joe-medium", "streaming": streaming}
    )
    out: dict[int, list[float]] = {}
    async with stage:
        for i, text in enumerate(TTS_TEXTS):
            sentences = [s + " " for s in re.split(r"(?<=[.!?])\s+", text) if s]
            for r in range(rounds + 1):

                async def pieces(ss: list[str] = sentences) -> AsyncIterator[str]:
                    for s in ss:
                        yield s

                sent = first = None
                async for ev in stage.synthesize(pieces()):
                    if isinstance(ev, TextSent) and sent is None:
                        sent = ev.t_ns
                    elif isinstance(ev, Audio) and ev.pcm and first is None:
                        first = ev.t_ns
                if r and sent is not None and first is not None:
                    out.setdefault(i, []).append((first - sent) / MS)
    return out


# -- STT: wyoming-bench vs voicelat --------------------------------------------------------------
def corpus(work: Path) -> Path:
    d = work / "corpus"
    d.mkdir()
    for f in load_fixtures(default_fixtures_dir()):
        (d / f"{f.id}.wav").symlink_to(f.path)
        (d / f"{f.id}.txt").write_text(f.text)
    return d


def wyoming_bench_stt(
    exe: Path, server: str, d: Path, rounds: int
) -> tuple[str, dict[str, list[float]]]:
    """wyoming-bench's output and its per-measurement Totals (-v lines), by fixture."""
    cmd = [str(exe), "stt", server, "--corpus", str(d), "--mode", "non_streaming"]
    cmd += ["--trailing-silence", "0", "--rounds", str(rounds), "--warmup", "1", "-v"]
    cmd += ["--config", json.dumps({"language": "en"})]
    raw = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    out: dict[str, list[float]] = {}
    for name, total in re.findall(r"\[non_streaming\] r\d+ (\S+) total=([\d.]+)ms", raw):
        out.setdefault(name, []).append(float(total))
    return raw, out


async def voicelat_stt(url: str, rounds: int) -> dict[str, dict[str, list[float]]]:
    stage = load_stage_class("wyoming-stt", "stt")({"url": url, "language": "en"})
    out: dict[str, dict[str, list[float]]] = {}
    async with stage:
        for f in load_fixtures(default_fixtures_dir()):
            pcm = load_for_stage(f.path, 16000)
            chunks = frames(pcm, 20)
            for r in range(rounds + 1):
                t_first: list[int] = []

                async def audio(
                    cs: list[bytes] = chunks, t: list[int] = t_first
                ) -> AsyncIterator[bytes]:
                    t.append(time.perf_counter_ns())  # unpaced, like wyoming-bench
                    for c in cs:
                        yield c

                end = final = None
                async for ev in stage.transcribe(audio()):
                    if isinstance(ev, RequestSent):
                        end = ev.t_ns
                    elif isinstance(ev, Final):
                        final = ev.t_ns
                if r and end is not None and final is not None and t_first:
                    row = out.setdefault(f.id, {"total": [], "finalization": []})
                    row["total"].append((final - t_first[0]) / MS)
                    row["finalization"].append((final - end) / MS)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=10, help="timed rounds per tool and sample (10)")
    ap.add_argument("--json", type=Path, help="write every measurement here as JSON")
    args = ap.parse_args(argv)
    exe = ensure_peers_venv()
    print(f"voicelat peers bench, {time.strftime('%Y-%m-%d %H:%M')}; {machine_line()}")
    print(f"command: python bench/peers.py {' '.join(sys.argv[1:] if argv is None else argv)}")
    results: dict[str, Any] = {"machine": machine()}
    with tempfile.TemporaryDirectory(prefix="voicelat-peers-") as tmp:
        work = Path(tmp)
        with local_stack(work / "state") as env:
            from voicelat.stack import StackConfig

            cfg = StackConfig()
            tts_server = f"127.0.0.1:{env['VOICELAT_TTS_PORT']}"
            stt_server = f"127.0.0.1:{env['VOICELAT_STT_PORT']}"
            llm = asyncio.run(llm_side_by_side(f"{cfg.llm_url}/v1", args.rounds, work))
            results["llm"] = llm
            wb_tts_raw, wb_tts = wyoming_bench_tts(exe, tts_server, min(args.rounds, 8))
            vl_tts = {
                mode: asyncio.run(
                    voicelat_tts(cfg.tts_url, min(args.rounds, 8), mode == "streaming")
                )
                for mode in ("non_streaming", "streaming")
            }
            results["tts"] = {"wyoming_bench": wb_tts, "raw": wb_tts_raw, "voicelat": vl_tts}
            d = corpus(work)
            wb_stt_raw, wb_stt = wyoming_bench_stt(exe, stt_server, d, min(args.rounds, 3))
            vl_stt = asyncio.run(voicelat_stt(cfg.stt_url, min(args.rounds, 3)))
            results["stt"] = {"wyoming_bench": wb_stt, "raw": wb_stt_raw, "voicelat": vl_stt}

    print(f"\nLLM /v1/completions (stream), {args.rounds} requests each, alternating; ms")
    print(f"  {'tool / figure':<48} {'median':>8} {'p95':>8}")
    for key, label in (
        ("curl_connect", "curl time_connect (new TCP connection each time)"),
        ("curl_starttransfer", "curl time_starttransfer"),
        ("vl_headers", "voicelat response_headers (TTFB, warm connection)"),
        ("vl_ttft", "voicelat llm_ttft (first non-empty token)"),
        ("curl_total", "curl time_total"),
        ("vl_total", "voicelat request -> [DONE]"),
    ):
        print(f"  {label:<48} {med(llm[key])!s:>8} {p95(llm[key])!s:>8}")

    print(
        f"  tokens per reply: curl {sorted(set(llm['curl_tokens']))}, "
        f"voicelat {sorted(set(llm['vl_tokens']))}"
    )

    print("\nTTS piper: request -> first audio chunk, ms (median per text; all: median / p95)")
    print(f"  {'tool, mode':<30} {'1 sent.':>8} {'2 sent.':>8} {'3 sent.':>8} {'4 sent.':>8}   all")
    for mode in ("non_streaming", "streaming"):
        for tool, rows in (("wyoming-bench", wb_tts.get(mode, {})), ("voicelat", vl_tts[mode])):
            cells = "".join(f"{med(rows.get(i, []))!s:>9}" for i in range(4))
            allv = [x for v in rows.values() for x in v]
            print(f"  {tool + ', ' + mode:<30}{cells}   {med(allv)} / {p95(allv)}")

    print("\nSTT whisper, 14 bundled fixtures, audio unpaced, no trailing silence; ms")
    wb_all = [x for v in wb_stt.values() for x in v]
    tot = [x for r in vl_stt.values() for x in r["total"]]
    fin = [x for r in vl_stt.values() for x in r["finalization"]]
    print(
        f"  wyoming-bench Total (before transcribe -> transcript): median {med(wb_all)}, p95 {p95(wb_all)}"
    )
    print(
        f"  voicelat first audio byte -> transcript:               median {med(tot)}, p95 {p95(tot)}"
    )
    print(
        f"  voicelat audio-stop -> transcript (stt_finalization):  median {med(fin)}, p95 {p95(fin)}"
    )
    per = [
        (med(wb_stt.get(k, [])), med(v["total"]))
        for k, v in sorted(vl_stt.items())
        if wb_stt.get(k)
    ]
    deltas = [b - a for a, b in per if a is not None and b is not None]
    if deltas:
        print(
            f"  per fixture, voicelat minus wyoming-bench (medians): median {med(deltas)}, "
            f"range {min(deltas):+.1f} .. {max(deltas):+.1f}"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
