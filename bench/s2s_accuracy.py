"""How accurate are voicelat's S2S timings? Measured vs the OpenAI Realtime emulator's ground truth.

    python bench/s2s_accuracy.py                  # 20 measured turns at 1 session (~2 min)
    python bench/s2s_accuracy.py --turns 40

The OpenAI Realtime emulator runs in its own process (`voicelat serve openai-realtime --truth
FILE`) with exact, fixed delays: response.created 30 ms and the first audio 250 ms after its
server VAD's speech_stopped, one audio delta every 20 ms (40 ms each), 60 ms of leading silence,
server VAD with silence_duration_ms 500. voicelat runs real turns against it (the
`openai-realtime` stage, pipelines/emulated-openai-realtime.toml's settings: a 2 s tone
utterance at 16 kHz resampled to 24 kHz and paced in real time, silence after it until the
server ends the turn, the simulated sink playing the reply in real time), one session, one
realtime session per turn. The emulator stamps `perf_counter_ns()` right before the write that
hands the bytes to the kernel: CLOCK_MONOTONIC, one clock for both processes.

Per turn, errors in ms (measured minus truth):

- **endpoint**: voicelat's `endpoint` (arrival of `speech_stopped`) - its write.
- **first audio**: voicelat's `first_audio` - the first `response.output_audio.delta` write.
- **e2e**: voicelat's e2e - (first audio write + the onset of the emulator's audio - speech_end):
  what the listener would have heard with the bytes delivered instantly. It adds the
  simulated playout's frame timer.
- **model vs injected**: the `model` segment (endpoint -> first audio) - the injected 250 ms.

The last line is ``p99_error_ms=<worst P99 of the first audio and e2e errors vs truth>``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import KEY_ENV, MS, Profile, dist_ms, fmt, machine_line, serve, write_fixture

from voicelat.audio import first_audible_sample
from voicelat.audio.wav import PCM
from voicelat.core.base.plan import plan_turns
from voicelat.core.base.turn import Turn
from voicelat.emulate.content import tone_speech
from voicelat.engine.runner import Runner
from voicelat.files.fixtures import load_fixtures
from voicelat.files.pipeline import Pipeline, parse_pipeline

RATE = 24000
METRICS = ("endpoint", "first_audio", "e2e", "model_vs_injected")


@dataclass
class RealtimeProfile(Profile):
    """The realtime emulator's exact delays (the cascade fields of Profile are unused)."""

    response_created: float = 30.0
    first_audio: float = 250.0
    audio_chunk: float = 20.0
    chunk_ms: float = 40.0
    reply: str = "Sure, it is sunny and mild in Paris today."

    def toml(self) -> str:
        return (
            'seed = 1\n["openai-realtime"]\n["openai-realtime".latency]\n'
            f"response_created = {self.response_created}\nfirst_audio = {self.first_audio}\n"
            f"audio_chunk = {self.audio_chunk}\n"
            '["openai-realtime".content]\n'
            f'reply = "{self.reply}"\nleading_silence_ms = {self.leading_silence_ms}\n'
            f"ms_per_char = {self.ms_per_char}\nchunk_ms = {self.chunk_ms}\n"
            f'["openai-realtime".wire]\ntimer = "{self.timer}"\n'
        )


def realtime_pipeline(base_url: str) -> Pipeline:
    """pipelines/emulated-openai-realtime.toml's [s2s] against ``base_url``."""
    return parse_pipeline(
        {
            "pipeline": {"name": "bench-openai-realtime"},
            "s2s": {
                "stage": "openai-realtime",
                "base_url": base_url.replace("http://", "ws://"),
                "model": "gpt-realtime",
                "turn_detection": "server_vad",
                "vad": {"silence_duration_ms": 500, "prefix_padding_ms": 300},
                "api_key_env": KEY_ENV,
            },
        }
    )


def _onset_ns(p: RealtimeProfile) -> int:
    pcm = tone_speech(
        p.reply, RATE, ms_per_char=p.ms_per_char, leading_silence_ms=p.leading_silence_ms
    )
    onset = first_audible_sample(PCM(pcm, RATE))
    assert onset is not None
    return onset * 1_000_000_000 // RATE


def errors_of(
    turns: list[Turn], truth: list[dict[str, Any]], p: RealtimeProfile
) -> dict[str, list[int]]:
    """Per metric, the error (ns) of every measured turn matched to its session's truth."""
    sessions = sorted(
        (e for e in truth if e["endpoint"] == "realtime" and "first_audio_written" in e["marks"]),
        key=lambda e: e["marks"]["speech_stopped_written"],
    )
    onset = _onset_ns(p)
    out: dict[str, list[int]] = {m: [] for m in METRICS}
    for t in turns:
        if not t.ok:
            continue
        m = {k: t.t0_ns + v for k, v in t.milestones.items()}
        # The turn's own session: the first whose speech_stopped was written before we got it.
        ex = max(
            (e for e in sessions if e["marks"]["speech_stopped_written"] <= m["endpoint"]),
            key=lambda e: e["marks"]["speech_stopped_written"],
            default=None,
        )
        if ex is None:
            continue
        marks = ex["marks"]
        out["endpoint"].append(m["endpoint"] - marks["speech_stopped_written"])
        out["first_audio"].append(m["first_audio"] - marks["first_audio_written"])
        truth_e2e = marks["first_audio_written"] + onset - m["speech_end"]
        out["e2e"].append(int(t.e2e_ns or 0) - truth_e2e)
        out["model_vs_injected"].append(
            t.segments["model"] - round(ex["injected_ms"]["first_audio"][0] * MS)
        )
    return out


def run(turns: int, work: Path) -> dict[str, Any]:
    profile = RealtimeProfile(timer="spin")
    fixtures = write_fixture(work / "fixtures")
    os.environ.setdefault(KEY_ENV, "bench-key")
    with serve(profile, work / "serve", name="openai-realtime") as served:  # type: ignore[arg-type]
        p = realtime_pipeline(served.base_url)
        fx = load_fixtures(fixtures)
        runner = Runner(p, fx, work / f"run-{time.monotonic_ns()}")
        plan = plan_turns([f.id for f in fx], turns=turns, warmup=1)
        t0 = time.monotonic()
        outcome = asyncio.run(runner.run(plan))
        wall = time.monotonic() - t0
    measured = [t for t in outcome.turns if not t.warmup]
    errs = errors_of(measured, served.truth(), profile)
    e2e = [t.e2e_ns for t in measured if t.e2e_ns is not None]
    return {
        "turns": len(measured),
        "failed": sum(t.failed for t in measured),
        "wall_s": round(wall, 1),
        "loadavg_1min": round(os.getloadavg()[0], 2),
        "trust": "ok" if outcome.summary["trust"]["trustworthy"] else "flagged",
        "trust_reasons": [r.get("message", r) for r in outcome.summary["trust"]["reasons"]],
        "loop_lag_ms": dist_ms([float(x) for x in runner.loop_lag.lags]),
        "e2e_ms": dist_ms([float(x) for x in e2e]),
        "errors": {k: dist_ms([float(x) for x in v]) for k, v in errs.items()},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        r = run(args.turns, Path(tmp))
    print(machine_line())
    print(
        f"1 session, {r['turns']} turns ({r['failed']} failed) in {r['wall_s']} s; "
        f"load average {r['loadavg_1min']}; trust {r['trust']}; e2e {fmt(r['e2e_ms'])} ms"
    )
    for reason in r["trust_reasons"]:
        print(f"  trust: {reason}")
    print(f"  event-loop lag P50 / P99 / max {fmt(r['loop_lag_ms'])} ms")
    print(f"  {'metric':<18} {'n':>4}  P50 / P99 / max (ms)")
    for name, d in r["errors"].items():
        print(f"  {name:<18} {d['n']:>4}  {fmt(d)}")
    if args.json:
        args.json.write_text(json.dumps(r, indent=2))
    worst = max(r["errors"][k]["p99"] or 0.0 for k in ("first_audio", "e2e"))
    print(f"p99_error_ms={worst:.3f}")


if __name__ == "__main__":
    main()
